"""Optimize (PyBuda IR): move elementwise ops above TMs, cancel inverse TMs, fold a transpose feeding a
flatten into the constant weights of the matmul it feeds, and evaluate parameter-only subgraphs (consteval).

All rewrites preserve the graph's golden outputs; `compile(..., verify=True)` checks that after the stage."""
from __future__ import annotations

import numpy as np

from ..ir import Graph, Operand
from ..ops import add_op, registry
from ..ops.common import norm_dim

# TMs that commute with an elementwise unary op (pad and fill_padding do not: they write values).
_COMMUTING_TMS = {"reshape", "transpose", "permute", "narrow", "hslice", "hstack", "vslice", "vstack"}


def _live_ops(graph: Graph, types=None):
    """Op nodes in topological order, skipping those a rewrite removed meanwhile; optionally of some types."""
    for name in graph.topo_order():
        if name in graph:
            node = graph.node(name)
            if node.kind == "op" and (types is None or node.op_type in types):
                yield name, node


def _single_user(graph: Graph, name: str) -> bool:
    return len(graph.users(name)) == 1


def _plain_operand(graph: Graph, op: str, port: int = 0) -> str | None:
    """Producer of operand `port` if the edge carries no TMs."""
    operand = graph.operands(op)[port]
    return None if operand.tms else operand.src


def hoist_unary_above_tms(graph: Graph) -> bool:
    """u(tm(x)) -> tm(u(x)) for elementwise unary u, so that TM pairs around it can cancel."""
    changed = False
    for name, node in _live_ops(graph):
        if registry.get(node.op_type).kind != "unary" or len(graph.operands(name)) != 1:
            continue
        src = _plain_operand(graph, name)
        if src is None or graph.node(src).kind != "op" or graph.node(src).op_type not in _COMMUTING_TMS:
            continue
        if not _single_user(graph, src):
            continue
        tm_node = graph.node(src)
        (tm_in,) = graph.operands(src)
        new_u = add_op(graph, graph.unique_name(f"{name}.hoisted"), node.op_type, [tm_in], dict(node.attrs))
        new_tm = add_op(graph, graph.unique_name(f"{src}.sunk"), tm_node.op_type, [new_u], dict(tm_node.attrs))
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
    for name, node in _live_ops(graph, ("reshape", "transpose")):
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
    """True if `name` is computed from parameters and constants only (iterative: graphs are deep)."""
    stack, seen = [name], set()
    while stack:
        node = graph.node(stack.pop())
        if node.kind in ("parameter", "constant") or node.name in seen:
            continue
        if node.kind != "op":
            return False
        seen.add(node.name)
        stack.extend(o.src for o in graph.operands(node.name))
    return True


def fold_transpose_flatten_into_matmul(graph: Graph) -> bool:
    """flatten(transpose(X)) @ W  ->  flatten(X) @ W' with W' the rows of W permuted to match.

    X (..., P, C) -> transpose -> (..., C, P) -> reshape -> (..., C*P) -> matmul operand 0, W constant-like."""
    changed = False
    for name, node in _live_ops(graph, ("reshape",)):
        if not graph.users(name):
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
            w3 = add_op(graph, base + ".r0", "reshape", [w], {"shape": [c, p, n]})
            wt = add_op(graph, base + ".t", "transpose", [w3], {"dim0": 0, "dim1": 1})
            graph.set_operand(user, 1, add_op(graph, base + ".r1", "reshape", [wt], {"shape": [p * c, n]}))
        changed = True
    return changed


def consteval(graph: Graph) -> bool:
    """Replace every op whose operands are all parameters/constants by its value.

    The result keeps the parameter's name when it replaces a chain that started from one parameter,
    so netlist queues carry the model's parameter names."""
    changed = False
    for name, node in _live_ops(graph):
        operands = graph.operands(name)
        srcs = [graph.node(o.src) for o in operands]
        if any(s.kind not in ("parameter", "constant") or o.tms for s, o in zip(srcs, operands)):
            continue
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


def _permute_axes(graph: Graph, name: str) -> list[int] | None:
    node = graph.node(name)
    rank = len(graph.operand_shape(graph.operands(name)[0]))
    if node.op_type == "permute":
        return [int(a) % rank for a in node.attrs["axes"]]
    if node.op_type == "transpose":
        axes = list(range(rank))
        d0, d1 = int(node.attrs["dim0"]) % rank, int(node.attrs["dim1"]) % rank
        axes[d0], axes[d1] = axes[d1], axes[d0]
        return axes
    return None


