"""Non-zero tiles of identity matmuls whose encodings a netlist does not carry (pybuda.backend_sim.sparse_figures):
inferred from the shapes of the pickers this compiler lowers (conv, pool, resize, pad), checked against the exact
figures it wrote; and of the legacy compiler's concatenation, reshape and resize pickers, built here as its
`sparse_utils` lays them out, checked against their own exact figures."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import pybuda
from pybuda.backend_sim.kernels.sparse import decode, encoding_params
from pybuda.backend_sim.pickers import kind_order
from pybuda.backend_sim.pickers.common import divisors
from pybuda.backend_sim.sparse_figures import bound_figures, inferred, sparse_geometry
from pybuda.codegen.manifest import DevicePart
from pybuda.netlist import load
from pybuda.sparse import CoreFigures, SparseMatrix, busiest_core_figures
from pybuda.tools.shared import CALIBRATION_NETLISTS

RESNET50 = CALIBRATION_NETLISTS / "perf_lib__graph_tests__wormhole_b0__inference__resnet50_hifi3_fp16b.yaml"
TILE = 32
FIELDS = ("nz_tiles", "nz_ublocks", "nz_strips")


class Interpolate(torch.nn.Module):
    def __init__(self, scale: float, mode: str):
        super().__init__()
        self.scale, self.mode = scale, mode

    def forward(self, x):
        return F.interpolate(x, scale_factor=self.scale, mode=self.mode)


class Pad(torch.nn.Module):
    def __init__(self, pads: tuple):
        super().__init__()
        self.pads = pads

    def forward(self, x):
        return F.pad(x, self.pads)


# name: (model, input shape, kind inferred from the op's shapes and name)
CASES = {
    "conv 3x3 stride 1": (torch.nn.Conv2d(32, 32, 3, 1, 1), (1, 32, 56, 56), "conv"),
    "conv 3x3 stride 2": (torch.nn.Conv2d(32, 32, 3, 2, 1), (1, 32, 56, 56), "conv"),
    "conv 1x1 stride 2": (torch.nn.Conv2d(32, 64, 1, 2, 0), (1, 32, 56, 56), "conv"),
    "conv 7x7 stride 2": (torch.nn.Conv2d(3, 32, 7, 2, 3), (1, 3, 112, 112), "conv"),
    "maxpool 3x3 stride 2": (torch.nn.MaxPool2d(3, 2, 1), (1, 32, 112, 112), "conv"),
    "nearest x2 20x20": (Interpolate(2, "nearest"), (1, 32, 20, 20), "upsample"),
    "nearest x2 40x40 (t 2)": (Interpolate(2, "nearest"), (1, 32, 40, 40), "upsample"),
    "nearest x3 14x14": (Interpolate(3, "nearest"), (1, 32, 14, 14), "upsample"),
    "bilinear x2 20x20": (Interpolate(2, "bilinear"), (1, 32, 20, 20), "bilinear"),
    "bilinear x2 40x40 (t 2)": (Interpolate(2, "bilinear"), (1, 32, 40, 40), "bilinear"),
    "bilinear x4 14x14": (Interpolate(4, "bilinear"), (1, 32, 14, 14), "bilinear"),
    "nearest /2 56x56": (Interpolate(0.5, "nearest"), (1, 32, 56, 56), "downsample"),
    "pad 1 28x28": (Pad((1, 1, 1, 1)), (1, 32, 28, 28), "pad"),
    "pad (0, 1) 56x56": (Pad((0, 1, 0, 1)), (1, 32, 56, 56), "pad"),
    "pad 2 20x20": (Pad((2, 2, 2, 2)), (1, 32, 20, 20), "pad"),
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


def _weighted(op) -> bool:
    return op.in_df[0].value != "Bfp2_b"


def _inferred(op, name: str | None = None):
    """(kind, picker, figures) the op's shapes imply, with its own name or `name`."""
    g = op.geometry
    return inferred(g.k_tiles, g.u_kt, op.grid_size[0], g.t, g.mblock[0], g.ublock[0], op.attrs.act_t or 1,
                    kind_order(op.name if name is None else name, _weighted(op)))


