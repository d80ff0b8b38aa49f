"""The rewrite machinery (Pattern, sweep, fixpoint) and each rewrite on a tiny hand-built graph: the rewrite must
change the graph, the result must have the expected structure, and its golden outputs must equal the original's."""
from __future__ import annotations

import numpy as np
import pytest

from pybuda.ir import Graph, Operand
from pybuda.ops import add_op
from pybuda.passes import decompose as dc, fuse_pad, optimize as opt, simplify as simp
from pybuda.passes.rewrite import ANY, CONSTANT, Pattern, Rewrite, fixpoint, rewrite, sweep
from pybuda.verify import evaluate_sample

RNG = np.random.default_rng(0)


def _feeds(g: Graph) -> dict:
    return {n.name: RNG.standard_normal(n.shape).astype(np.float32) for n in g.inputs()}


def _apply(rw: Rewrite, g: Graph) -> Graph:
    """One sweep of `rw` on a copy of `g`; asserts that it changed the graph and kept the golden outputs."""
    feeds = _feeds(g)
    before = evaluate_sample(g, feeds)
    out = g.copy()
    assert rw(out), f"{rw.name} did not apply"
    after = evaluate_sample(out, feeds)
    for name, value in before.items():
        np.testing.assert_allclose(after[name], value, rtol=1e-5, atol=1e-5)
    return out


def _types(g: Graph) -> list[str]:
    return [g.node(n).op_type for n in g.topo_order() if g.node(n).kind == "op"]


def _param(g: Graph, name: str, shape: tuple) -> str:
    return g.add_parameter(name, RNG.standard_normal(shape))


# ---- the machinery -------------------------------------------------------------------------------

def test_pattern_conditions():
    g = Graph("g")
    x = g.add_input("x", (1, 4, 32, 32))
    p = _param(g, "p", (1, 4, 32, 32))
    t = add_op(g, "t", "transpose", [x], {"dim0": -2, "dim1": -1})
    e = add_op(g, "e", "exp", [t])
    a = add_op(g, "a", "add", [t, p])
    tm_edge = g.add_op("n", "nop", [Operand(x, (("transpose",),))], shape=(1, 4, 32, 32))
    for out in (e, a, tm_edge):
        g.add_output(f"{out}_out", out)

    def matches(pattern, name):
        return pattern.matches(g, g.node(name))

    assert matches(Pattern("exp"), e) and matches(Pattern(("exp", "relu")), e) and not matches(Pattern("relu"), e)
    assert matches(Pattern(op_kind="unary"), e) and not matches(Pattern(op_kind="binary"), e)
    assert not matches(Pattern(), x) and matches(ANY, x) and matches(CONSTANT, p) and not matches(CONSTANT, t)
    assert matches(Pattern(operands=[Pattern("transpose")]), e)
    assert not matches(Pattern(operands=[Pattern("transpose", single_user=True)]), e)  # t is read by e and a
    assert matches(Pattern(operands=[None, CONSTANT]), a) and not matches(Pattern(operands=[CONSTANT]), a)
    assert not matches(Pattern(operands=[ANY]), tm_edge) and matches(Pattern(operands=[None]), tm_edge)
    assert matches(Pattern(all_operands=ANY), a) and not matches(Pattern(all_operands=CONSTANT), a)
    assert not matches(Pattern("transpose", users=Pattern("exp")), t)  # a is a user too
    assert matches(Pattern("transpose", users=Pattern(("exp", "add"))), t)
    assert not matches(Pattern("exp", users=Pattern("exp")), e)  # its only user is an output
    assert matches(Pattern(where=lambda graph, node: node.name == "a"), a) and not matches(Pattern(where=lambda *_: 0), a)