def canonicalize_permutes(graph: Graph) -> bool:
    """Compose chained permutes/transposes into one; drop identities; write a swap of two dims as transpose."""
    changed = False
    for name, node in _live_ops(graph):
        axes = _permute_axes(graph, name)
        if axes is None:
            continue
        node = graph.node(name)
        src = _plain_operand(graph, name)
        if src and graph.node(src).kind == "op" and _single_user(graph, src) and _permute_axes(graph, src):
            inner = _permute_axes(graph, src)
            axes = [inner[a] for a in axes]
            graph.set_operand(name, 0, graph.operands(src)[0])
            graph.remove_node(src)
            changed = True
        moved = [i for i, a in enumerate(axes) if a != i]
        if not moved:
            graph.replace_uses(name, graph.operands(name)[0].src, extra_tms=graph.operands(name)[0].tms)
            graph.remove_node(name)
            changed = True
        elif len(moved) == 2 and (node.op_type != "transpose" or changed):
            node.op_type, node.attrs = "transpose", {"dim0": moved[0] - len(axes), "dim1": moved[1] - len(axes)}
            changed = True
        elif len(moved) > 2 and (node.op_type != "permute" or changed):
            node.op_type, node.attrs = "permute", {"axes": axes}
            changed = True
    return changed


def _last3(graph: Graph, name: str) -> list[int] | None:
    """The permutation of the last three dims (as negative indices) if a permute/transpose moves only those."""
    axes = _permute_axes(graph, name)
    if axes is None or len(axes) < 3 or axes[:-3] != list(range(len(axes) - 3)):
        return None
    return [a - len(axes) for a in axes[-3:]]


def heads_to_slices(graph: Graph) -> bool:
    """Attention heads as the legacy netlists express them:
    reshape (.., S, H) -> (.., S, n, d) then swap(-3, -2)  ==  hslice(n) (+ a free rank reshape),
    the same followed by swap(-2, -1) (keys transposed)  ==  hslice(n) + transpose, and
    swap(-3, -2) of (.., n, S, d) then reshape -> (.., S, n*d)  ==  hstack(n)."""
    changed = False
    for name, node in _live_ops(graph):
        perm = _last3(graph, name)
        if perm not in ([-2, -3, -1], [-2, -1, -3]):
            continue
        out = graph.node(name).shape
        src = _plain_operand(graph, name)
        if src and graph.node(src).op_type == "reshape" and _single_user(graph, src):
            (x,) = graph.operands(src)
            in_shape = graph.operand_shape(x)
            _, s, n, d = (1, *graph.node(src).shape)[-4:]
            if in_shape[-1] == n * d and int(np.prod(in_shape[:-1])) == int(np.prod(out[:-3])) * s:
                y = add_op(graph, graph.unique_name(f"{name}.hslice"), "hslice", [x], {"factor": n})
                if perm == [-2, -1, -3]:
                    y = add_op(graph, graph.unique_name(f"{name}.kt"), "transpose", [y], {"dim0": -2, "dim1": -1})
                graph.replace_uses(name, add_op(graph, graph.unique_name(f"{name}.heads"), "reshape", [y],
                                                      {"shape": list(out)}))
                graph.remove_node(name)
                graph.remove_node(src)
                changed = True
                continue
        users = graph.users(name)
        if perm == [-2, -3, -1] and len(users) == 1 and graph.node(users[0][0]).op_type == "reshape" and \
                not graph.operands(users[0][0])[0].tms:
            reshape = users[0][0]
            target = graph.node(reshape).shape
            n, s, d = graph.node(name).shape[-2], graph.node(name).shape[-3], graph.node(name).shape[-1]
            if target[-1] == n * d and int(np.prod(target[:-1])) == int(np.prod(out[:-3])) * s:
                (x,) = graph.operands(name)
                stacked = add_op(graph, graph.unique_name(f"{reshape}.hstack"), "hstack", [x], {"factor": n})
                graph.replace_uses(reshape, add_op(graph, graph.unique_name(f"{reshape}.merged"), "reshape",
                                                         [stacked], {"shape": list(target)}))
                graph.remove_node(reshape)
                graph.remove_node(name)
                changed = True
    return changed


