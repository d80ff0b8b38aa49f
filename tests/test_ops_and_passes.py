"""Op registry, decompositions, lowering and balancer units, each against an independent numpy result."""
from __future__ import annotations

import numpy as np
import pytest

from pybuda.balancer.op_model import best_ublock, legal_op_models
from pybuda.balancer.placer import place
from pybuda.balancer import BalancerError
from pybuda.config import CompilerConfig
from pybuda.device import get_device
from pybuda.errors import InternalError
from pybuda.ir import Graph
from pybuda.ops import add_op, registry
from pybuda.ops.conv import conv_picker
from pybuda.passes.data_formats import assign_data_formats
from pybuda.passes.decompose import decompose
from pybuda.passes.lower import lower
from pybuda.passes.host_io import hoist_io_transforms
from pybuda.passes.optimize import optimize
from pybuda.verify import evaluate_sample, host_inputs, host_outputs

RNG = np.random.default_rng(0)


def _single_op_graph(op_type, shapes, attrs, params=()):
    g = Graph("g")
    names = []
    for i, s in enumerate(shapes):
        if i in params:
            names.append(g.add_parameter(f"p{i}", RNG.standard_normal(s).astype(np.float32)))
        else:
            names.append(g.add_input(f"x{i}", s))
    g.add_output("out", add_op(g, "op", op_type, names, attrs))
    return g


def _golden(g, inputs):
    feeds = {f"x{i}": x for i, x in enumerate(inputs)}
    return host_outputs(g, evaluate_sample(g, host_inputs(g, feeds)))[0]


CASES = [
    ("softmax", [(1, 5, 40)], {"dim": -1}, ()),
    ("log_softmax", [(1, 3, 10)], {"dim": -1}, ()),
    ("layernorm", [(1, 7, 64), (64,), (64,)], {"dim": -1, "epsilon": 1e-5}, (1, 2)),
    ("reduce_sum", [(1, 33, 50)], {"dim": -2}, ()),
    ("reduce_avg", [(1, 33, 50)], {"dim": -1}, ()),
    ("reduce_max", [(1, 33, 50)], {"dim": -1}, ()),
    ("conv2d", [(1, 3, 9, 9), (8, 3, 3, 3), (8,)], {"stride": 2, "padding": 1}, (1, 2)),
    ("max_pool2d", [(1, 4, 9, 9)], {"kernel": 3, "stride": 2, "padding": 1}, ()),
    ("matmul", [(1, 40, 70), (70, 20)], {}, (1,)),
    ("divide", [(1, 8, 8), (1, 8, 8)], {}, ()),
    ("transpose", [(1, 40, 70)], {"dim0": -2, "dim1": -1}, ()),
]


@pytest.mark.parametrize("op_type, shapes, attrs, params", CASES, ids=[c[0] for c in CASES])
def test_every_stage_preserves_the_op_golden(op_type, shapes, attrs, params):
    g = _single_op_graph(op_type, shapes, attrs, params)
    inputs = [RNG.standard_normal(s).astype(np.float32) for i, s in enumerate(shapes) if i not in params]
    if op_type == "divide":
        inputs[1] = np.abs(inputs[1]) + 0.5
    expected = _golden(g, inputs)
    cfg = CompilerConfig(enable_conv_prestride=False)   # the device decomposition (prestride is a host op)
    stage = decompose(g.copy(), cfg)
    composite = {"softmax", "log_softmax", "layernorm", "conv2d", "max_pool2d", "divide"}
    assert not composite & {n.op_type for n in stage.nodes("op")}
    np.testing.assert_allclose(_golden(stage, inputs), expected, rtol=1e-4, atol=1e-4)
    stage = hoist_io_transforms(optimize(stage, cfg))
    np.testing.assert_allclose(_golden(stage, inputs), expected, rtol=1e-4, atol=1e-4)
    low = assign_data_formats(lower(stage, cfg), cfg, "grayskull")
    assert all(registry.get(n.op_type).buda for n in low.nodes("op"))
    assert all(n.shape[-1] % 32 == 0 and n.shape[-2] % 32 == 0 for n in low.nodes())
    np.testing.assert_allclose(_golden(low, inputs), expected, rtol=1e-4, atol=1e-4)


def test_conv_picker_selects_window_pixels():
    sparse, ho, wo, rows = conv_picker(5, 5, (3, 3), {"stride": 1, "padding": 0}, clamp=False)
    picker = sparse.toarray()
    assert (ho, wo, rows) == (3, 3, 32) and picker.shape == (9 * 32, 25)
    img = np.arange(25, dtype=np.float32)
    taps = (picker @ img).reshape(9, 32)[:, :9]
    # tap (i, j) of output (oy, ox) reads pixel (oy + i, ox + j)
    assert taps[0, 0] == 0 and taps[8, 0] == 12 and taps[4, 8] == 18
    assert not picker[9:32].any()  # padding rows of a tap select nothing


def test_best_ublock_respects_dest_limit_and_prefers_wide():
    assert best_ublock(4, 4, 8) in ((2, 4),)
    assert best_ublock(3, 5, 8) == (1, 5)
    assert best_ublock(8, 8, 4) == (1, 4)