def test_sweep_visits_in_topological_order_one_rewrite_after_the_other_and_fixpoint_repeats():
    g = Graph("g")
    x = g.add_input("x", (4,))
    y = add_op(g, "y", "exp", [add_op(g, "w", "relu", [x])])
    g.add_output("out", add_op(g, "z", "sqrt", [y]))
    visits = []

    def record(tag):
        return Rewrite(tag, Pattern(op_kind="unary"), lambda graph, node: visits.append((tag, node.name)) and False)

    assert not sweep(g, [record("first"), record("second")])
    assert visits == [("first", "w"), ("first", "y"), ("first", "z"), ("second", "w"), ("second", "y"),
                      ("second", "z")]

    @rewrite(Pattern("relu", operands=[ANY]))
    def drop_relu(graph, node):
        graph.replace(node.name, graph.operands(node.name)[0])
        return True

    @rewrite(Pattern("exp"))
    def exp_to_relu(graph, node):
        node.op_type = "relu"
        return True

    betweens = []
    fixpoint(g, [drop_relu, exp_to_relu], between=lambda graph: betweens.append(_types(graph)))
    assert drop_relu.name == "drop_relu"
    assert _types(g) == ["sqrt"] and g.producer("z").name == "x"
    assert betweens == [["relu", "sqrt"], ["sqrt"]]  # sweep 1: relu dropped, exp -> relu; sweep 2: that relu dropped


def test_sweep_state_is_fresh_for_every_sweep():
    g = Graph("g")
    x = g.add_input("x", (4,))
    g.add_output("out", add_op(g, "b", "exp", [add_op(g, "a", "exp", [x])]))
    seen = []

    @rewrite(Pattern("exp"), sweep_state=list)
    def note(graph, node, state):
        state.append(node.name)
        seen.append(list(state))
        return False

    note(g)
    note(g)
    assert seen == [["a"], ["a", "b"], ["a"], ["a", "b"]]


# ---- optimize rewrites ---------------------------------------------------------------------------

def test_hoist_unary_above_tms():
    g = Graph("g")
    x = g.add_input("x", (1, 4, 8))
    t = add_op(g, "t", "transpose", [x], {"dim0": -2, "dim1": -1})
    g.add_output("out", add_op(g, "r", "relu", [t]))
    out = _apply(opt.hoist_unary_above_tms, g)
    assert _types(out) == ["relu", "transpose"]
    assert out.producer("r").name == "x" and out.producer("t").name == "r" and out.producer("out").name == "t"
    assert out.node("r").order < out.node("t").order
    g.add_output("out2", t)  # a TM read by another user stays where it is
    assert not opt.hoist_unary_above_tms(g)


def test_cancel_tms_drops_identity_reshapes_and_merges_reshape_chains():
    g = Graph("g")
    x = g.add_input("x", (2, 6))
    same = add_op(g, "same", "reshape", [x], {"shape": [2, 6]})
    a = add_op(g, "a", "reshape", [same], {"shape": [3, 4]})
    g.add_output("out", add_op(g, "b", "reshape", [a], {"shape": [12]}))
    out = _apply(opt.cancel_tms, g)
    assert _types(out) == ["reshape"] and out.producer("b").name == "x"


def test_cancel_tms_cancels_transposes_of_the_last_two_dims():
    g = Graph("g")
    x = g.add_input("x", (2, 3, 4))
    t1 = add_op(g, "t1", "transpose", [x], {"dim0": -2, "dim1": -1})
    g.add_output("out", add_op(g, "t2", "transpose", [t1], {"dim0": 2, "dim1": 1}))
    out = _apply(opt.cancel_tms, g)
    assert _types(out) == [] and out.producer("out").name == "x"


def test_fold_transpose_flatten_into_matmul():
    g = Graph("g")
    x = g.add_input("x", (1, 8, 4))
    t = add_op(g, "t", "transpose", [x], {"dim0": -2, "dim1": -1})
    flat = add_op(g, "flat", "reshape", [t], {"shape": [1, 32]})
    g.add_output("out", add_op(g, "mm", "matmul", [flat, _param(g, "w", (32, 5))]))
    out = _apply(opt.fold_transpose_flatten_into_matmul, g)
    assert "t" not in out and out.producer("flat").name == "x"
    assert out.producer("mm", 1).name == "mm.w_perm.r1"  # rows of w permuted by ops on w, folded by consteval
    g.add_output("flat_out", flat)  # a reader other than a matmul: no fold
    assert not opt.fold_transpose_flatten_into_matmul(g)


