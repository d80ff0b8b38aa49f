"""Non-zero tiles of identity matmuls whose encodings a netlist does not carry (pybuda.backend_sim.sparse_figures):
inferred from the shapes of convs and pools this compiler lowered, checked against the exact figures it wrote."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import pybuda
from pybuda.backend_sim.kernels.sparse import decode, encoding_params
from pybuda.backend_sim.sparse_figures import implied_picker, inferred_figures, sparse_geometry
from pybuda.sparse import CoreFigures
from pybuda.codegen.manifest import DevicePart
from pybuda.netlist import load
from pybuda.tools.shared import CALIBRATION_NETLISTS

RESNET50 = CALIBRATION_NETLISTS / "perf_lib__graph_tests__wormhole_b0__inference__resnet50_hifi3_fp16b.yaml"

CASES = {
    "conv 3x3 stride 1": (torch.nn.Conv2d(32, 32, 3, 1, 1), (1, 32, 56, 56)),
    "conv 3x3 stride 2": (torch.nn.Conv2d(32, 32, 3, 2, 1), (1, 32, 56, 56)),
    "conv 1x1 stride 2": (torch.nn.Conv2d(32, 64, 1, 2, 0), (1, 32, 56, 56)),
    "conv 7x7 stride 2": (torch.nn.Conv2d(3, 32, 7, 2, 3), (1, 3, 112, 112)),
    "maxpool 3x3 stride 2": (torch.nn.MaxPool2d(3, 2, 1), (1, 32, 112, 112)),
}


def _stripped(op):
    """The op as a legacy netlist states it: no non-zero figures."""
    return dataclasses.replace(op, attributes=dataclasses.replace(op.attrs, indices_len=None, sparse_nz_ublocks=None,
                                                                  sparse_nz_strips=None))


def _identity_ops(netlist):
    return [op for g in netlist.graphs.values() for op in g.ops.values() if op.attrs.identity]


def _exact_figures(op, encoding: np.ndarray) -> CoreFigures:
    """The busiest core's non-zero tiles, ublocks and strips, decoded from the encoding the compiler wrote."""
    params = encoding_params(op)
    per_core = []
    for words in encoding.reshape(op.grid_size[0], -1):
        entries = np.array(decode(words, **params), dtype=np.int64).reshape(-1, 4)
        strip = entries[:, 0] * op.geometry.m_k + entries[:, 2] // params["u_kt"]
        ublock = strip * op.mblock[0] + entries[:, 1] // op.ublock[0]
        per_core.append(CoreFigures(len(entries), len(np.unique(ublock)), len(np.unique(strip))))
    return max(per_core, key=lambda f: f.nz_tiles)


@pytest.fixture(scope="module", params=list(CASES), ids=list(CASES))
def compiled(request, tmp_path_factory):
    """(case, [(identity op, exact figures)]) of a conv or pool compiled by this compiler."""
    torch.manual_seed(0)
    model, shape = CASES[request.param]
    out = pybuda.compile(model.eval(), torch.randn(*shape), device="e150",
                         output_dir=tmp_path_factory.mktemp("sparse"))
    rt = out.runtime
    feeds = {q: f for part in rt.manifest.parts if isinstance(part, DevicePart) for q, f in part.queues.items()}
    return request.param, [(op, _exact_figures(op, rt.arrays[feeds[op.inputs[2]].array]))
                           for op in _identity_ops(rt.netlist)]


def _errors(pairs) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"nz_tiles": [], "nz_ublocks": [], "nz_strips": []}
    for op, exact in pairs:
        g = op.geometry
        inferred = inferred_figures(g.k_tiles, g.u_kt, op.grid_size[0], g.t, g.mblock[0], g.ublock[0])
        for field in out:
            out[field].append(getattr(inferred, field) / getattr(exact, field) - 1)
    return out


def test_inferred_figures_match_the_compilers_exact_figures(compiled):
    name, pairs = compiled
    assert pairs and all(op.attrs.indices_len == exact.nz_tiles and op.attrs.sparse_nz_ublocks == exact.nz_ublocks
                         and op.attrs.sparse_nz_strips == exact.nz_strips for op, exact in pairs)
    inferred = [sparse_geometry(_stripped(op)).attrs.indices_len for op, _ in pairs]
    exact = [e.nz_tiles for _, e in pairs]
    errors = _errors(pairs)
    assert errors["nz_tiles"] == [i / e - 1 for i, e in zip(inferred, exact)]
    if name.startswith("maxpool"):
        # one sparse matmul per tap here; a tap's offset is not in its shapes: misaligned taps read up to 14 % more
        # tiles, and a tap one image row up (112 pixels = 3.5 tiles) splits twice the ublocks over strips
        assert abs(sum(inferred) / sum(exact) - 1) <= 0.10
        assert all(abs(e) <= 0.15 for e in errors["nz_tiles"] + errors["nz_strips"]), errors
        assert all(-0.5 <= e <= 0.0 for e in errors["nz_ublocks"]), errors
    else:
        assert all(abs(e) <= 0.10 for errs in errors.values() for e in errs), errors


def test_exact_figures_are_used_when_present(compiled):
    _, pairs = compiled
    for op, _ in pairs:
        assert sparse_geometry(op) == op.geometry


@pytest.mark.skipif(not RESNET50.exists(), reason="calibration netlists not present")
def test_legacy_resnet50_pickers_have_the_shapes_of_a_conv_or_pool():
    netlist = load(RESNET50)
    ops = _identity_ops(netlist)
    assert len(ops) == 56 and not any(op.attrs.indices_len for op in ops)
    inferred, dense = 0, 0
    for op in ops:
        g = op.geometry
        out_rows = op.grid_size[0] * g.t * g.mblock[0] * g.ublock[0]
        assert implied_picker(g.k_tiles, out_rows).tile_rows == out_rows, op.name
        nz, bound = sparse_geometry(op).attrs.indices_len, g.t * g.k_tiles * g.mblock[0] * g.ublock[0]
        assert 0 < nz <= bound, op.name
        fig = inferred_figures(g.k_tiles, g.u_kt, op.grid_size[0], g.t, g.mblock[0], g.ublock[0])
        assert fig.nz_tiles == nz and fig.nz_strips <= g.t * g.m_k, op.name
        assert fig.nz_strips <= fig.nz_ublocks <= min(nz, g.t * g.m_k * g.mblock[0]), op.name
        inferred, dense = inferred + nz, dense + bound
    assert inferred < dense / 20