def _finite(graph: Graph, name: str, memo: dict) -> bool:
    """Whether a value can hold no inf/nan, for values computed from finite inputs without division or log."""
    if name not in memo:
        node = graph.node(name)
        if node.kind in ("parameter", "constant"):
            memo[name] = bool(np.isfinite(node.value).all())
        elif node.kind == "input":
            memo[name] = True
        else:
            creates_inf = node.op_type in ("log", "reciprocal", "divide") or \
                (node.op_type == "power" and float(node.attrs["exponent"]) < 0)
            bounded = node.op_type in ("softmax", "sigmoid", "tanh")  # finite whatever the input (-inf -> 0)
            memo[name] = bounded or (not creates_inf and all(_finite(graph, o.src, memo) for o in graph.operands(name)))
    return memo[name]


def fold_infinity_tests(graph: Graph) -> bool:
    """equal/not_equal(x, +-inf) on a value that is finite, or finite plus a constant, is a constant
    (the masking guards of scaled-dot-product attention)."""
    changed, memo = False, {}
    for name, node in _live_ops(graph, ("equal", "not_equal")):
        x, c = (graph.node(o.src) for o in graph.operands(name))
        if c.kind not in ("constant", "parameter") or np.isfinite(c.value).any() or graph.operands(name)[0].tms:
            continue
        if _finite(graph, x.name, memo):
            value = np.zeros(node.shape, dtype=np.float32)
        elif x.kind == "op" and x.op_type == "add":
            a, b = (graph.node(o.src) for o in graph.operands(x.name))
            const, other = (b, a) if b.kind in ("constant", "parameter") else (a, b)
            if const.kind not in ("constant", "parameter") or not _finite(graph, other.name, memo):
                continue
            value = np.broadcast_to((const.value == c.value).astype(np.float32), node.shape).copy()
        else:
            continue
        if node.op_type == "not_equal":
            value = 1.0 - value
        const_name = graph.add_constant(graph.unique_name(f"{name}.folded"), value)
        graph.replace_uses(name, const_name)
        graph.remove_node(name)
        changed = True
    return changed


def bypass_trivial(graph: Graph) -> bool:
    """where(all-true/all-false constant, a, b) -> a/b; x + 0 -> x; x * 1 -> x (when shapes allow)."""
    changed = False
    for name, node in _live_ops(graph, ("where", "add", "multiply")):
        ops = graph.operands(name)
        nodes = [graph.node(o.src) for o in ops]
        keep = None
        if node.op_type == "where" and nodes[0].kind == "constant" and not ops[0].tms:
            cond = nodes[0].value
            keep = ops[1] if np.all(cond != 0) else ops[2] if np.all(cond == 0) else None
        elif node.op_type in ("add", "multiply"):
            neutral = 0.0 if node.op_type == "add" else 1.0
            for i in (0, 1):
                if nodes[i].kind == "constant" and not ops[i].tms and np.all(nodes[i].value == neutral):
                    keep = ops[1 - i]
        if keep is not None and graph.operand_shape(keep) == node.shape:
            graph.replace_uses(name, keep.src, extra_tms=keep.tms)
            graph.remove_node(name)
            changed = True
    return changed


def narrow_before_reshape(graph: Graph) -> bool:
    """narrow(reshape(x), last dim) -> reshape(narrow(x, last dim)) when the reshape keeps the last dim."""
    changed = False
    for name, node in _live_ops(graph, ("narrow",)):
        if norm_dim(int(node.attrs["dim"]), len(node.shape)) != -1:
            continue
        src = _plain_operand(graph, name)
        if src is None or graph.node(src).op_type != "reshape":
            continue
        (x,) = graph.operands(src)
        if graph.operand_shape(x)[-1] != graph.node(src).shape[-1]:
            continue
        cut = add_op(graph, graph.unique_name(f"{name}.first"), "narrow", [x], dict(node.attrs, dim=-1))
        graph.replace_uses(name, add_op(graph, graph.unique_name(f"{name}.view"), "reshape", [cut],
                                              {"shape": list(node.shape)}))
        graph.remove_node(name)
        if not graph.users(src):
            graph.remove_node(src)
        changed = True
    return changed


