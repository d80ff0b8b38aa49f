"""Value folds (PyBuda IR), run by decompose and between the optimize sweeps: evaluate ops that read only
parameters and constants (consteval), fold the infinity tests of values that cannot be infinite, make a softmax
masked with -inf under torch's safe-softmax guard finite, and bypass where/add/multiply that leave an operand
unchanged."""
from __future__ import annotations

import numpy as np

from ..ir import Graph, Node, ShapeOnly
from ..ops import add_op, registry
from .rewrite import ANY, CONSTANT, Pattern, fixpoint, rewrite


def is_const_like(graph: Graph, name: str) -> bool:
    """True if `name` is computed from parameters and constants only (iterative: graphs are deep)."""
    stack, seen = [name], set()
    while stack:
        node = graph.node(stack.pop())
        if node.mutable:
            return False
        if node.kind in ("parameter", "constant") or node.name in seen:
            continue
        if node.kind != "op":
            return False
        seen.add(node.name)
        stack.extend(o.src for o in graph.operands(node.name))
    return True


@rewrite(Pattern(all_operands=CONSTANT))
def consteval(graph: Graph, node: Node) -> bool:
    """An op reading only parameters and constants becomes its value (IEEE results such as log(0) = -inf without a
    warning, as torch gives them). A parameter read by this op alone gives its name to the result, so netlist queues
    carry the model's parameter names."""
    srcs = [graph.node(o.src) for o in graph.operands(node.name)]
    with np.errstate(divide="ignore", invalid="ignore"):
        value = registry.evaluate(node.op_type, [s.value for s in srcs], node.attrs)
    params = [s for s in srcs if s.kind == "parameter"]
    keep = params[0].name if len(params) == 1 and len(graph.users(params[0].name)) == 1 else None
    add = graph.add_parameter if params else graph.add_constant
    folded = add(graph.unique_name(f"{node.name}.const"), value)
    graph.replace(node.name, folded, prune=True)
    if keep:
        graph.rename(folded, keep)
    return True


@rewrite(Pattern(op=("reshape", "transpose", "permute", "pad"), single_user=False,
                 operands=(Pattern(node_kinds=("parameter",), where=lambda g, n: n.role == "trained"
                                   and len(g.users(n.name)) == 1),)))
def fold_trained_view(graph: Graph, node: Node) -> bool:
    """A trained parameter read only through a reshape, transpose, permute or zero pad becomes that view of itself
    (the parameter's own name; an elementwise optimizer updates any view alike), so the device holds it in the
    layout its reader wants; `host_transforms` take the device value back to the framework's layout. A zero pad
    (a convolution's weight padded to whole channel tiles) meets zero-padded activations, so its padding gets a
    zero gradient and stays zero under SGD, Adam and AdamW."""
    param = graph.node(graph.operands(node.name)[0].src)
    value = registry.evaluate(node.op_type, [param.value], node.attrs)
    folded = graph.add_parameter(graph.unique_name(f"{node.name}.view"), value)
    graph.node(folded).role = "trained"
    inverse = registry.get(node.op_type).inverse(node.attrs, param.shape, node.shape)
    graph.node(folded).host_transforms = (*inverse, *param.host_transforms)
    name = param.name
    graph.replace(node.name, folded, prune=True)
    graph.rename(folded, name)
    return True


def _sign(graph: Graph, name: str) -> str | None:
    """"positive" (every element >= some c > 0), "nonnegative", or None (unknown) for a value: constants by their
    values; x*x and the registry's group "nonnegative" (square, abs, relu) are nonnegative; positive + nonnegative is
    positive; its group "sign_keeping" (TMs, sums, means, square roots) keep the sign (the sum of an RMS norm:
    mean(x*x) + eps)."""
    node = graph.node(name)
    if node.kind in ("parameter", "constant"):
        if isinstance(node.value, ShapeOnly):
            return None
        return "positive" if np.all(node.value > 0) else "nonnegative" if np.all(node.value >= 0) else None
    if node.kind != "op":
        return None
    srcs = [o.src for o in graph.operands(name)]
    if registry.belongs(node.op_type, "nonnegative") or (node.op_type == "multiply" and srcs[0] == srcs[1]):
        return "nonnegative"
    if registry.belongs(node.op_type, "sign_keeping"):
        return _sign(graph, srcs[0])
    if node.op_type == "add":
        signs = {_sign(graph, s) for s in srcs}
        return None if None in signs else "positive" if "positive" in signs else "nonnegative"
    return None


