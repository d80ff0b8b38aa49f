"""Optimize (PyBuda IR): layout rewrites, each a pattern plus a function (`rewrite.py`), run in the order of
`REWRITES` to a fixpoint with the value folds of `simplify.py` after every sweep that changed the graph, then
consteval. Permutes are canonicalized and attention heads become hslice/hstack, elementwise ops move above TMs,
inverse TMs cancel, and a transpose feeding a flatten or a column slice of a matmul output is folded into the
matmul's constant weights.

All rewrites preserve the graph's golden outputs; `compile(..., verify=True)` checks that after the stage."""
from __future__ import annotations

import numpy as np

from ..ir import Graph, Node
from ..ops import add_op, registry
from ..ops.common import norm_dim
from .rewrite import ANY, Pattern, fixpoint, rewrite
from .simplify import consteval, is_const_like, simplify

# TMs that commute with an elementwise op (pad and fill_padding do not: they write values)
_COMMUTING_TMS = registry.in_group("rearranging")
_PERMUTES = ("transpose", "permute")


def _single_user(graph: Graph, name: str) -> bool:
    return len(graph.users(name)) == 1


def _swaps_last_two(graph: Graph, node: Node) -> bool:
    return node.op_type == "transpose" and {norm_dim(int(node.attrs["dim0"]), len(node.shape)),
                                            norm_dim(int(node.attrs["dim1"]), len(node.shape))} == {-2, -1}


def _on_last_dim(graph: Graph, node: Node) -> bool:
    return norm_dim(int(node.attrs["dim"]), len(node.shape)) == -1


def _sink_tm(graph: Graph, op: Node, tm: Node, operands: list) -> None:
    """Replace `op` (which reads TM node `tm`) by tm(op(operands)); both ops keep their names."""
    new_op = add_op(graph, graph.unique_name(f"{op.name}.hoisted"), op.op_type, operands, dict(op.attrs))
    new_tm = add_op(graph, graph.unique_name(f"{tm.name}.sunk"), tm.op_type, [new_op], dict(tm.attrs))
    graph.replace(op.name, new_tm, prune=True)
    graph.rename(new_op, op.name)
    graph.rename(new_tm, tm.name)


@rewrite(Pattern(op_kind="unary", operands=[Pattern(_COMMUTING_TMS, single_user=True)]))
def hoist_unary_above_tms(graph: Graph, node: Node) -> bool:
    """u(tm(x)) -> tm(u(x)) for elementwise unary u, so that TM pairs around it can cancel."""
    tm = graph.producer(node.name)
    _sink_tm(graph, node, tm, graph.operands(tm.name))
    return True


@rewrite(Pattern(("reshape", "transpose"), operands=[ANY]))
def cancel_tms(graph: Graph, node: Node) -> bool:
    """Drop an identity reshape, merge a reshape into the reshape it reads, cancel back-to-back transposes of the
    last two dims."""
    (operand,) = graph.operands(node.name)
    if node.op_type == "reshape" and graph.operand_shape(operand) == node.shape:
        graph.replace(node.name, operand)
        return True
    src = graph.node(operand.src)
    if src.kind != "op" or not _single_user(graph, src.name):
        return False
    if node.op_type == src.op_type == "reshape":
        graph.replace(src.name, graph.operands(src.name)[0])
        return True
    if _swaps_last_two(graph, node) and _swaps_last_two(graph, src):
        graph.replace(node.name, graph.operands(src.name)[0], prune=True)
        return True
    return False


@rewrite(Pattern("reshape", operands=[Pattern("transpose", single_user=True, where=_swaps_last_two)],
                 users=Pattern("matmul")))