def fold_column_slices_into_matmul(graph: Graph) -> bool:
    """narrow(x @ W [+ b], last dim) -> x @ W[..., s] [+ b[s]] for constant W and b: a split of a fused
    projection (e.g. GPT-2's qkv) becomes separate projections instead of a data-moving slice."""
    changed = False
    for name, node in _live_ops(graph, ("add", "matmul")):
        if not graph.users(name):
            continue
        users = graph.users(name)
        if not all(graph.node(u).op_type == "narrow" and norm_dim(int(graph.node(u).attrs["dim"]),
                   len(node.shape)) == -1 and not graph.operands(u)[0].tms for u, _ in users):
            continue
        if node.op_type == "add":
            ops = graph.operands(name)
            mm = next((o.src for o in ops if graph.node(o.src).op_type == "matmul" and not o.tms), None)
            bias = next((o.src for o in ops if o.src != mm), None)
            if mm is None or not _is_const_like(graph, bias) or len(graph.users(mm)) != 1:
                continue
        else:
            mm, bias = name, None
        x, w = graph.operands(mm)
        if not _is_const_like(graph, w.src) or w.tms:
            continue
        for user, _ in users:
            a = graph.node(user).attrs
            cut = {"dim": -1, "start": a["start"], "length": a["length"]}
            ws = add_op(graph, graph.unique_name(f"{user}.w"), "narrow", [w.src], dict(cut))
            y = add_op(graph, graph.unique_name(f"{user}.mm"), "matmul", [x, ws])
            if bias is not None:
                bshape = graph.node(bias).shape
                b = add_op(graph, graph.unique_name(f"{user}.b"), "narrow", [bias], dict(cut)) if bshape[-1] > 1 else bias
                y = add_op(graph, graph.unique_name(f"{user}.bias"), "add", [y, b])
            graph.replace_uses(user, y)
            graph.remove_node(user)
        changed = True
    return changed


def _tm_preimage(tm, in_shape: tuple, c_shape: tuple) -> list | None:
    """Ops (op_type, attrs) turning a constant c that broadcasts against tm's output into c' that broadcasts
    the same way against tm's input (so b(tm(x), c) == tm(b(x, c'))), or None if there is none."""
    rank = len(tm.shape)
    if len(c_shape) > rank:
        return None
    full = (1,) * (rank - len(c_shape)) + tuple(c_shape)
    ops = [("reshape", {"shape": list(full)})] if full != tuple(c_shape) else []
    if tm.op_type == "transpose":
        ops.append(("transpose", dict(tm.attrs)))
    elif tm.op_type == "permute":
        axes = [int(a) % rank for a in tm.attrs["axes"]]
        ops.append(("permute", {"axes": [axes.index(i) for i in range(rank)]}))
    elif tm.op_type == "narrow":
        if full[norm_dim(int(tm.attrs["dim"]), rank)] != 1:
            return None
    elif tm.op_type == "reshape":
        keep = 0
        while keep < min(rank, len(in_shape)) and in_shape[keep] == tm.shape[keep]:
            keep += 1
        if any(d != 1 for d in full[keep:]):
            return None
        ops.append(("reshape", {"shape": [*full[:keep], *[1] * (len(in_shape) - keep)]}))
    else:
        return None
    shape = tuple(c_shape)
    for op_type, attrs in ops:
        shape = registry.infer_shape(op_type, [shape], attrs)
    if len(shape) > len(in_shape) or tuple(np.broadcast_shapes(in_shape, shape)) != tuple(in_shape):
        return None
    return ops


def _binary_hoist_plan(graph: Graph, name: str, shared_ok: bool = False):
    """How to hoist binary op `name` above the TM(s) feeding it: (tm node, [(operand, ops to apply) x 2]), or
    None. With `shared_ok`, TMs read by other users too count (to decide whether to copy them first)."""
    node = graph.node(name)
    ops = graph.operands(name)
    if node.kind != "op" or registry.get(node.op_type).kind != "binary" or len(ops) != 2 or any(o.tms for o in ops):
        return None
    nodes = [graph.node(o.src) for o in ops]
    is_tm = [n.kind == "op" and n.op_type in _COMMUTING_TMS and n.shape == node.shape and
             (shared_ok or (_single_user(graph, n.name) and ops[0].src != ops[1].src)) for n in nodes]
    if all(is_tm):
        a, b = nodes
        (xa,), (xb,) = graph.operands(a.name), graph.operands(b.name)
        if a.op_type == b.op_type and a.attrs == b.attrs and graph.operand_shape(xa) == graph.operand_shape(xb):
            return a, [(xa, []), (xb, [])]
    for i in (0, 1):
        if is_tm[i] and _is_const_like(graph, ops[1 - i].src):
            (x,) = graph.operands(nodes[i].name)
            pre = _tm_preimage(nodes[i], graph.operand_shape(x), nodes[1 - i].shape)
            if pre is not None:
                plan = [(x, []), (ops[1 - i], pre)]
                return nodes[i], plan if i == 0 else plan[::-1]
    return None