def _may_overflow(graph: Graph, node: Node) -> bool:
    """A log, or a division (reciprocal, divide, negative power) by a value that is not provably positive."""
    if node.op_type == "log":
        return True
    divides = node.op_type in ("reciprocal", "divide") or \
        (node.op_type == "power" and float(node.attrs["exponent"]) < 0)
    return divides and _sign(graph, graph.operands(node.name)[-1].src) != "positive"


def _finite(graph: Graph, name: str, memo: dict[str, bool]) -> bool:
    """Whether a value can hold no inf/nan: computed from finite inputs, parameters and constants without log or
    division by a value that may be zero (the registry's group "bounded", softmax, sigmoid and tanh, are finite
    whatever they read). `memo` holds the answers for other nodes."""
    stack = [name]
    while stack:
        node = graph.node(stack[-1])
        if node.name in memo:
            pass
        elif node.kind in ("parameter", "constant"):    # (unknown numbers: a model's weights are finite)
            memo[node.name] = isinstance(node.value, ShapeOnly) or bool(np.isfinite(node.value).all())
        elif node.kind == "input" or registry.belongs(node.op_type, "bounded"):
            memo[node.name] = True
        elif _may_overflow(graph, node):
            memo[node.name] = False
        else:
            srcs = [o.src for o in graph.operands(node.name)]
            pending = [s for s in srcs if s not in memo]
            if pending:
                stack.extend(pending)
                continue
            memo[node.name] = all(memo[s] for s in srcs)
        stack.pop()
    return memo[name]


_INFINITE = Pattern(node_kinds=CONSTANT.node_kinds, where=lambda graph, node: not isinstance(node.value, ShapeOnly)
                    and not np.isfinite(node.value).any())


@rewrite(Pattern(("equal", "not_equal"), operands=(ANY, _INFINITE)), sweep_state=dict)
def fold_infinity_tests(graph: Graph, node: Node, memo: dict[str, bool]) -> bool:
    """equal/not_equal(x, +-inf) on a value x that is finite, or finite plus a constant, is a constant (the masking
    guards of scaled-dot-product attention). The finiteness memo lasts one sweep: a node's answer is computed when
    the tests above it have been visited, and folding later tests does not change it."""
    x, inf = graph.producer(node.name, 0), graph.producer(node.name, 1)
    if _finite(graph, x.name, memo):
        value = np.zeros(node.shape, dtype=np.float32)
    elif x.kind == "op" and x.op_type == "add":
        a, b = graph.producer(x.name, 0), graph.producer(x.name, 1)
        const, other = (b, a) if b.kind in ("constant", "parameter") else (a, b)
        if const.kind not in ("constant", "parameter") or not _finite(graph, other.name, memo):
            return False
        value = np.broadcast_to((const.value == inf.value).astype(np.float32), node.shape).copy()
    else:
        return False
    if node.op_type == "not_equal":
        value = 1.0 - value
    graph.replace(node.name, graph.add_constant(graph.unique_name(f"{node.name}.folded"), value))
    return True


MASK_FILL = -1.0e4   # a masked score: exp(MASK_FILL - max) is 0 in every format while unmasked scores differ by less
_GUARD_CHAIN = ("logical_not", "cast", "reduce_max", "cast", "logical_not", "equal")   # from where's condition up


def _all(graph: Graph, name: str, value: float) -> bool:
    node = graph.node(name)
    return node.kind in ("constant", "parameter") and not node.mutable and bool(np.all(node.value == value))


def _guard_chain(graph: Graph, cond: str) -> list[str] | None:
    """The ops of torch's safe-softmax guard `not any(x != -inf)` over the last dim (a row all -inf gives 0, not
    NaN) from `cond` up, as torch.export writes it: logical_not(cast(reduce_max(cast(logical_not(equal(x,
    -inf)))))), or None; x is the last op's first operand."""
    chain, name = [], cond
    for op_type in _GUARD_CHAIN:
        node = graph.node(name)
        if node.kind != "op" or node.op_type != op_type or any(o.tms for o in graph.operands(name)):
            return None
        if op_type == "reduce_max" and int(node.attrs["dim"]) not in (-1, len(graph.operand_shape(
                graph.operands(name)[0])) - 1):
            return None
        chain.append(name)
        if op_type == "equal":
            return chain if _all(graph, graph.operands(name)[1].src, -np.inf) else None
        name = graph.operands(name)[0].src
    return None