def _errors(pairs: list[tuple[CoreFigures, CoreFigures]]) -> dict[str, list[float]]:
    """Relative error of each inferred figure against the exact one, per field."""
    return {f: [getattr(inf, f) / getattr(exact, f) - 1 for inf, exact in pairs] for f in FIELDS}


@pytest.fixture(scope="module", params=list(CASES), ids=list(CASES))
def compiled(request, tmp_path_factory):
    """(case, [(identity op, exact figures)]) of a conv, pool, resize or pad compiled by this compiler."""
    torch.manual_seed(0)
    model, shape, _ = CASES[request.param]
    out = pybuda.compile(model.eval(), torch.randn(*shape), device="e150", output_dir=tmp_path_factory.mktemp("sparse"),
                         config=pybuda.CompilerConfig(enable_conv_prestride=False))   # each geometry's own picker
    rt = out.runtime
    feeds = {q: f for part in rt.manifest.parts if isinstance(part, DevicePart) for q, f in part.queues.items()}
    return request.param, [(op, _exact_figures(op, rt.arrays[feeds[op.inputs[2]].array]))
                           for op in _identity_ops(rt.netlist)]


def test_inferred_figures_match_the_compilers_exact_figures(compiled):
    name, pairs = compiled
    assert pairs and all(op.attrs.indices_len == exact.nz_tiles and op.attrs.sparse_nz_ublocks == exact.nz_ublocks
                         and op.attrs.sparse_nz_strips == exact.nz_strips for op, exact in pairs)
    found = [_inferred(op) for op, _ in pairs]
    assert {kind for kind, _, _ in found} == {CASES[name][2]}
    attrs = [sparse_geometry(_stripped(op)).attrs for op, _ in pairs]
    assert [(a.indices_len, a.sparse_nz_ublocks, a.sparse_nz_strips) for a in attrs] == \
        [(f.nz_tiles, f.nz_ublocks, f.nz_strips) for _, _, f in found]
    errors = _errors([(f, exact) for (_, _, f), (_, exact) in zip(found, pairs)])
    if name.startswith("maxpool"):
        # one sparse matmul per tap here; a tap's offset is not in its shapes: misaligned taps read up to 14 % more
        # tiles, and a tap one image row up (112 pixels = 3.5 tiles) splits twice the ublocks over strips
        inf, exact = sum(f.nz_tiles for _, _, f in found), sum(e.nz_tiles for _, e in pairs)
        assert abs(inf / exact - 1) <= 0.10
        assert all(abs(e) <= 0.15 for e in errors["nz_tiles"] + errors["nz_strips"]), errors
        assert all(-0.5 <= e <= 0.0 for e in errors["nz_ublocks"]), errors
    else:
        assert all(abs(e) <= 0.10 for errs in errors.values() for e in errs), errors


def test_exact_figures_are_used_when_present(compiled):
    _, pairs = compiled
    for op, _ in pairs:
        assert sparse_geometry(op) == op.geometry


def test_the_generic_bound_holds_for_the_compilers_0_1_pickers(compiled):
    _, pairs = compiled
    for op, exact in pairs:
        if not _weighted(op):
            g = op.geometry
            bound = bound_figures(g.k_tiles, g.u_kt, g.t, g.mblock[0], g.ublock[0])
            assert all(getattr(bound, f) >= getattr(exact, f) for f in FIELDS), (op.name, bound, exact)


def _no_kind_fits(op) -> int:
    """Output tile rows (one grid row, t 1, ublock 1) for which no kind fits the op's K, without a name."""
    k, u_kt = op.geometry.k_tiles, op.geometry.u_kt
    return next(m for m in range(k + 1, TILE * k) if inferred(k, u_kt, 1, 1, m, 1, 1, kind_order("op", False))
                is None and inferred(k, u_kt, 1, 1, m, 1, 1, kind_order("op", True)) is None)


