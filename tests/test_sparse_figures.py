"""Non-zero tiles of identity matmuls whose encodings a netlist does not carry (pybuda.backend_sim.sparse_figures):
inferred from the shapes of convs and pools this compiler lowered, checked against the exact figures it wrote."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

import pybuda
from pybuda.backend_sim.sparse_figures import implied_picker, sparse_geometry
from pybuda.netlist import load

RESNET50 = Path("/work/shared/netlists/calibration/"
                "perf_lib__graph_tests__wormhole_b0__inference__resnet50_hifi3_fp16b.yaml")

CASES = {
    "conv 3x3 stride 1": (torch.nn.Conv2d(32, 32, 3, 1, 1), (1, 32, 56, 56)),
    "conv 3x3 stride 2": (torch.nn.Conv2d(32, 32, 3, 2, 1), (1, 32, 56, 56)),
    "conv 1x1 stride 2": (torch.nn.Conv2d(32, 64, 1, 2, 0), (1, 32, 56, 56)),
    "conv 7x7 stride 2": (torch.nn.Conv2d(3, 32, 7, 2, 3), (1, 3, 112, 112)),
    "maxpool 3x3 stride 2": (torch.nn.MaxPool2d(3, 2, 1), (1, 32, 112, 112)),
}


def _stripped(op):
    """The op as a legacy netlist states it: no indices_len."""
    return dataclasses.replace(op, attributes=dataclasses.replace(op.attrs, indices_len=None))


def _identity_ops(netlist):
    return [op for g in netlist.graphs.values() for op in g.ops.values() if op.attrs.identity]


@pytest.fixture(scope="module", params=list(CASES), ids=list(CASES))
def compiled(request, tmp_path_factory):
    torch.manual_seed(0)
    model, shape = CASES[request.param]
    out = pybuda.compile(model.eval(), torch.randn(*shape), device="e150",
                         output_dir=tmp_path_factory.mktemp("sparse"))
    return request.param, out.netlist


def test_inferred_nz_tiles_match_the_compilers_exact_figures(compiled):
    name, netlist = compiled
    ops = _identity_ops(netlist)
    assert ops
    exact = [op.attrs.indices_len for op in ops]
    inferred = [sparse_geometry(_stripped(op)).attrs.indices_len for op in ops]
    if name.startswith("maxpool"):
        # one sparse matmul per tap; a tap's offset is not in its shapes (misaligned taps read up to 14 % more)
        assert abs(sum(inferred) / sum(exact) - 1) <= 0.10
        assert all(abs(i / e - 1) <= 0.15 for i, e in zip(inferred, exact))
    else:
        assert all(abs(i / e - 1) <= 0.10 for i, e in zip(inferred, exact)), (exact, inferred)


def test_exact_figures_are_used_when_present(compiled):
    _, netlist = compiled
    for op in _identity_ops(netlist):
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
        inferred, dense = inferred + nz, dense + bound
    assert inferred < dense / 20
