"""Optimize (PyBuda IR): move elementwise ops above TMs, cancel inverse TMs, fold a transpose feeding a
flatten into the constant weights of the matmul it feeds, and evaluate parameter-only subgraphs (consteval).

All rewrites preserve the graph's golden outputs; `compile(..., verify=True)` checks that after the stage."""
from __future__ import annotations

import numpy as np

from ..ir import Graph, Operand
from ..ops import registry
from ..ops.common import norm_dim

# TMs that commute with an elementwise unary op (pad and fill_padding do not: they write values).
_COMMUTING_TMS = {"reshape", "transpose", "permute", "narrow", "hslice", "hstack", "vslice", "vstack"}


def _single_user(graph: Graph, name: str) -> bool:
    return len(graph.users(name)) == 1


def _plain_operand(graph: Graph, op: str, port: int = 0) -> str | None:
    """Producer of operand `port` if the edge carries no TMs."""
    operand = graph.operands(op)[port]
    return None if operand.tms else operand.src


def hoist_unary_above_tms(graph: Graph) -> bool:
    """u(tm(x)) -> tm(u(x)) for elementwise unary u, so that TM pairs around it can cancel."""
    changed = False
    for name in graph.topo_order():
        node = graph.node(name)
        if node.kind != "op" or registry.get(node.op_type).kind != "unary" or len(graph.operands(name)) != 1:
            continue
        src = _plain_operand(graph, name)
        if src is None or graph.node(src).kind != "op" or graph.node(src).op_type not in _COMMUTING_TMS:
            continue
        if not _single_user(graph, src):
            continue
        tm_node = graph.node(src)
        (tm_in,) = graph.operands(src)
        new_u = graph.add_op(graph.unique_name(f"{name}.hoisted"), node.op_type, [tm_in], dict(node.attrs))
        new_tm = graph.add_op(graph.unique_name(f"{src}.sunk"), tm_node.op_type, [new_u], dict(tm_node.attrs))
        graph.replace_uses(name, new_tm)
        graph.remove_node(name)
        graph.remove_node(src)
        graph.rename(new_u, name)
        graph.rename(new_tm, src)
        changed = True
    return changed


def _is_swap_of_last_two(node) -> bool:
    if node.op_type == "transpose":
        return {norm_dim(int(node.attrs["dim0"]), len(node.shape)),
                norm_dim(int(node.attrs["dim1"]), len(node.shape))} == {-2, -1}
    return False


def cancel_tms(graph: Graph) -> bool:
    """Merge reshape chains, drop identity reshapes and cancel back-to-back transposes of the same dims."""
    changed = False
    for name in graph.topo_order():
        if name not in graph:
            continue
        node = graph.node(name)
        if node.kind != "op" or node.op_type not in ("reshape", "transpose"):
            continue
        src = _plain_operand(graph, name)
        if node.op_type == "reshape" and graph.operand_shape(graph.operands(name)[0]) == node.shape and src:
            graph.replace_uses(name, src)
            graph.remove_node(name)
            changed = True
            continue
        if src is None or graph.node(src).kind != "op" or not _single_user(graph, src):
            continue
        prev = graph.node(src)
        if node.op_type == "reshape" and prev.op_type == "reshape":
            graph.set_operand(name, 0, graph.operands(src)[0])
            graph.remove_node(src)
            changed = True
        elif node.op_type == "transpose" and prev.op_type == "transpose" and _is_swap_of_last_two(node) \
                and _is_swap_of_last_two(prev):
            graph.replace_uses(name, graph.operands(src)[0].src, extra_tms=graph.operands(src)[0].tms)
            graph.remove_node(name)
            graph.remove_node(src)
            changed = True
    return changed


def _is_const_like(graph: Graph, name: str) -> bool:
    """True if `name` is computed from parameters and constants only."""
    node = graph.node(name)
    if node.kind in ("parameter", "constant"):
        return True
    return node.kind == "op" and all(_is_const_like(graph, o.src) for o in graph.operands(name))


def fold_transpose_flatten_into_matmul(graph: Graph) -> bool:
    """flatten(transpose(X)) @ W  ->  flatten(X) @ W' with W' the rows of W permuted to match.

    X (..., P, C) -> transpose -> (..., C, P) -> reshape -> (..., C*P) -> matmul operand 0, W constant-like."""
    changed = False
    for name in graph.topo_order():
        if name not in graph:
            continue
        node = graph.node(name)
        if node.kind != "op" or node.op_type != "reshape" or not graph.users(name):
            continue
        src = _plain_operand(graph, name)
        if src is None or graph.node(src).kind != "op" or not _is_swap_of_last_two(graph.node(src)) \
                or not _single_user(graph, src):
            continue
        *lead, c, p = graph.node(src).shape
        if node.shape[-1] != c * p or int(np.prod(node.shape[:-1])) != int(np.prod(lead)):
            continue
        users = graph.users(name)
        if not all(port == 0 and graph.node(u).op_type == "matmul" and _is_const_like(graph, graph.operands(u)[1].src)
                   and not graph.operands(u)[1].tms for u, port in users):
            continue
        (x,) = graph.operands(src)
        graph.set_operand(name, 0, x)
        graph.remove_node(src)
        for user, _ in users:
            w = graph.operands(user)[1].src
            n = graph.node(w).shape[-1]
            base = graph.unique_name(f"{user}.w_perm")
            w3 = graph.add_op(base + ".r0", "reshape", [w], {"shape": [c, p, n]})
            wt = graph.add_op(base + ".t", "transpose", [w3], {"dim0": 0, "dim1": 1})
            graph.set_operand(user, 1, graph.add_op(base + ".r1", "reshape", [wt], {"shape": [p * c, n]}))
        changed = True
    return changed


def consteval(graph: Graph) -> bool:
    """Replace every op whose operands are all parameters/constants by its value.

    The result keeps the parameter's name when it replaces a chain that started from one parameter,
    so netlist queues carry the model's parameter names."""
    changed = False
    for name in graph.topo_order():
        if name not in graph or graph.node(name).kind != "op":
            continue
        operands = graph.operands(name)
        srcs = [graph.node(o.src) for o in operands]
        if any(s.kind not in ("parameter", "constant") or o.tms for s, o in zip(srcs, operands)):
            continue
        node = graph.node(name)
        value = registry.evaluate(node.op_type, [s.value for s in srcs], node.attrs)
        params = [s for s in srcs if s.kind == "parameter"]
        reuse = params[0].name if len(params) == 1 and _single_user(graph, params[0].name) else None
        new_name = graph.unique_name(f"{name}.const")
        if params:
            graph.add_parameter(new_name, value)
        else:
            graph.add_constant(new_name, value)
        graph.replace_uses(name, new_name)
        graph.remove_node(name)
        for s in {s.name for s in srcs}:
            if s in graph and not graph.users(s):
                graph.remove_node(s)
        if reuse and reuse not in graph:
            graph.rename(new_name, reuse)
        changed = True
    return changed


def optimize(graph: Graph, config=None) -> Graph:
    """Run the rewrites to a fixpoint, then consteval (unless disabled)."""
    while hoist_unary_above_tms(graph) | cancel_tms(graph) | fold_transpose_flatten_into_matmul(graph):
        pass
    if config is None or config.enable_consteval:
        while consteval(graph):
            pass
    graph.remove_dead()
    return graph