@pytest.mark.parametrize("case", ["pad (0, 1) 56x56", "bilinear x2 20x20"])
def test_shapes_no_kind_fits_get_the_generic_bound_or_stay_dense(case, tmp_path):
    model, shape, _ = CASES[case]
    rt = pybuda.compile(model.eval(), torch.randn(*shape), device="e150", output_dir=tmp_path).runtime
    (op,) = _identity_ops(rt.netlist)
    odd = dataclasses.replace(_stripped(op), name="op", grid_size=[1, 1], t=1, mblock=[_no_kind_fits(op), 1],
                              ublock=[1, 1])
    attrs, g = sparse_geometry(odd).attrs, odd.geometry
    if _weighted(op):   # weights: no bound on the non-zeros per row, the dense bound stays
        assert attrs.indices_len is None
    else:
        bound = bound_figures(g.k_tiles, g.u_kt, g.t, g.mblock[0], g.ublock[0])
        assert (attrs.indices_len, attrs.sparse_nz_ublocks, attrs.sparse_nz_strips) == \
            (bound.nz_tiles, bound.nz_ublocks, bound.nz_strips)
        assert bound.nz_tiles == g.mblock[0] * min(TILE, g.k_tiles) < g.mblock[0] * g.k_tiles


def test_act_t_slices_repeat_the_picker(tmp_path):
    """With act_t = t each activation t-slice has its own copy of the picker: twice the figures of one copy."""
    model, shape, _ = CASES["pad 1 28x28"]
    rt = pybuda.compile(model.eval(), torch.randn(*shape), device="e150", output_dir=tmp_path).runtime
    (op,) = _identity_ops(rt.netlist)
    assert op.grid_size[0] == 1 and op.t == 1
    one = sparse_geometry(_stripped(op)).attrs
    two = dataclasses.replace(_stripped(op), t=2)
    sliced = sparse_geometry(dataclasses.replace(two, attributes=dataclasses.replace(two.attrs, act_t=2))).attrs
    assert (sliced.indices_len, sliced.sparse_nz_ublocks, sliced.sparse_nz_strips) == \
        (2 * one.indices_len, 2 * one.sparse_nz_ublocks, 2 * one.sparse_nz_strips)
    assert _inferred(two)[1] != _inferred(op)[1]   # without act_t: one picker of twice the rows


def test_kind_order_follows_the_op_name_then_the_format():
    shapes_only = ("conv", "upsample", "downsample", "pad", "concat", "reshape", "bilinear")
    assert kind_order("op0", weighted=False) == shapes_only
    assert kind_order("op0", weighted=True) == ("bilinear",) + shapes_only[:-1]
    assert kind_order("conv2d_0.dc.conv2d.3.dc.sparse_matmul.9", weighted=False)[0] == "conv"
    assert kind_order("max_pool2d_14.dc.sparse_matmul.5.lc2", weighted=False)[0] == "conv"
    assert kind_order("resize2d_3.dc.sparse_matmul.4", weighted=False)[:3] == ("upsample", "downsample", "bilinear")
    assert kind_order("resize2d_3.dc.sparse_matmul.4", weighted=True)[0] == "bilinear"
    assert kind_order("constant_pad_0.dc.sparse_matmul.3", weighted=False)[0] == "pad"
    assert kind_order("concatenate_312.dc.sparse_matmul.2.lc2", weighted=False)[0] == "concat"
    assert kind_order("reshape_7.dc.sparse_matmul.1", weighted=False)[:2] == ("concat", "reshape")


# ---- legacy pickers, laid out as the legacy compiler's sparse_utils lays them out --------------------------------