def fold_transpose_flatten_into_matmul(graph: Graph, node: Node) -> bool:
    """flatten(transpose(X)) @ W  ->  flatten(X) @ W' with W' the rows of W permuted to match.

    X (..., P, C) -> transpose -> (..., C, P) -> reshape -> (..., C*P) -> matmul operand 0, W constant-like."""
    transpose = graph.producer(node.name)
    *lead, c, p = transpose.shape
    if node.shape[-1] != c * p or int(np.prod(node.shape[:-1])) != int(np.prod(lead)):
        return False
    users = graph.users(node.name)
    if not all(port == 0 and is_const_like(graph, graph.operands(u)[1].src) and not graph.operands(u)[1].tms
               for u, port in users):
        return False
    graph.replace(transpose.name, graph.operands(transpose.name)[0])
    for user, _ in users:
        w = graph.operands(user)[1].src
        n = graph.node(w).shape[-1]
        base = graph.unique_name(f"{user}.w_perm")
        w3 = add_op(graph, base + ".r0", "reshape", [w], {"shape": [c, p, n]})
        wt = add_op(graph, base + ".t", "transpose", [w3], {"dim0": 0, "dim1": 1})
        graph.set_operand(user, 1, add_op(graph, base + ".r1", "reshape", [wt], {"shape": [p * c, n]}))
    return True


def _permute_axes(graph: Graph, node: Node) -> list[int] | None:
    """The axes of a permute or transpose as a permutation (non-negative), None for other nodes."""
    if node.kind != "op" or node.op_type not in _PERMUTES:
        return None
    rank = len(graph.operand_shape(graph.operands(node.name)[0]))
    if node.op_type == "permute":
        return [int(a) % rank for a in node.attrs["axes"]]
    axes = list(range(rank))
    d0, d1 = int(node.attrs["dim0"]) % rank, int(node.attrs["dim1"]) % rank
    axes[d0], axes[d1] = axes[d1], axes[d0]
    return axes


@rewrite(Pattern(_PERMUTES))
def canonicalize_permutes(graph: Graph, node: Node) -> bool:
    """Compose a permute/transpose with the one it reads (if it is its only reader) and drop identities; a swap of
    two dims is written transpose(dim0 < dim1, both negative), any other permutation permute(axes >= 0)."""
    axes = _permute_axes(graph, node)
    (operand,) = graph.operands(node.name)
    composed = not operand.tms and _single_user(graph, operand.src) and _permute_axes(graph, graph.node(operand.src))
    if composed:
        axes = [composed[a] for a in axes]
        graph.replace(operand.src, graph.operands(operand.src)[0])
    moved = [i for i, a in enumerate(axes) if a != i]
    if not moved:
        graph.replace(node.name, graph.operands(node.name)[0])
        return True
    if len(moved) == 2:
        op_type, attrs = "transpose", {"dim0": moved[0] - len(axes), "dim1": moved[1] - len(axes)}
    else:
        op_type, attrs = "permute", {"axes": axes}
    if (node.op_type, node.attrs) == (op_type, attrs):
        return bool(composed)
    node.op_type, node.attrs = op_type, attrs
    return True


def _heads_perm(graph: Graph, node: Node) -> list[int] | None:
    """The permutation of the last three dims (as negative indices) if the node moves only those."""
    axes = _permute_axes(graph, node)
    if axes is None or len(axes) < 3 or axes[:-3] != list(range(len(axes) - 3)):
        return None
    return [a - len(axes) for a in axes[-3:]]