def test_legal_models_divide_tensor_and_fit_device():
    g = _single_op_graph("matmul", [(1, 256, 512), (512, 320)], {}, params=(1,))
    cfg = CompilerConfig()
    low = assign_data_formats(lower(optimize(decompose(g, cfg), cfg), cfg), cfg, "grayskull")
    dev = get_device("e150")
    models = legal_op_models(low, "op", dev)
    assert models
    for m in models:
        assert 8 % m.grid[0] == 0 and 10 % m.grid[1] == 0
        assert m.grid[0] <= dev.grid_rows and m.grid[1] <= dev.grid_cols
        assert m.ublock[0] * m.ublock[1] <= 8
        assert m.m_k * m.u_kt == 16
        assert m.grid[0] * m.mblock[0] * m.ublock[0] == 8 and m.grid[1] * m.mblock[1] * m.ublock[1] == 10
        assert m.l1_bytes <= dev.l1_usable and m.cycles > 0
    # more cores, fewer cycles per core
    one = min(m.cycles for m in models if m.grid == (1, 1))
    many = min(m.cycles for m in models if m.grid == (8, 10))
    assert many < one


def test_placer_first_fit_and_new_epoch():
    dev = get_device("e75")
    grids = {"a": (8, 6), "b": (8, 6), "c": (1, 1), "d": (2, 2)}
    placed = place(["a", "b", "c", "d"], grids, dev, breaks={"d"})
    assert placed["a"].loc == (0, 0) and placed["b"].loc == (0, 6) and placed["b"].epoch == 0
    assert placed["c"].epoch == 1 and placed["c"].loc == (0, 0)
    assert placed["d"].epoch == 2
    with pytest.raises(BalancerError, match="leaves the 8x12 core grid"):
        place(["a"], grids, dev, starts={"a": (1, 0)})


def test_unknown_op_type_suggests_names():
    with pytest.raises(registry.OpError, match="did you mean"):
        registry.get("softmx")


def test_shape_errors_name_the_op():
    g = Graph("g")
    a, b = g.add_input("a", (4, 8)), g.add_input("b", (9, 4))
    with pytest.raises(registry.OpError, match="'bad'.*inner dimensions"):
        add_op(g, "bad", "matmul", [a, b])


def test_large_conv_picker_is_a_sparse_matmul():
    """A 7x7/2 window over 224x224 needs a 614656 x 50176 picker: it is kept sparse (no dense constant). (Over a
    model input it is prestrided by default: here the conv's own picker.)"""
    g = _single_op_graph("conv2d", [(1, 3, 224, 224), (64, 3, 7, 7)], {"stride": 2, "padding": 3}, params=(1,))
    decompose(g, CompilerConfig(enable_conv_prestride=False))
    sparse = [n for n in g.nodes("op") if n.op_type == "sparse_matmul"]
    assert len(sparse) == 1 and sparse[0].attrs["sparse"].shape == (49 * 12544, 224 * 224)
    assert sparse[0].attrs["sparse"].nnz < 49 * 12544  # one pixel per tap and output, fewer at the borders
    assert all(n.value.size < 2**20 for n in g.nodes("constant"))


def test_op_groups_are_declared_and_hold_the_op_types_they_describe():
    """The passes and the balancer ask the registry's groups; a group holds op types of the level it concerns."""
    buda = {n for n in registry.names() if registry.get(n).buda}
    assert registry.in_group("fusable") <= buda and registry.in_group("streamable") <= buda
    assert registry.in_group("inner_dim") == {"matmul", "sparse_matmul", "reduce"}
    for group in ("rearranging", "host_input_tm", "host_output_tm"):
        assert all(registry.get(n).kind == "tm" for n in registry.in_group(group)), group
    assert "fused_op" in registry.in_group("streamable") - registry.in_group("fusable")
    assert registry.belongs("transpose", "host_input_tm") and not registry.belongs("narrow", "host_input_tm")
    with pytest.raises(InternalError, match="unknown op group 'fuseable'; groups: fusable"):
        registry.belongs("add", "fuseable")
    with pytest.raises(InternalError, match="op 'x': unknown group fusible"):
        registry.OpDef("x", lambda s, a: s[0], lambda v, a: v[0], groups={"fusible"})


def test_the_golden_eval_and_the_simulator_share_one_reference_numerics():
    """gelu_derivative and the packer relu: the registry's eval and the simulator's kernel both call
    pybuda.arch.numerics, so they agree to float32 rounding."""
    from types import SimpleNamespace

    from pybuda.backend_sim.kernels.common import packer_relu
    from pybuda.backend_sim.kernels.eltwise import unary_value
    from pybuda.netlist import Attributes

    x = RNG.standard_normal((1, 1, 32, 64)).astype(np.float32) * 3
    for approximate, mode in (("none", False), ("tanh", True)):
        golden = registry.evaluate("gelu_derivative", [x], {"approximate": approximate})
        simulated = unary_value("gelu_derivative", Attributes(approximate_mode=mode), x)
        np.testing.assert_array_equal(golden, simulated)
    for relu_mode in ("min", "max"):
        attrs = {"relu_en": True, "relu_threshold": 0.5, "relu_mode": relu_mode}
        op = SimpleNamespace(name="n", attrs=Attributes(**attrs))   # what the kernel reads of a netlist op
        np.testing.assert_array_equal(registry.evaluate("nop", [x], attrs), packer_relu(op, x))