def _aligned(n: int) -> int:
    return -(-n // TILE) * TILE


def _concat(lengths: list[int]) -> SparseMatrix:
    """Padding removal after a concatenation of inputs of `lengths` rows, each padded to whole tiles: output row r
    reads r's row of its input at that input's tile-aligned offset (eltwise_nary.py `concatenate`); equal lengths
    are also the flattened padding removal of a reshape (`create_flattened_padding_removal_sparse_picker_matrix`)."""
    starts = np.cumsum([0] + [_aligned(n) for n in lengths])[:-1]
    cols = np.concatenate([s + np.arange(n) for s, n in zip(starts, lengths)])
    return SparseMatrix.from_coo((_aligned(len(cols)), int(sum(_aligned(n) for n in lengths))),
                                 np.arange(len(cols)), cols)


def _spread(runs: int, length: int) -> SparseMatrix:
    """Reshape flatten/unflatten: run i of `length` packed rows to the top of output tile i
    (`create_reshape_flatten_sparse_picker_matrix` with length 1, its `_narrower` form otherwise)."""
    rows = (TILE * np.arange(runs)[:, None] + np.arange(length)).ravel()
    return SparseMatrix.from_coo((TILE * runs, _aligned(runs * length)), rows, np.arange(runs * length))


def _downsample(rows: int, stride: int) -> SparseMatrix:
    """Nearest downsampling of one axis: output row r reads row stride x r
    (`create_nearest_neighbor_downsample_picker_matrix`)."""
    out = np.arange(rows // stride)
    return SparseMatrix.from_coo((_aligned(len(out)), _aligned(rows)), out, out * stride)


def _upsample(width: int, scale: int) -> SparseMatrix:
    """Nearest upsampling of a width x width image: each input row's pixels repeated `scale` times, the row
    repeated `scale` times (`create_nearest_neighbor_upsample_picker_matrix`)."""
    cols = np.concatenate([np.tile(np.repeat(np.arange(width), scale), scale) + i * width for i in range(width)])
    return SparseMatrix.from_coo((_aligned(len(cols)), _aligned(width * width)), np.arange(len(cols)), cols)


# name: (picker, op name, copies (act_t), kind, max |error| of tiles, of ublocks and strips)
LEGACY = {
    "concat 19200+4800+1200 rows (YOLO head)": (_concat([19200, 4800, 1200]), "concatenate_312", 1, "concat", 0, 0),
    "concat 4 x 400 rows": (_concat([400] * 4), "concatenate_21", 1, "concat", 0, 0),
    "concat 16+16 channels": (_concat([16, 16]), "concatenate_7", 1, "concat", 0, 0),
    "concat 4 x 3 channels": (_concat([3] * 4), "concatenate_1", 1, "concat", 0, 0),
    "concat 40+50+70 rows": (_concat([40, 50, 70]), "concatenate_9", 1, "concat", 0.10, 0),
    "concat 100+200+300+400 rows": (_concat([100, 200, 300, 400]), "concatenate_9", 1, "concat", 0.12, 0),
    "concat 1200+300 rows": (_concat([1200, 300]), "concatenate_9", 1, "concat", 0.25, 0.05),
    "concat 2 x 50 rows": (_concat([50, 50]), "concatenate_9", 1, "concat", 0.50, 0),
    "concat 40+50 rows per slice, act_t 8": (_concat([40, 50]), "concatenate_9", 8, "concat", 0, 0),
    "reshape flatten 85 rows": (_spread(85, 1), "reshape_5", 1, "reshape", 0, 0),
    "reshape flatten 400 rows": (_spread(400, 1), "reshape_5", 1, "reshape", 0, 0),
    "reshape unflatten 100 x 10 rows": (_spread(100, 10), "reshape_5", 1, "reshape", 0, 0),
    "reshape unpad 100 x 85 of 96 rows": (_concat([85] * 100), "reshape_5", 1, "concat", 0.05, 0.25),
    "reshape one row of each of 400 tiles": (_concat([1] * 400), "reshape_5", 1, "concat", 0, 0),
    "reshape unpad 20 x 13 of 32 rows": (_concat([13] * 20), "reshape_5", 1, "concat", 0, 0.5),
    "resize nearest /2 of 80 rows, act_t 16": (_downsample(80, 2), "resize2d_4", 16, "downsample", 0, 0),
    "resize nearest /4 of 160 rows": (_downsample(160, 4), "resize2d_4", 1, "downsample", 0.20, 0),
    "resize nearest x2 of 20x20": (_upsample(20, 2), "resize2d_4", 1, "upsample", 0, 0),
    "resize nearest x2 of 80x80": (_upsample(80, 2), "resize2d_4", 1, "upsample", 0, 0),
}


def _layouts(tile_rows: int, k_tiles: int, copies: int) -> list[tuple[int, int, int, int, int]]:
    """A few (grid rows, t, mblock_m, ublock_rt, u_kt) layouts of `copies` x `tile_rows` output tile rows: the two
    largest grid rows up to 10 dividing a copy's rows, t the two smallest multiples of the copies, the largest
    ublock up to 4, the largest u_kt up to 8."""
    out = []
    for g in [d for d in divisors(tile_rows) if d <= 10][-2:]:
        for t in [copies * d for d in divisors(tile_rows // g)][:2]:
            m = copies * tile_rows // (g * t)
            ub = max(d for d in divisors(m) if d <= 4)
            out.append((g, t, m // ub, ub, max(d for d in divisors(k_tiles) if d <= 8)))
    return out


def _legacy_pairs(name: str) -> list[tuple[CoreFigures, CoreFigures, tuple, str]]:
    """(inferred, exact, layout, kind) of a legacy picker in each of its layouts."""
    matrix, op_name, copies, _, _, _ = LEGACY[name]
    m, k = matrix.shape[0] // TILE, matrix.shape[1] // TILE
    rows, cols, _ = matrix.tiles()
    rows, cols = (rows + m * np.arange(copies)[:, None]).ravel(), np.tile(cols, copies)
    out = []
    for g, t, mb, ub, u_kt in _layouts(m, k, copies):
        exact = busiest_core_figures(rows, cols, k_tiles=k, u_kt=u_kt, grid_rows=g, mblock_m=mb, ublock_rt=ub)
        kind, _, fig = inferred(k, u_kt, g, t, mb, ub, copies, kind_order(op_name, weighted=False))
        out.append((fig, exact, (g, t, mb, ub, u_kt), kind))
    return out


@pytest.mark.parametrize("name", list(LEGACY))
def test_legacy_concat_reshape_and_resize_pickers_are_inferred(name):
    _, _, _, kind, tiles_tol, other_tol = LEGACY[name]
    found = _legacy_pairs(name)
    assert found and {k for *_, k in found} == {kind}
    errors = _errors([(fig, exact) for fig, exact, _, _ in found])
    assert all(abs(e) <= tiles_tol + 1e-9 for e in errors["nz_tiles"]), errors
    assert all(abs(e) <= other_tol + 1e-9 for f in FIELDS[1:] for e in errors[f]), errors


@pytest.mark.parametrize("name", list(LEGACY))
def test_the_generic_bound_holds_for_legacy_pickers(name):
    for _, exact, (g, t, mb, ub, u_kt), _ in _legacy_pairs(name):
        bound = bound_figures(LEGACY[name][0].shape[1] // TILE, u_kt, t, mb, ub)
        assert all(getattr(bound, f) >= getattr(exact, f) for f in FIELDS), (name, bound, exact)


@pytest.mark.skipif(not RESNET50.exists(), reason="calibration netlists not present")
def test_legacy_resnet50_pickers_have_the_shapes_of_a_conv_or_pool():
    netlist = load(RESNET50)
    ops = _identity_ops(netlist)
    assert len(ops) == 56 and not any(op.attrs.indices_len for op in ops)
    inferred_tiles, dense = 0, 0
    for op in ops:
        g = op.geometry
        kind, picker, fig = _inferred(op)
        assert kind == "conv" and _inferred(op, name="op")[1] == picker, op.name
        nz, bound = sparse_geometry(op).attrs.indices_len, g.t * g.k_tiles * g.mblock[0] * g.ublock[0]
        assert 0 < nz <= bound and fig.nz_tiles == nz and fig.nz_strips <= g.t * g.m_k, op.name
        assert fig.nz_strips <= fig.nz_ublocks <= min(nz, g.t * g.m_k * g.mblock[0]), op.name
        inferred_tiles, dense = inferred_tiles + nz, dense + bound
    assert inferred_tiles < dense / 20
