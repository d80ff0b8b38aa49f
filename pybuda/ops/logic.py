"""Comparisons, logical ops, where and casts. Values are float arrays of 0.0/1.0 (booleans) or integral
floats (integer dtypes). On device only `where` with finite operands is lowered (as arithmetic); the others
exist for constant evaluation (masks built from shapes) and for host (CPU fallback) execution."""
from __future__ import annotations

import numpy as np

from .common import broadcast_shapes
from .registry import OpDef, register

_COMPARE = {
    "equal": np.equal, "not_equal": np.not_equal, "greater": np.greater, "greater_equal": np.greater_equal,
    "less": np.less, "less_equal": np.less_equal,
}


def _bcast(shapes, attrs):
    return broadcast_shapes(*shapes)


for _name, _fn in _COMPARE.items():
    register(OpDef(_name, _bcast, (lambda fn: lambda v, a: fn(v[0], v[1]).astype(np.float32))(_fn),
                   arity=(2, 2), kind="compare"))

register(OpDef("logical_not", lambda s, a: s[0], lambda v, a: (v[0] == 0).astype(np.float32), kind="compare"))
register(OpDef("logical_and", _bcast, lambda v, a: ((v[0] != 0) & (v[1] != 0)).astype(np.float32),
               arity=(2, 2), kind="compare"))
register(OpDef("logical_or", _bcast, lambda v, a: ((v[0] != 0) | (v[1] != 0)).astype(np.float32),
               arity=(2, 2), kind="compare"))


def _where_eval(values, attrs):
    return np.where(values[0] != 0, values[1], values[2])


def _decompose_where(ctx):
    """where(c, x, y) = y + c * (x - y): exact for a 0/1 condition and finite x, y. With a constant condition
    it is c * x + (1 - c) * y (both products are masks, (1 - c) * y folds for a constant y), so no x - y is
    formed: a large fill (the finfo.min of a causal mask) would overflow it in a 16-bit format."""
    c, x, y = ctx.operands
    if ctx.graph.node(c.src).kind in ("constant", "parameter"):
        keep_y = ctx.op("subtract", [ctx.constant(np.array(1.0, dtype=np.float32), "one"), c])
        ctx.replace(ctx.op("add", [ctx.op("multiply", [c, x]), ctx.op("multiply", [keep_y, y])]))
        return
    ctx.replace(ctx.op("add", [y, ctx.op("multiply", [c, ctx.op("subtract", [x, y])])]))


register(OpDef("where", _bcast, _where_eval, arity=(3, 3), kind="compare", decompose=_decompose_where))


_CASTS = {
    "float32": lambda x: x, "float16": lambda x: x, "bfloat16": lambda x: x,
    "bool": lambda x: (x != 0).astype(np.float32),
    **{t: np.trunc for t in ("int8", "int16", "int32", "int64", "uint8")},
}


def _cast_eval(values, attrs):
    return _CASTS[attrs["dtype"]](values[0])


def _decompose_cast(ctx):
    """Float-to-float casts are the identity on device (formats are chosen by the compiler)."""
    if ctx.node.attrs["dtype"] in ("float32", "float16", "bfloat16"):
        ctx.replace(ctx.operands[0])


register(OpDef("cast", lambda s, a: s[0], _cast_eval, kind="unary", decompose=_decompose_cast,
               backward=lambda ctx, i, g: g))
