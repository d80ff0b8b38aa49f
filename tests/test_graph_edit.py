"""Graph editing primitives (`replace`, `set_operand`, `rename`, `producer`), op creation with the registry's shape
inference, and the typed node fields."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
import pytest

from pybuda.dataformat import DataFormat
from pybuda.ir import Graph, GraphError, Operand
from pybuda.ops import OpError, add_op


def _chain() -> Graph:
    """x -> a = exp(x) -> b = relu(a) -> out;  a also read by c = add(a, a) -> out2."""
    g = Graph("g")
    x = g.add_input("x", (1, 2, 32, 64))
    a = add_op(g, "a", "exp", [x])
    g.add_output("out", add_op(g, "b", "relu", [a]))
    g.add_output("out2", add_op(g, "c", "add", [a, a]))
    return g


def test_add_op_infers_the_shape_and_graph_add_op_takes_it_explicitly():
    g = Graph("g")
    x = g.add_input("x", (3, 4))
    w = g.add_parameter("w", np.ones((4, 5)))
    assert g.node(add_op(g, "mm", "matmul", [x, w])).shape == (3, 5)
    assert g.node(g.add_op("raw", "exp", [x], shape=(3, 4))).shape == (3, 4)
    with pytest.raises(TypeError):
        g.add_op("no_shape", "exp", [x])
    with pytest.raises(GraphError, match="'bad'.*'missing'"):
        add_op(g, "bad", "exp", ["missing"])
    with pytest.raises(OpError, match="'bad2'.*inner dimensions"):
        add_op(g, "bad2", "matmul", [w, x])


def test_replace_moves_every_user_and_removes_the_node():
    g = _chain()
    y = add_op(g, "y", "sqrt", ["x"])
    g.replace("a", y)
    assert "a" not in g
    assert g.operands("b") == [Operand("y")]
    assert g.operands("c") == [Operand("y"), Operand("y")]
    assert g.users("y") == [("b", 0), ("c", 0), ("c", 1)]


def test_replace_puts_the_value_tms_before_the_users_own():
    g = Graph("g")
    x = g.add_input("x", (1, 1, 64, 32))
    t = g.add_op("t", "nop", [x], shape=(1, 1, 64, 32))
    u = g.add_op("u", "nop", [Operand(t, (("transpose",),))], shape=(1, 1, 32, 64))
    g.add_output("out", u)
    g.replace(t, Operand(x, (("vslice", 2),)))
    assert g.operands(u) == [Operand(x, (("vslice", 2), ("transpose",)))]
    assert g.operand_shape(g.operands(u)[0]) == (1, 2, 32, 32)


def test_replace_with_prune_removes_the_producers_left_without_users():
    g = Graph("g")
    x = g.add_input("x", (2, 3))
    p = g.add_parameter("p", np.ones((2, 3)))
    shared = add_op(g, "shared", "exp", [x])
    only = add_op(g, "only", "relu", [p])
    s = add_op(g, "s", "add", [shared, only])
    g.add_output("out", s)
    g.add_output("out2", shared)
    g.replace(s, x, prune=True)
    assert "only" not in g                       # fed only the replaced node
    assert "shared" in g                         # still read by out2
    assert "p" in g and not g.users("p")         # one level: left to remove_dead
    g.replace(shared, add_op(g, "e", "exp", [x]), prune=True)
    assert "x" in g and g.input_names == ["x"]   # inputs are never pruned

    g2 = _chain()
    g2.replace("b", "a")  # without prune nothing else goes
    assert [n.name for n in g2.nodes("op")] == ["a", "c"]


def test_replace_rejects_itself_and_unknown_values():
    g = _chain()
    with pytest.raises(GraphError, match="by itself"):
        g.replace("a", "a")
    with pytest.raises(GraphError, match="'nope'"):
        g.replace("a", "nope")
    assert g.users("a") == [("b", 0), ("c", 0), ("c", 1)]


def test_set_operand_rewires_one_port_and_can_prune():
    g = _chain()
    y = add_op(g, "y", "sqrt", ["x"])
    g.set_operand("c", 1, y)
    assert g.operands("c") == [Operand("a"), Operand("y")]
    g.set_operand("b", 0, y, prune=True)
    assert "a" in g  # c still reads it
    g.set_operand("c", 0, y, prune=True)
    assert "a" not in g
    with pytest.raises(GraphError, match="'missing'"):
        g.set_operand("c", 0, "missing")


def test_producer_rename_and_remove():
    g = _chain()
    assert g.producer("c", 1).name == "a"
    order = g.node("a").order
    g.rename("a", "a2")
    assert g.node("a2").order == order and g.producer("b").name == "a2" and g.users("a2")[0] == ("b", 0)
    with pytest.raises(GraphError, match="already exists"):
        g.rename("a2", "b")
    with pytest.raises(GraphError, match="'nope'"):
        g.remove_node("nope")


def test_node_fields_have_defaults_and_copies_are_independent():
    g = _chain()
    p = g.node(g.add_parameter("p", np.zeros(3), requires_grad=True))
    a = g.node("a")
    assert p.requires_grad and not a.requires_grad
    assert (a.logical_shape, a.intermed_df, a.acc_df, a.math_fidelity, a.host_transforms) == (None,) * 4 + ((),)
    assert a.framework_op_type == "exp"
    a.original_op_type = "softmax"
    assert a.framework_op_type == "softmax"
    c = g.copy()
    c.node("a").attrs["k"] = 1
    c.node("a").acc_df = DataFormat.Float32
    c.node("x").host_transforms = (("transpose", {"dim0": -2, "dim1": -1}),)
    assert "k" not in g.node("a").attrs and g.node("a").acc_df is None and g.node("x").host_transforms == ()


def test_topo_order_is_networkx_lexicographical_order_with_ties_and_refuses_a_cycle():
    import networkx as nx
    g = _chain()
    y = add_op(g, "y", "sqrt", ["x"])           # inserted last, reads only x
    g.set_order(y, g.node("a").order)           # a tie with a: broken by the graph's node order
    g.set_order("c", -1)                        # ordered first, yet after its producer a
    expected = list(nx.lexicographical_topological_sort(g._g, key=lambda n: g.node(n).order))
    assert g.topo_order() == expected
    assert g.topo_order().index("c") > g.topo_order().index("a") and expected.index("a") < expected.index(y)
    g._g.add_edge("b", "a", key=1)              # a cycle a -> b -> a
    g._cache.clear()
    with pytest.raises(nx.NetworkXUnfeasible):
        g.topo_order()


def _queried(g: Graph) -> tuple:
    """Every node's operands and users and the topological order, as the graph answers them (its cache)."""
    names = [n.name for n in g.nodes()]
    return g.topo_order(), {n: g.operands(n) for n in names}, {n: g.users(n) for n in names}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["add", "set_operand", "replace", "remove", "order", "rename"]),
                          st.integers(0, 1 << 16), st.integers(0, 1 << 16)), max_size=25))
