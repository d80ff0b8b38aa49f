"""clip(x; min, max): clamp to [min, max] (torch.clamp semantics: min(max(x, min), max)); ReLU6 is clip(0, 6).

With min == 0 and a finite max > 0 it lowers to a `nop` with the packer relu in "max" mode (relu_threshold = max
clamps to [0, max] in the backend), as the legacy compiler did. Otherwise it decomposes: into `relu` when
min == 0 and max is infinite, else into `maximum` / `minimum` with scalar constants (both exact).
"""
from __future__ import annotations

import math

import numpy as np

from .registry import OpDef, register


def _bounds(attrs) -> tuple[float, float]:
    lo = attrs.get("min")
    hi = attrs.get("max")
    return (-math.inf if lo is None else float(lo)), (math.inf if hi is None else float(hi))


def _eval(values, attrs):
    lo, hi = _bounds(attrs)
    return np.minimum(np.maximum(values[0], np.float32(lo)), np.float32(hi))


def _is_packer_relu(lo: float, hi: float) -> bool:
    return lo == 0.0 and 0.0 < hi < math.inf


def _decompose(ctx):
    lo, hi = _bounds(ctx.node.attrs)
    if _is_packer_relu(lo, hi):
        return  # lowered directly
    (y,) = ctx.operands
    if lo == 0.0 and hi == math.inf:
        ctx.replace(ctx.op("relu", [y]))
        return
    if lo > -math.inf:
        y = ctx.op("maximum", [y, ctx.constant(np.array(lo, dtype=np.float32), "clip_min")])
    if hi < math.inf:
        y = ctx.op("minimum", [y, ctx.constant(np.array(hi, dtype=np.float32), "clip_max")])
    ctx.replace(y)


def _lower(ctx):
    (x,) = ctx.operands
    _, hi = _bounds(ctx.node.attrs)
    return ctx.op("nop", [x], {"relu_en": True, "relu_mode": "max", "relu_threshold": float(hi)},
                  pad_zero=x.pad_zero, replicated=x.replicated)


def _backward(ctx, index, grad):
    """The gradient passes where lo < x < hi."""
    lo, hi = _bounds(ctx.attrs)
    x = ctx.operand(0)
    if lo > -math.inf:
        grad = ctx.op("multiply", [grad, ctx.op("heaviside", [ctx.op("subtract", [x, ctx.scalar(lo)])])])
    if hi < math.inf:
        grad = ctx.op("multiply", [grad, ctx.op("heaviside", [ctx.op("subtract", [ctx.scalar(hi), x])])])
    return grad


register(OpDef("clip", lambda shapes, attrs: shapes[0], _eval, kind="unary",
               decompose=_decompose, lower=_lower, backward=_backward))