def _wants_own_copy(graph: Graph, tm, user: str) -> bool:
    """Whether a user of TM node `tm` would move or cancel it if it were its only reader: a graph output (host
    transform), an elementwise unary op, a TM that merges with it, a binary op that can be hoisted above it."""
    node = graph.node(user)
    if node.kind == "output":
        return True
    if node.kind != "op":
        return False
    if registry.get(node.op_type).kind == "unary" and len(graph.operands(user)) == 1:
        return True
    if (tm.op_type, node.op_type) == ("reshape", "reshape") or \
            {tm.op_type, node.op_type} <= {"transpose", "permute"}:
        return True
    return _binary_hoist_plan(graph, user, shared_ok=True) is not None


def _split_shared_tms(graph: Graph) -> bool:
    """Copy a TM node read by several users once per user that would move or cancel it as its only reader."""
    changed = False
    for name, node in _live_ops(graph, _COMMUTING_TMS):
        users = graph.users(name)
        (src,) = graph.operands(name)
        if len(users) < 2 or _is_const_like(graph, src.src):
            continue
        movers = [(u, p) for u, p in users if _wants_own_copy(graph, node, u)]
        for user, port in movers[1:] if len(movers) == len(users) else movers:
            graph.set_operand(user, port, add_op(graph, graph.unique_name(f"{name}.copy"), node.op_type, [src],
                                                       dict(node.attrs)))
            changed = True
    return changed


def hoist_binary_above_tms(graph: Graph) -> bool:
    """b(tm(x), tm(y)) -> tm(b(x, y)) for an elementwise binary b whose operands come through the same TM
    (same type, attributes and input shape, no broadcast), and b(tm(x), c) -> tm(b(x, c')) for a constant c
    (c' = c through the inverse TM, folded by consteval). A residual add of two convolution outputs, or a
    per-channel scale and shift of one, then happens in the (spatial, channel) layout, and the layout TMs
    around it cancel.

    First, a TM node read by several users is copied for each user that would move or cancel it (a TM it merges
    with, an elementwise op, an output): a convolution output read by the next convolution, a residual add and a
    model output then has one TM chain per reader, each free to cancel or go to the host."""
    changed = _split_shared_tms(graph)
    for name in graph.topo_order():
        plan = _binary_hoist_plan(graph, name) if name in graph else None
        if plan is None:
            continue
        tm, operands = plan
        new_operands = []
        for operand, pre in operands:
            for op_type, attrs in pre:
                operand = add_op(graph, graph.unique_name(f"{name}.{op_type}"), op_type, [operand], attrs)
            new_operands.append(operand)
        node = graph.node(name)
        old_tms = [o.src for o in graph.operands(name) if graph.node(o.src).op_type in _COMMUTING_TMS]
        new_b = add_op(graph, graph.unique_name(f"{name}.hoisted"), node.op_type, new_operands, dict(node.attrs))
        new_tm = add_op(graph, graph.unique_name(f"{tm.name}.sunk"), tm.op_type, [new_b], dict(tm.attrs))
        graph.replace_uses(name, new_tm)
        graph.remove_node(name)
        for n in dict.fromkeys(old_tms):
            if not graph.users(n):
                graph.remove_node(n)
        graph.rename(new_b, name)
        graph.rename(new_tm, tm.name)
        changed = True
    return changed


def simplify(graph: Graph, config=None) -> None:
    """Constant evaluation with the value-based folds (infinity tests, trivial where/add/multiply) to a fixpoint."""
    while True:
        changed = fold_infinity_tests(graph) | bypass_trivial(graph)
        if config is None or config.enable_consteval:
            changed |= consteval(graph)
        if not changed:
            return


def optimize(graph: Graph, config=None) -> Graph:
    """Run the rewrites to a fixpoint, then consteval (unless disabled)."""
    while (canonicalize_permutes(graph) | heads_to_slices(graph) | hoist_unary_above_tms(graph)
           | cancel_tms(graph) | fold_transpose_flatten_into_matmul(graph) | narrow_before_reshape(graph)
           | fold_column_slices_into_matmul(graph) | hoist_binary_above_tms(graph)):
        simplify(graph, config)
    if config is None or config.enable_consteval:
        while consteval(graph):
            pass
    graph.remove_dead()
    return graph