@pytest.mark.parametrize("first, second, expected", [
    ([1, 0, 2], [0, 2, 1], ("permute", {"axes": [1, 2, 0]})),    # composed
    ([1, 0, 2], [1, 0, 2], None),                                  # composed to the identity: dropped
    ([0, 2, 1], None, ("transpose", {"dim0": -2, "dim1": -1})),    # a swap of two dims is a transpose
])
def test_canonicalize_permutes(first, second, expected):
    g = Graph("g")
    x = g.add_input("x", (2, 3, 4))
    y = add_op(g, "p1", "permute", [x], {"axes": first})
    if second is not None:
        y = add_op(g, "p2", "permute", [y], {"axes": second})
    g.add_output("out", y)
    out = _apply(opt.canonicalize_permutes, g)
    if expected is None:
        assert _types(out) == [] and out.producer("out").name == "x"
    else:
        (name,) = [n.name for n in out.nodes("op")]
        assert (out.node(name).op_type, out.node(name).attrs) == expected and out.producer(name).name == "x"
    assert not opt.canonicalize_permutes(out)  # canonical already


@pytest.mark.parametrize("axes, types", [([0, 2, 1, 3], ["hslice", "reshape"]),
                                         ([0, 2, 3, 1], ["hslice", "transpose", "reshape"])])
def test_heads_to_slices_splits_heads_with_hslice(axes, types):
    g = Graph("g")
    x = g.add_input("x", (1, 32, 64))
    split = add_op(g, "split", "reshape", [x], {"shape": [1, 32, 2, 32]})
    g.add_output("out", add_op(g, "heads", "permute", [split], {"axes": axes}))
    out = _apply(opt.heads_to_slices, g)
    assert _types(out) == types and out.node("heads.hslice").attrs == {"factor": 2}
    assert out.producer("heads.hslice").name == "x" and "split" not in out


def test_heads_to_slices_merges_heads_with_hstack():
    g = Graph("g")
    x = g.add_input("x", (1, 2, 32, 32))
    p = add_op(g, "p", "permute", [x], {"axes": [0, 2, 1, 3]})
    g.add_output("out", add_op(g, "merge", "reshape", [p], {"shape": [1, 32, 64]}))
    out = _apply(opt.heads_to_slices, g)
    assert _types(out) == ["hstack", "reshape"] and out.node("merge.hstack").attrs == {"factor": 2}
    assert out.producer("out").name == "merge.merged" and "p" not in out


def test_narrow_before_reshape():
    g = Graph("g")
    x = g.add_input("x", (1, 4, 6))
    r = add_op(g, "r", "reshape", [x], {"shape": [4, 6]})
    g.add_output("out", add_op(g, "n", "narrow", [r], {"dim": 1, "start": 2, "length": 3}))
    out = _apply(opt.narrow_before_reshape, g)
    assert _types(out) == ["narrow", "reshape"] and "r" not in out
    assert out.producer("n.first").name == "x" and out.node("n.first").attrs["dim"] == -1


def test_fold_column_slices_into_matmul():
    g = Graph("g")
    x = g.add_input("x", (1, 4, 8))
    mm = add_op(g, "mm", "matmul", [x, _param(g, "w", (8, 12))])
    qkv = add_op(g, "qkv", "add", [mm, _param(g, "b", (12,))])
    for name, start in (("q", 0), ("k", 4), ("v", 8)):
        g.add_output(f"{name}_out", add_op(g, name, "narrow", [qkv], {"dim": -1, "start": start, "length": 4}))
    out = _apply(opt.fold_column_slices_into_matmul, g)
    assert not out.users("qkv")
    for name in "qkv":
        assert out.producer(f"{name}_out").name == f"{name}.bias"
        assert [out.producer(f"{name}.mm", i).name for i in (0, 1)] == ["x", f"{name}.w"]
        assert out.node(f"{name}.w").op_type == "narrow" and out.producer(f"{name}.w").name == "w"