def _remove_unused(graph: Graph, names: list[str]) -> None:
    """Remove the ops and constants among `names`, in order, that have no users (left by a rewrite)."""
    for name in names:
        if name in graph and graph.node(name).kind in ("op", "constant") and not graph.users(name) \
                and name not in graph.output_names:
            graph.remove_node(name)


@rewrite(Pattern("where", operands=(ANY, CONSTANT, Pattern("softmax"))), sweep_state=dict)
def finite_masked_softmax(graph: Graph, node: Node, memo: dict[str, bool]) -> bool:
    """softmax(s + where(c, 0, -inf)) under torch's safe-softmax guard (scaled-dot-product attention with a boolean
    mask: a row with every key masked gives 0) -> softmax(s + where(c, 0, MASK_FILL)) * any(c) over the row, for a
    finite s and a mask c computed from model inputs (a constant mask folds instead): the same values wherever
    unmasked scores differ by less than -MASK_FILL (about 10^4), and no infinity or guard left for the device; c
    runs on the host ahead of the device (`cpu_fallback.ahead_of_device`)."""
    cond, zero, probs = (o.src for o in graph.operands(node.name))
    chain = _guard_chain(graph, cond)
    x = graph.operands(chain[-1])[0].src if chain else None
    softmax = graph.node(probs)
    if x is None or not _all(graph, zero, 0.0) or graph.operands(probs)[0].src != x \
            or int(softmax.attrs["dim"]) not in (-1, len(softmax.shape) - 1):
        return False
    add = graph.node(x)
    if add.kind != "op" or add.op_type != "add" or any(o.tms for o in graph.operands(x)):
        return False
    for scores, mask in (tuple(o.src for o in graph.operands(x)), tuple(o.src for o in graph.operands(x))[::-1]):
        m = graph.node(mask)
        if m.kind == "op" and m.op_type == "where" and not any(o.tms for o in graph.operands(mask)) \
                and _finite(graph, scores, memo):
            c, keep, fill = (o.src for o in graph.operands(mask))
            if _all(graph, keep, 0.0) and _all(graph, fill, -np.inf) and not is_const_like(graph, c):
                break       # (a constant mask folds: consteval, then `fold_infinity_tests`)
    else:
        return False
    finite_mask, any_key = f"{mask}.finite", f"{c}.any_key"      # one of each per mask, shared by its layers
    if finite_mask not in graph:
        fill_value = graph.add_constant(graph.unique_name(f"{mask}.fill"), np.array(MASK_FILL, dtype=np.float32))
        add_op(graph, finite_mask, "where", [c, keep, fill_value])
    if any_key not in graph:
        add_op(graph, any_key, "reduce_max", [c], {"dim": -1, "keep_dim": True})
    masked = add_op(graph, graph.unique_name(f"{x}.finite"), "add", [scores, finite_mask])
    probs_finite = add_op(graph, graph.unique_name(f"{probs}.finite"), "softmax", [masked], dict(softmax.attrs))
    guarded = add_op(graph, graph.unique_name(f"{node.name}.guarded"), "multiply", [probs_finite, any_key])
    inf = graph.operands(chain[-1])[1].src
    graph.replace(node.name, guarded)
    _remove_unused(graph, [*chain, inf, zero, probs, x, mask, fill])
    return True


@rewrite(Pattern(("where", "add", "multiply")))
def bypass_trivial(graph: Graph, node: Node) -> bool:
    """where(all-true/all-false constant, a, b) -> a/b; x + 0 -> x; x * 1 -> x (when the shapes allow)."""
    operands = graph.operands(node.name)
    srcs = [graph.node(o.src) for o in operands]
    keep = None
    if node.op_type == "where" and srcs[0].kind == "constant" and not operands[0].tms:
        cond = srcs[0].value
        keep = operands[1] if np.all(cond != 0) else operands[2] if np.all(cond == 0) else None
    elif node.op_type in ("add", "multiply"):
        neutral = 0.0 if node.op_type == "add" else 1.0
        for i in (0, 1):
            if srcs[i].kind == "constant" and not operands[i].tms and np.all(srcs[i].value == neutral):
                keep = operands[1 - i]
    if keep is None or graph.operand_shape(keep) != node.shape:
        return False
    graph.replace(node.name, keep)
    return True


def simplify(graph: Graph, config=None) -> Graph:
    """The folds to a fixpoint (consteval unless `enable_consteval` is off)."""
    folds = [fold_infinity_tests, finite_masked_softmax, bypass_trivial, fold_trained_view]
    if config is None or config.enable_consteval:
        folds.append(consteval)
    fixpoint(graph, folds)
    return graph