@rewrite(Pattern(_PERMUTES, where=lambda graph, node: _heads_perm(graph, node) in ([-2, -3, -1], [-2, -1, -3])))
def heads_to_slices(graph: Graph, node: Node) -> bool:
    """Attention heads as the legacy netlists express them:
    reshape (.., S, H) -> (.., S, n, d) then swap(-3, -2)  ==  hslice(n) (+ a free rank reshape),
    the same followed by swap(-2, -1) (keys transposed)  ==  hslice(n) + transpose, and
    swap(-3, -2) of (.., n, S, d) then reshape -> (.., S, n*d)  ==  hstack(n)."""
    perm = _heads_perm(graph, node)
    out = node.shape
    src = graph.producer(node.name)
    (x,) = graph.operands(node.name)
    if not x.tms and src.op_type == "reshape" and _single_user(graph, src.name):
        (x,) = graph.operands(src.name)
        in_shape = graph.operand_shape(x)
        _, s, n, d = (1, *src.shape)[-4:]
        # the rows stay the rows: a reshape that also splits a leading dim out of them, (.., B*S, H) -> (.., B, S,
        # n, d) as in YOLOv5's detect head, is no head split (hslice keeps B*S rows behind the heads)
        if in_shape[-1] == n * d and in_shape[-2] == s and int(np.prod(in_shape[:-2])) == int(np.prod(out[:-3])):
            y = add_op(graph, graph.unique_name(f"{node.name}.hslice"), "hslice", [x], {"factor": n})
            if perm == [-2, -1, -3]:
                y = add_op(graph, graph.unique_name(f"{node.name}.kt"), "transpose", [y], {"dim0": -2, "dim1": -1})
            heads = add_op(graph, graph.unique_name(f"{node.name}.heads"), "reshape", [y], {"shape": list(out)})
            graph.replace(node.name, heads, prune=True)
            return True
    users = graph.users(node.name)
    if perm != [-2, -3, -1] or len(users) != 1 or graph.node(users[0][0]).op_type != "reshape" or \
            graph.operands(users[0][0])[0].tms:
        return False
    reshape = users[0][0]
    target = graph.node(reshape).shape
    n, s, d = node.shape[-2], node.shape[-3], node.shape[-1]
    if target[-1] != n * d or int(np.prod(target[:-1])) != int(np.prod(out[:-3])) * s:
        return False
    (x,) = graph.operands(node.name)
    stacked = add_op(graph, graph.unique_name(f"{reshape}.hstack"), "hstack", [x], {"factor": n})
    merged = add_op(graph, graph.unique_name(f"{reshape}.merged"), "reshape", [stacked], {"shape": list(target)})
    graph.replace(reshape, merged, prune=True)
    return True


@rewrite(Pattern(_PERMUTES, where=lambda graph, node: _heads_perm(graph, node) == [-1, -3, -2]))
def channels_first_as_matrix_tms(graph: Graph, node: Node) -> bool:
    """(.., H, W, C) -> (.., C, H, W)  ==  reshape to (.., H*W, C), transpose, reshape to (.., C, H, W): the back
    permute of a channels-last block (ConvNeXt) as the layout TMs of convolutions, which cancel with the next
    convolution's and lower as a row stack and a transpose."""
    (x,) = graph.operands(node.name)
    *lead, h, w, c = graph.operand_shape(x)
    rows = add_op(graph, graph.unique_name(f"{node.name}.rows"), "reshape", [x], {"shape": [*lead, h * w, c]})
    cols = add_op(graph, graph.unique_name(f"{node.name}.t"), "transpose", [rows], {"dim0": -2, "dim1": -1})
    graph.replace(node.name, add_op(graph, graph.unique_name(f"{node.name}.nchw"), "reshape", [cols],
                                    {"shape": list(node.shape)}), prune=True)
    return True


def _keeps_last_dim(graph: Graph, node: Node) -> bool:
    return graph.operand_shape(graph.operands(node.name)[0])[-1] == node.shape[-1]


@rewrite(Pattern("narrow", where=_on_last_dim, operands=[Pattern("reshape", where=_keeps_last_dim)]))
def narrow_before_reshape(graph: Graph, node: Node) -> bool:
    """narrow(reshape(x), last dim) -> reshape(narrow(x, last dim)) when the reshape keeps the last dim."""
    (x,) = graph.operands(graph.producer(node.name).name)
    cut = add_op(graph, graph.unique_name(f"{node.name}.first"), "narrow", [x], dict(node.attrs, dim=-1))
    view = add_op(graph, graph.unique_name(f"{node.name}.view"), "reshape", [cut], {"shape": list(node.shape)})
    graph.replace(node.name, view, prune=True)
    return True