def test_split_shared_tms_copies_a_tm_for_a_reader_that_moves_it():
    g = Graph("g")
    x = g.add_input("x", (1, 4, 8))
    t = add_op(g, "t", "transpose", [x], {"dim0": -2, "dim1": -1})
    g.add_output("out0", add_op(g, "r", "relu", [t]))
    g.add_output("out1", add_op(g, "mm", "matmul", [t, _param(g, "w", (4, 3))]))
    out = _apply(opt.split_shared_tms, g)
    assert out.producer("r").name == "t.copy" and out.producer("t.copy").name == "x"
    assert out.users("t") == [("mm", 0)]


def test_hoist_binary_above_matching_tms():
    g = Graph("g")
    x, y = g.add_input("x", (1, 4, 8)), g.add_input("y", (1, 4, 8))
    tx = add_op(g, "tx", "transpose", [x], {"dim0": -2, "dim1": -1})
    ty = add_op(g, "ty", "transpose", [y], {"dim0": -2, "dim1": -1})
    g.add_output("out", add_op(g, "s", "add", [tx, ty]))
    out = _apply(opt.hoist_binary_above_tms, g)
    assert _types(out) == ["add", "transpose"] and "ty" not in out
    assert [o.src for o in out.operands("s")] == ["x", "y"] and out.producer("tx").name == "s"


def test_hoist_binary_above_a_tm_and_a_constant():
    g = Graph("g")
    x = g.add_input("x", (1, 4, 8))
    tx = add_op(g, "tx", "transpose", [x], {"dim0": -2, "dim1": -1})
    g.add_output("out", add_op(g, "m", "multiply", [tx, _param(g, "c", (8, 1))]))
    out = _apply(opt.hoist_binary_above_tms, g)
    assert out.producer("out").name == "tx" and out.producer("tx").name == "m" and out.producer("m").name == "x"
    assert out.node("m.transpose").shape == (1, 1, 8)  # c through the inverse TM (for consteval)


def test_optimize_runs_the_rewrites_to_a_fixpoint():
    g = Graph("g")
    x = g.add_input("x", (1, 4, 8))
    t1 = add_op(g, "t1", "permute", [x], {"axes": [0, 2, 1]})
    e = add_op(g, "e", "exp", [t1])
    g.add_output("out", add_op(g, "t2", "permute", [e], {"axes": [0, 2, 1]}))
    feeds = _feeds(g)
    expected = evaluate_sample(g, feeds)
    out = opt.optimize(g.copy())
    assert _types(out) == ["exp"]  # canonicalized, exp hoisted, the transposes cancelled
    np.testing.assert_allclose(evaluate_sample(out, feeds)["out"], expected["out"], rtol=1e-6)


# ---- value folds (simplify) ----------------------------------------------------------------------

def test_consteval_keeps_the_name_of_a_parameter_read_by_one_op():
    g = Graph("g")
    x = g.add_input("x", (4, 2))
    w = add_op(g, "w_t", "transpose", [_param(g, "w", (3, 2))], {"dim0": -2, "dim1": -1})
    c = add_op(g, "c", "add", [g.add_constant("one", np.ones((3,))), g.add_constant("two", np.full((3,), 2.0))])
    g.add_output("out", add_op(g, "y", "add", [add_op(g, "mm", "matmul", [x, w]), c]))
    out = _apply(simp.consteval, g)
    assert [n.name for n in out.nodes("parameter")] == ["w"] and out.node("w").shape == (2, 3)
    assert [n.name for n in out.nodes("constant")] == ["c.const"] and out.producer("mm", 1).name == "w"