def test_cached_operands_users_and_order_stay_true_through_any_edits(edits):
    """Each edit drops only the cached answers it changes (`Graph._edited`): after every edit the graph answers as a
    fresh copy of it (which has no cache) does."""
    g = _chain()
    _queried(g)                     # fill the cache
    for step, (edit, i, j) in enumerate(edits):
        ops = g.op_names()
        nodes = [n.name for n in g.nodes() if n.kind in ("input", "op")]
        if edit == "add":
            add_op(g, f"n{step}", "add", [nodes[i % len(nodes)], nodes[j % len(nodes)]])
        elif ops and edit == "set_operand":
            op = ops[i % len(ops)]
            earlier = g.topo_order()[:g.topo_order().index(op)]
            sources = [n for n in earlier if g.node(n).kind in ("input", "op")]
            g.set_operand(op, j % len(g.operands(op)), sources[j % len(sources)])
        elif ops and edit == "replace":
            op = ops[i % len(ops)]
            g.replace(op, g.operands(op)[0].src)
        elif ops and edit == "remove" and not g.users(ops[i % len(ops)]):
            g.remove_node(ops[i % len(ops)])
        elif ops and edit == "order":
            g.set_order(ops[i % len(ops)], j)
        elif ops and edit == "rename":
            g.rename(ops[i % len(ops)], f"r{step}")
        assert _queried(g) == _queried(g.copy()), f"after edit {step}: {edit}"