def _split_rank(graph: Graph, node: Node) -> int:
    """k when a reshape splits the last dim into its last k dims (k >= 2), leading positions unchanged; else 0."""
    if node.kind != "op" or node.op_type != "reshape":
        return 0
    shape = graph.operand_shape(graph.operands(node.name)[0])
    out = node.shape
    for k in range(2, len(out) + 1):
        if int(np.prod(out[-k:])) == shape[-1] and int(np.prod(shape[:-1])) == int(np.prod(out[:-k])):
            return k if out[-k] > 1 else 0
    return 0


def _narrows_split_dim(graph: Graph, node: Node) -> bool:
    """A narrow of one of the dims its producer's reshape split the last dim into."""
    k = _split_rank(graph, graph.producer(node.name))
    return k > 0 and -k <= norm_dim(int(node.attrs["dim"]), len(node.shape)) < 0


@rewrite(Pattern("narrow", where=_narrows_split_dim, operands=[Pattern("reshape")]))
def gather_before_split(graph: Graph, node: Node) -> bool:
    """narrow(reshape(x, (.., s1, .., sk)), one of the s dims) -> reshape(x @ P): the same part of every group of
    an interleaved split (LeViT's per-head q/k/v, BLOOM's (heads, 3, head_dim) fused projection) is a column
    gather of x by a constant one-hot matrix P."""
    reshape = graph.producer(node.name)
    (x,) = graph.operands(reshape.name)
    k = _split_rank(graph, reshape)
    split = reshape.shape[-k:]
    index = [slice(None)] * k
    start, length = int(node.attrs["start"]), int(node.attrs["length"])
    index[norm_dim(int(node.attrs["dim"]), len(node.shape))] = slice(start, start + length)
    columns = np.arange(int(np.prod(split))).reshape(split)[tuple(index)].ravel()
    onehot = np.zeros((int(np.prod(split)), len(columns)), dtype=np.float32)
    onehot[columns, np.arange(len(columns))] = 1.0
    picker = graph.add_constant(graph.unique_name(f"{node.name}.columns"), onehot)
    cut = add_op(graph, graph.unique_name(f"{node.name}.gather"), "matmul", [x, picker])
    view = add_op(graph, graph.unique_name(f"{node.name}.view"), "reshape", [cut], {"shape": list(node.shape)})
    graph.replace(node.name, view, prune=True)
    return True


@rewrite(Pattern(("add", "matmul"), users=Pattern("narrow", where=_on_last_dim)))
def fold_column_slices_into_matmul(graph: Graph, node: Node) -> bool:
    """narrow(x @ W [+ b], last dim) -> x @ W[..., s] [+ b[s]] for constant W and b: a split of a fused
    projection (e.g. GPT-2's qkv) becomes separate projections instead of a data-moving slice."""
    if node.op_type == "add":
        operands = graph.operands(node.name)
        mm = next((o.src for o in operands if graph.node(o.src).op_type == "matmul" and not o.tms), None)
        bias = next((o.src for o in operands if o.src != mm), None)
        if mm is None or not is_const_like(graph, bias) or not _single_user(graph, mm):
            return False
    else:
        mm, bias = node.name, None
    x, w = graph.operands(mm)
    if not is_const_like(graph, w.src) or w.tms:
        return False
    for user, _ in graph.users(node.name):
        a = graph.node(user).attrs
        cut = {"dim": -1, "start": a["start"], "length": a["length"]}
        ws = add_op(graph, graph.unique_name(f"{user}.w"), "narrow", [w.src], dict(cut))
        y = add_op(graph, graph.unique_name(f"{user}.mm"), "matmul", [x, ws])
        if bias is not None:
            if graph.node(bias).shape[-1] > 1:
                b = add_op(graph, graph.unique_name(f"{user}.b"), "narrow", [bias], dict(cut))
            else:
                b = bias
            y = add_op(graph, graph.unique_name(f"{user}.bias"), "add", [y, b])
        graph.replace(user, y)
    return True


def _tm_preimage(tm: Node, in_shape: tuple, c_shape: tuple) -> list | None:
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