def test_fold_infinity_tests_of_finite_values():
    g = Graph("g")
    x = g.add_input("x", (2, 4))
    e = add_op(g, "e", "exp", [x])
    mask = np.zeros((2, 4), dtype=np.float32)
    mask[:, 3] = -np.inf
    masked = add_op(g, "masked", "add", [e, g.add_constant("mask", mask)])
    inf = g.add_constant("inf", np.array(-np.inf, dtype=np.float32))
    g.add_output("out0", add_op(g, "eq", "equal", [e, inf]))
    g.add_output("out1", add_op(g, "ne", "not_equal", [masked, inf]))
    g.add_output("out2", add_op(g, "guard", "equal", [add_op(g, "lg", "log", [e]), inf]))
    out = _apply(simp.fold_infinity_tests, g)
    assert out.producer("out0").name == "eq.folded" and not out.producer("out0").value.any()
    assert out.producer("out1").name == "ne.folded"
    np.testing.assert_array_equal(out.producer("out1").value, np.isfinite(mask).astype(np.float32))
    assert out.producer("out2").name == "guard"  # log can be -inf: kept


def test_bypass_trivial():
    g = Graph("g")
    x, y = g.add_input("x", (2, 4)), g.add_input("y", (2, 4))
    g.add_output("out0", add_op(g, "w", "where", [g.add_constant("cond", np.ones((2, 4))), x, y]))
    g.add_output("out1", add_op(g, "a", "add", [g.add_constant("zero", np.zeros((2, 4))), y]))
    g.add_output("out2", add_op(g, "m", "multiply", [x, g.add_constant("one", np.ones(1))]))
    g.add_output("out3", add_op(g, "b", "add", [g.add_input("s", (1, 4)), g.add_constant("zeros", np.zeros((2, 4)))]))
    out = _apply(simp.bypass_trivial, g)
    assert [out.producer(f"out{i}").name for i in range(4)] == ["x", "y", "x", "b"]  # b broadcasts: kept


# ---- decompose-stage rewrites --------------------------------------------------------------------

def test_fuse_conv_bias():
    g = Graph("g")
    x = g.add_input("x", (1, 3, 6, 6))
    conv = add_op(g, "conv", "conv2d", [x, _param(g, "w", (4, 3, 3, 3))], {"padding": 1})
    g.add_output("out", add_op(g, "bias_add", "add", [conv, _param(g, "b", (4, 1, 1))]))
    out = _apply(dc.fuse_conv_bias, g)
    assert _types(out) == ["reshape", "conv2d"] and out.producer("out").name == "conv"
    assert [o.src for o in out.operands("conv")] == ["x", "w", "b.flat"]


def test_fuse_pad_into_conv():
    g = Graph("g")
    x = g.add_input("x", (1, 3, 6, 6))
    pad = add_op(g, "pad", "constant_pad", [x], {"pad_width": [0, 0, 0, 0, 1, 0, 0, 2], "value": 0.0})
    g.add_output("out", add_op(g, "conv", "conv2d", [pad, _param(g, "w", (4, 3, 3, 3))], {"padding": 1}))
    out = _apply(fuse_pad.fuse_pad_into_conv, g)
    assert _types(out) == ["conv2d"] and out.node("conv").attrs["padding"] == [2, 1, 1, 3]


def test_fuse_batchnorm_into_conv():
    g = Graph("g")
    x = g.add_input("x", (1, 3, 6, 6))
    conv = add_op(g, "conv", "conv2d", [x, _param(g, "w", (4, 3, 3, 3))], {"padding": 1})
    stats = [g.add_parameter(n, RNG.uniform(0.5, 1.5, 4)) for n in ("gamma", "beta", "mean", "var")]
    g.add_output("out", add_op(g, "bn", "batchnorm", [conv, *stats], {"dim": -3, "epsilon": 1e-5}))
    out = _apply(fuse_pad.fuse_batchnorm_into_conv, g)
    assert "batchnorm" not in _types(out) and out.producer("out").name == "conv"
    assert [o.src for o in out.operands("conv")] == ["x", "w.folded", "beta.folded"]
