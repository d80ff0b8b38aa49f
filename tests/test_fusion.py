"""The fuse stage (pybuda-passes.md §8): which ops fuse, each limit and rule with a case accepted and one refused
for the stated reason, schedules, dest and intermediate routing, the config switches, the netlist form (fused_ops,
deduplication), the cost of a fused op and its numerics."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import pybuda
from pybuda.config import CompilerConfig
from pybuda.ir import Graph, Operand
from pybuda.ops import add_op
from pybuda.passes.fuse import FusionError, build_group, find_groups, fuse, fusable
from pybuda.verify import evaluate_sample

from models import MLP, Attention

RNG = np.random.default_rng(0)
TILE = (1, 1, 64, 64)


def _graph() -> Graph:
    g = Graph("g")
    g.add_input("x", TILE)
    return g


def _const(g: Graph, name: str, shape=TILE) -> str:
    return g.add_constant(name, RNG.standard_normal(shape))


def _fused(g: Graph, arch: str = "wormhole_b0", **config) -> Graph:
    """`g` fused (a copy), checked to compute what it computed before."""
    feeds = {n.name: RNG.standard_normal(n.shape).astype(np.float32) for n in g.inputs()}
    before = evaluate_sample(g, feeds)
    out = fuse(g.copy(), CompilerConfig(**config), arch)
    after = evaluate_sample(out, feeds)
    for name, value in before.items():
        np.testing.assert_allclose(after[name], value, rtol=1e-5, atol=1e-5)
    return out


def _fused_ops(g: Graph) -> list:
    return [n for n in g.nodes("op") if n.op_type == "fused_op"]


def _chain(g: Graph, n: int, start: str = "x", op: str = "exp") -> str:
    prev = start
    for i in range(n):
        prev = add_op(g, f"{op}{i}", op, [prev])
    return prev


def test_a_chain_of_eltwise_ops_becomes_one_fused_op_through_dest():
    g = _graph()
    b = _const(g, "b")
    a = add_op(g, "add", "add", ["x", b])
    out = _chain(g, 2, a, "gelu")
    g.add_output("y", out)
    fused = _fused(g)
    (node,) = _fused_ops(fused)
    group = node.attrs["fused"]
    assert node.name == "_fused_op_0" and [s.name for s in group.sub_ops] == ["add", "gelu0", "gelu1"]
    assert [s.output.netlist_name for s in group.sub_ops] == ["dest", "dest", "output"]
    assert group.intermediates == 0 and group.inputs == 2
    assert [o.src for o in fused.operands(node.name)] == ["x", "b"]


def test_only_fusable_ops_join():
    g = _graph()
    w = g.add_parameter("w", RNG.standard_normal(TILE))
    mm = add_op(g, "mm", "matmul", ["x", w])                   # a dense matmul with a weight: not fusable
    ones = _const(g, "ones", (1, 1, 64, 32))
    red = add_op(g, "sum", "matmul", ["x", ones])              # a row reduction (constant one tile column): fusable
    assert not fusable(g, mm) and fusable(g, red)
    assert fusable(g, add_op(g, "r", "reduce", [mm], {"dim": "c", "type": "max"}))
    assert not fusable(g, add_op(g, "rr", "reduce", [mm], {"dim": "r", "type": "max"}))


def test_a_reduction_ends_its_schedule_and_ops_of_another_width_stay_apart():
    """softmax's tail: sum (a row reduction, one tile column) -> reciprocal -> multiply (broadcast back, full width):
    the narrow pair fuses, the wide multiply keeps its grid columns."""
    g = _graph()
    ones = _const(g, "ones", (1, 1, 64, 32))
    s = add_op(g, "sum", "matmul", ["x", ones])
    r = add_op(g, "recip", "reciprocal", [s])
    m = add_op(g, "mul", "multiply", ["x", Operand(r, (("broadcast", "c", 2),))])
    g.add_output("y", m)
    fused = _fused(g)
    (node,) = _fused_ops(fused)
    assert [[s.name for s in sched] for sched in node.attrs["fused"].schedules] == [["sum"], ["recip"]]
    assert node.attrs["fused"].sub_ops[0].attributes == {"m_k": 1, "u_kt": 2}
    assert fused.node("mul").op_type == "multiply"
    assert [(o.src, o.tms) for o in fused.operands("mul")][1] == (node.name, (("broadcast", "c", 2),))


def test_dest_reuse_rules():
    g = _graph()
    b = _const(g, "b")
    a = add_op(g, "add", "add", [b, "x"])          # the next op reads it as operand 1
    m = add_op(g, "mul", "multiply", ["x", a])
    n = add_op(g, "nop", "nop", [m], {"relu_en": True})
    out = add_op(g, "exp", "exp", [n])
    g.add_output("y", out)
    on_gs = _fused_ops(_fused(g, "grayskull"))[0].attrs["fused"].sub_ops
    on_wh = _fused_ops(_fused(g, "wormhole_b0"))[0].attrs["fused"].sub_ops
    # grayskull takes dest on operand 0 (srcA) only, and operands are not swapped for it (srcA keeps fewer bits)
    assert on_gs[0].output.kind == "intermed" and [r.netlist_name for r in on_gs[1].inputs] == ["input1", "intermed0"]
    assert [r.netlist_name for r in on_wh[1].inputs] == ["input1", "dest"]
    # a relu producer does not hand on through dest (the packer applies the relu on the way to L1)
    assert on_wh[2].output.kind == "intermed" and on_wh[3].inputs[0].kind == "intermed"


def test_a_value_read_twice_or_by_a_matmul_goes_to_an_intermediate():
    g = _graph()
    e = add_op(g, "exp", "exp", ["x"])
    sq = add_op(g, "sq", "multiply", [e, e])                   # read twice: no dest
    g.add_output("y", sq)
    (node,) = _fused_ops(_fused(g))
    exp, mul = node.attrs["fused"].sub_ops
    assert exp.output.netlist_name == "intermed0" and [r.netlist_name for r in mul.inputs] == ["intermed0"] * 2
    assert [r.netlist_name for r in mul.pop_last] == ["intermed0"]


def test_intermediate_buffers_are_reused_within_a_schedule():
    g = _graph()
    prev = "x"
    for i in range(10):   # maximum never hands on through dest: a chain of intermediates, one buffer reused
        prev = add_op(g, f"max{i}", "maximum", [prev, _const(g, f"c{i}")])
    g.add_output("y", prev)
    groups = _fused_ops(_fused(g))
    assert groups and all(n.attrs["fused"].intermediates == 1 for n in groups)


def test_limits_cut_groups():
    """inputs <= 8 (a fused op starting an epoch reads each from DRAM): a chain of adds of constants is cut."""
    g = _graph()
    prev = "x"
    for i in range(20):
        prev = add_op(g, f"add{i}", "add", [prev, _const(g, f"c{i}")])
    g.add_output("y", prev)
    fused = _fused(g)
    groups = _fused_ops(fused)
    assert len(groups) >= 3
    assert all(node.attrs["fused"].inputs <= 8 for node in groups)
    members = [n for n in g.topo_order() if g.node(n).kind == "op"][:8]     # x and eight constants: nine inputs
    with pytest.raises(FusionError, match="9 inputs"):
        build_group(g, members, "wormhole_b0")


def test_build_group_refuses_too_many_intermediates():
    """Values read by a later schedule keep their buffer: nine exps and the sum exceed the eight intermediates."""
    g = _graph()
    ones = _const(g, "ones", (1, 1, 64, 32))
    exps = [add_op(g, f"e{i}", "exp", ["x"]) for i in range(9)]
    red = add_op(g, "sum", "matmul", [exps[0], ones])                   # ends the first schedule
    prev = add_op(g, "b", "multiply", ["x", Operand(red, (("broadcast", "c", 2),))])
    for i, e in enumerate(exps):
        prev = add_op(g, f"acc{i}", "add", [prev, e])
    members = [n for n in g.topo_order() if g.node(n).kind == "op"]
    with pytest.raises(FusionError, match="10 intermediate buffers"):
        build_group(g, members, "wormhole_b0")


def test_an_input_through_a_transpose_cannot_be_fused():
    g = _graph()
    e = add_op(g, "exp", "exp", [Operand("x", (("transpose",),))])
    with pytest.raises(FusionError, match="transpose"):
        build_group(g, [e, add_op(g, "log", "log", [e])], "wormhole_b0")


def test_internal_edges_take_no_tm_but_a_column_broadcast_of_one_tile_column():
    g = _graph()
    e = add_op(g, "exp", "exp", ["x"])
    h = add_op(g, "log", "log", [Operand(e, (("hslice", 2),))])      # an hslice between them: no group
    g.add_output("y", h)
    assert not _fused_ops(_fused(g))


def test_groups_stay_convex():
    """a -> mm (not fusable) -> c and a -> c: a and c cannot be one fused op (mm would read inside it)."""
    g = _graph()
    w = g.add_parameter("w", RNG.standard_normal(TILE))
    a = add_op(g, "a", "exp", ["x"])
    mm = add_op(g, "mm", "matmul", [a, w])
    c = add_op(g, "c", "add", [a, mm])
    g.add_output("y", add_op(g, "d", "gelu", [c]))
    fused = _fused(g)
    for node in _fused_ops(fused):
        names = {s.name for s in node.attrs["fused"].sub_ops}
        assert not {"a", "c"} <= names


def test_a_group_keeps_one_output():
    """exp0 is read outside the group (by the output y2): the group ends there, its consumers group apart."""
    g = _graph()
    e0 = add_op(g, "exp0", "exp", ["x"])
    e1 = add_op(g, "exp1", "exp", [add_op(g, "neg", "gelu", [e0])])
    g.add_output("y1", add_op(g, "log", "log", [e1]))
    g.add_output("y2", e0)
    fused = _fused(g)
    for node in _fused_ops(fused):
        outside = [u for u, _ in fused.users(node.name)]
        assert outside   # only the output sub-op is read outside
    assert "exp0" not in {s.name for n in _fused_ops(fused) for s in n.attrs["fused"].sub_ops[:-1]}


def test_ops_of_another_fidelity_or_accumulation_do_not_join():
    g = _graph()
    e = add_op(g, "exp", "exp", ["x"])
    lg = add_op(g, "log", "log", [e])
    g.add_output("y", lg)
    g.node(lg).math_fidelity = pybuda.MathFidelity.LoFi
    g.node(e).math_fidelity = pybuda.MathFidelity.HiFi4
    assert not _fused_ops(_fused(g))


def _pair() -> Graph:
    g = _graph()
    g.add_output("y", _chain(g, 3, op="sigmoid"))
    return g


def test_config_switches():
    assert _fused_ops(_fused(_pair()))
    assert not _fused_ops(_fused(_pair(), enable_auto_fusing=False))
    names = lambda g: [[s.name for s in n.attrs["fused"].sub_ops] for n in _fused_ops(g)]
    assert names(_fused(_pair(), op_names_dont_fuse=["sigmoid1"])) == []     # 0 and 2 are not adjacent
    assert names(_fused(_pair(), op_names_manual_fuse=["sigmoid1", "sigmoid2"])) == [["sigmoid1", "sigmoid2"]]
    # legacy regular expressions over whole op names
    assert names(_fused(_pair(), op_names_manual_fuse=["sigmoid[12]"])) == [["sigmoid1", "sigmoid2"]]
    assert names(_fused(_pair(), op_names_dont_fuse=[r"sigmoid\d"])) == []
    assert names(_fused(_pair(), op_names_dont_fuse=["sigmoid"])) == [["sigmoid0", "sigmoid1", "sigmoid2"]]
    cfg = CompilerConfig()
    cfg.balancer_op_override("sigmoid0", "grid_shape", (1, 1))              # an overridden op stays itself
    assert names(fuse(_pair(), cfg, "wormhole_b0")) == [["sigmoid1", "sigmoid2"]]


def test_find_groups_is_deterministic():
    g = _pair()
    assert find_groups(g, set(g.op_names()), "grayskull") == [["sigmoid0", "sigmoid1", "sigmoid2"]]


# ---- compiled ---------------------------------------------------------------------------------------------------

def test_attention_fuses_softmax_and_layernorm_and_matches_torch(tmp_path):
    from models import torch_attention
    model, x = Attention(), torch.randn(2, 64, 64, generator=torch.Generator().manual_seed(0))
    compiled = pybuda.compile(model, x, output_dir=tmp_path, verify=True)
    fused = {n.name: [s.name for s in n.attrs["fused"].sub_ops] for n in _fused_ops(compiled.device_graph)}
    subs = [s for names in fused.values() for s in names]
    assert any(".exp" in s for s in subs) and any(".sqrt" in s for s in subs)       # softmax, layernorm
    nl = compiled.netlist
    assert nl.fused_ops and all(op.attrs.fused_op_id in nl.fused_ops for g in nl.graphs.values()
                                for op in g.ops.values() if op.type == "fused_op")
    np.testing.assert_allclose(compiled(x).numpy(), torch_attention(model, x).numpy(), atol=0.05, rtol=0.02)
    assert compiled.checks[-1].pcc > 0.999


class Blocks(pybuda.PyBudaModule):
    """Two equal blocks (matmul, bias, gelu) with their own op names."""

    def __init__(self):
        super().__init__("blocks")
        g = torch.Generator().manual_seed(3)
        self.w = [pybuda.Parameter(torch.randn(64, 64, generator=g) / 8) for _ in range(2)]
        self.b = [pybuda.Parameter(torch.randn(64, generator=g)) for _ in range(2)]

    def forward(self, x):
        for i in range(2):
            x = pybuda.op.Gelu(f"gelu{i}", pybuda.op.Add(f"bias{i}", pybuda.op.Matmul(f"mm{i}", x, self.w[i]),
                                                          self.b[i]))
        return x


def test_equal_fused_ops_share_one_definition(tmp_path):
    compiled = pybuda.compile(Blocks(), torch.randn(2, 64, 64), output_dir=tmp_path)
    ops = [op for g in compiled.netlist.graphs.values() for op in g.ops.values() if op.type == "fused_op"]
    assert len(ops) == 2 and len(compiled.netlist.fused_ops) == 1
    assert {op.attrs.fused_op_id for op in ops} == {"0"}


def test_a_fused_op_can_be_overridden_by_its_name(tmp_path):
    base = pybuda.compile(MLP(), torch.randn(2, 64, 64), output_dir=tmp_path / "a")
    name = next(n.name for n in _fused_ops(base.device_graph))
    cfg = CompilerConfig()
    cfg.balancer_op_override(name, "grid_shape", (1, 1))
    over = pybuda.compile(MLP(), torch.randn(2, 64, 64), output_dir=tmp_path / "b", config=cfg)
    assert over.netlist.ops[name].grid_size == (1, 1)


def test_a_fused_op_costs_its_sub_ops(tmp_path):
    from pybuda.arch.cycles import kernel_cycles
    compiled = pybuda.compile(MLP(), torch.randn(2, 64, 64), output_dir=tmp_path)
    nl = compiled.netlist
    op = next(op for g in nl.graphs.values() for op in g.ops.values() if op.type == "fused_op")
    perf = next(p for e in compiled.perf.epochs for p in e.ops if p.name == op.name)
    steps = nl.fused_op_of(op).steps(op)
    alone = [kernel_cycles("grayskull", s.op, op.out_df, op.math_fidelity) for s in steps]
    moves = [kernel_cycles("grayskull", dataclasses.replace(s.op, type="nop"), op.out_df, op.math_fidelity)
             for s in steps if s.reads_dest or s.writes_dest]
    # no more than its sub-ops as ops of their own, no less than them without the datacopies dest saves
    assert len(steps) >= 2 and moves and sum(alone) - sum(moves) <= perf.kernel_cycles < sum(alone)


@pytest.mark.parametrize("df, acc, dest", [("Float16_b", "Float16_b", True), ("Bfp8_b", "Float16_b", False),
                                            ("Float32", "Float16", False)])
def test_dest_only_holds_values_in_their_own_format(df, acc, dest):
    """Bfp8_b values would round otherwise in a Float16_b dest, Float32 ones on grayskull's 16-bit dest: they stay
    in intermediates of their own format, so fusion changes no value."""
    g = _pair()
    for n in g.nodes("op"):
        n.df, n.acc_df = pybuda.DataFormat.parse(df), pybuda.DataFormat.parse(acc)
    (node,) = _fused_ops(_fused(g, "grayskull"))
    assert (node.attrs["fused"].sub_ops[0].output.kind == "dest") == dest
    assert node.intermed_df == pybuda.DataFormat.parse(df)


def test_ops_of_another_format_do_not_join():
    g = _pair()
    g.node("sigmoid1").df = pybuda.DataFormat.Bfp8_b
    assert not _fused_ops(_fused(g))


@pytest.mark.parametrize("options", [{}, {"default_df_override": "Bfp8_b", "default_math_fidelity": "LoFi"}],
                         ids=["Float16_b", "Bfp8_b-LoFi"])
def test_fused_and_streamed_netlists_compute_the_unfused_values_bit_for_bit(tmp_path, options):
    model, x = Attention(), torch.randn(2, 64, 64)
    off = pybuda.compile(model, x, output_dir=tmp_path / "off", config=CompilerConfig(
        enable_auto_fusing=False, enable_t_streaming=False, **options))
    cfg = CompilerConfig(**options)
    cfg.balancer_op_override("q_mm", "t_stream_shape", (2, 1))
    on = pybuda.compile(model, x, output_dir=tmp_path / "on", config=cfg)
    assert _fused_ops(on.device_graph) and on.netlist.ops["q_mm"].t == 2
    np.testing.assert_array_equal(on(x).numpy(), off(x).numpy())