def _is_reshape(node: Node) -> bool:
    return node.kind == "op" and node.op_type == "reshape"


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
        if is_tm[i] and (is_const_like(graph, ops[1 - i].src) or _is_reshape(nodes[1 - i])):
            (x,) = graph.operands(nodes[i].name)
            pre = _tm_preimage(nodes[i], graph.operand_shape(x), nodes[1 - i].shape)
            if pre is not None and (is_const_like(graph, ops[1 - i].src)
                                    or all(op_type == "reshape" for op_type, _ in pre)):
                plan = [(x, []), (ops[1 - i], pre)]
                return nodes[i], plan if i == 0 else plan[::-1]
    return None


def _wants_own_copy(graph: Graph, tm: Node, user: str) -> bool:
    """Whether a user of TM node `tm` would move or cancel it if it were its only reader: a graph output (host
    transform), an elementwise unary op, a TM that merges with it, a binary op that can be hoisted above it."""
    node = graph.node(user)
    if node.kind == "output":
        return True
    if node.kind != "op":
        return False
    if registry.get(node.op_type).kind == "unary" and len(graph.operands(user)) == 1:
        return True
    if (tm.op_type, node.op_type) == ("reshape", "reshape") or {tm.op_type, node.op_type} <= set(_PERMUTES):
        return True
    return _binary_hoist_plan(graph, user, shared_ok=True) is not None


@rewrite(Pattern(_COMMUTING_TMS, where=lambda graph, node: len(graph.users(node.name)) > 1
                 and not is_const_like(graph, graph.operands(node.name)[0].src)))
def split_shared_tms(graph: Graph, node: Node) -> bool:
    """Copy a TM node read by several users once per user that would move or cancel it as its only reader (a TM
    it merges with, an elementwise op, an output): a convolution output read by the next convolution, a residual
    add and a model output then has one TM chain per reader, each free to cancel or go to the host."""
    users = graph.users(node.name)
    (src,) = graph.operands(node.name)
    movers = [(u, p) for u, p in users if _wants_own_copy(graph, node, u)]
    copied = movers[1:] if len(movers) == len(users) else movers
    for user, port in copied:
        copy = add_op(graph, graph.unique_name(f"{node.name}.copy"), node.op_type, [src], dict(node.attrs))
        graph.set_operand(user, port, copy)
    return bool(copied)


@rewrite(Pattern(op_kind="binary"))
def hoist_binary_above_tms(graph: Graph, node: Node) -> bool:
    """b(tm(x), tm(y)) -> tm(b(x, y)) for an elementwise binary b whose operands come through the same TM
    (same type, attributes and input shape, no broadcast), and b(tm(x), c) -> tm(b(x, c')) for a constant c
    (c' = c through the inverse TM, folded by consteval), or for a reshaped runtime c when the inverse TM is a
    reshape too (it merges with c's reshape). A residual add of two convolution outputs, a per-channel scale and
    shift of one, or a squeeze-and-excitation gate then happens in the (spatial, channel) layout, and the layout
    TMs around it cancel."""
    plan = _binary_hoist_plan(graph, node.name)
    if plan is None:
        return False
    tm, operands = plan
    new_operands = []
    for operand, pre in operands:
        for op_type, attrs in pre:
            operand = add_op(graph, graph.unique_name(f"{node.name}.{op_type}"), op_type, [operand], attrs)
        new_operands.append(operand)
    _sink_tm(graph, node, tm, new_operands)
    return True


# The declared order of one optimize sweep.
REWRITES = (canonicalize_permutes, heads_to_slices, channels_first_as_matrix_tms, hoist_unary_above_tms, cancel_tms,
            fold_transpose_flatten_into_matmul, narrow_before_reshape, gather_before_split,
            fold_column_slices_into_matmul,
            split_shared_tms, hoist_binary_above_tms)


def optimize(graph: Graph, config=None) -> Graph:
    """Run the rewrites to a fixpoint (simplifying after every sweep that changed the graph), then consteval
    (unless disabled) and dead-code removal."""
    fixpoint(graph, REWRITES, between=lambda g: simplify(g, config))
    if config is None or config.enable_consteval:
        fixpoint(graph, [consteval])
    graph.remove_dead()
    return graph
