"""Composite NN ops, defined by their golden eval and decomposed into hardware ops."""
from __future__ import annotations

import numpy as np

from .common import norm_dim
from .registry import OpDef, register


def _same(shapes, attrs):
    return shapes[0]


def _softmax_eval(values, attrs):
    x = values[0].astype(np.float64)
    d = int(attrs.get("dim", -1))
    e = np.exp(x - x.max(axis=d, keepdims=True))
    return e / e.sum(axis=d, keepdims=True)


def _log_softmax_eval(values, attrs):
    x = values[0].astype(np.float64)
    d = int(attrs.get("dim", -1))
    xs = x - x.max(axis=d, keepdims=True)
    return xs - np.log(np.exp(xs).sum(axis=d, keepdims=True))


def _shifted(ctx):
    """x (with padding filled so exp(padding) ~ 0), minus its max along dim when stable softmax is on."""
    (x,) = ctx.operands
    dim = norm_dim(int(ctx.node.attrs.get("dim", -1)), len(ctx.node.shape))
    x = ctx.op("fill_padding", [x], {"dim": dim, "value": -1.0e6})
    stable = ctx.config is None or ctx.config.enable_stable_softmax
    if stable:
        x = ctx.op("subtract", [x, ctx.op("reduce_max", [x], {"dim": dim})])
    return x, dim


def _decompose_softmax(ctx):
    xs, dim = _shifted(ctx)
    e = ctx.op("exp", [xs])
    s = ctx.op("reduce_sum", [e], {"dim": dim})
    ctx.replace(ctx.op("multiply", [e, ctx.op("reciprocal", [s])]))


def _decompose_log_softmax(ctx):
    xs, dim = _shifted(ctx)
    s = ctx.op("reduce_sum", [ctx.op("exp", [xs])], {"dim": dim})
    ctx.replace(ctx.op("subtract", [xs, ctx.op("log", [s])]))


register(OpDef("softmax", _same, _softmax_eval, kind="nn", groups={"amp_float16", "bounded"},
               decompose=_decompose_softmax))
register(OpDef("log_softmax", _same, _log_softmax_eval, kind="nn", groups={"amp_float16"},
               decompose=_decompose_log_softmax))


def _layernorm_eval(values, attrs):
    x = values[0].astype(np.float64)
    d = int(attrs.get("dim", -1))
    mu = x.mean(axis=d, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=d, keepdims=True)
    y = (x - mu) / np.sqrt(var + float(attrs.get("epsilon", 1e-5)))
    if len(values) > 1 and values[1] is not None:
        y = y * values[1]
    if len(values) > 2 and values[2] is not None:
        y = y + values[2]
    return y


def _decompose_layernorm(ctx):
    x, *affine = ctx.operands
    dim = norm_dim(int(ctx.node.attrs.get("dim", -1)), len(ctx.node.shape))
    mu = ctx.op("reduce_avg", [x], {"dim": dim})
    xc = ctx.op("subtract", [x, mu])
    var = ctx.op("reduce_avg", [ctx.op("multiply", [xc, xc])], {"dim": dim})
    eps = ctx.constant(np.array(float(ctx.node.attrs.get("epsilon", 1e-5)), dtype=np.float32))
    inv = ctx.op("reciprocal", [ctx.op("sqrt", [ctx.op("add", [var, eps])])])
    y = ctx.op("multiply", [xc, inv])
    if len(affine) > 0:
        y = ctx.op("multiply", [y, affine[0]])
    if len(affine) > 1:
        y = ctx.op("add", [y, affine[1]])
    ctx.replace(y)


register(OpDef("layernorm", _same, _layernorm_eval, arity=(1, 3), kind="nn", groups={"amp_float16"},
               decompose=_decompose_layernorm))
