"""Batch normalization (inference).

`batchnorm(x, gamma, beta, running_mean, running_var; dim, epsilon)` normalizes along the channel dim `dim`
(-3 for NCHW) with the running statistics, as torch's eval-mode BatchNorm2d. It decomposes, as the legacy
compiler did, into `x * scale + shift` with

    scale = gamma / sqrt(running_var + epsilon)        shift = beta - running_mean * scale

computed by ops on the parameters, so consteval folds them into two per-channel constants. A batchnorm
that follows a convolution is folded into the convolution's weights and bias before decomposition
(`passes/fuse_pad.py`), which is what keeps CNN activations in the convolution layout.
"""
from __future__ import annotations

import numpy as np

from .common import norm_dim
from .registry import OpDef, OpError, register


def _shape(shapes, attrs):
    x = shapes[0]
    dim = norm_dim(int(attrs.get("dim", -3)), len(x))
    for i, s in enumerate(shapes[1:], start=1):
        if tuple(s) != (x[dim],):
            raise OpError(f"operand {i} has shape {tuple(s)}; expected ({x[dim]},) (channels of dim {dim} of {x})")
    return x


def _channel_shape(dim: int) -> tuple:
    """Shape that broadcasts a (C,) vector along the (negative) dim `dim`: (C, 1, ..., 1)."""
    return (-1,) + (1,) * (-dim - 1)


def scale_shift(gamma, beta, mean, var, epsilon: float):
    scale = gamma.astype(np.float64) / np.sqrt(var.astype(np.float64) + epsilon)
    return scale, beta.astype(np.float64) - mean.astype(np.float64) * scale


def _eval(values, attrs):
    x, gamma, beta, mean, var = values
    dim = norm_dim(int(attrs.get("dim", -3)), x.ndim)
    scale, shift = scale_shift(gamma, beta, mean, var, float(attrs.get("epsilon", 1e-5)))
    shape = _channel_shape(dim)
    return x.astype(np.float64) * scale.reshape(shape) + shift.reshape(shape)


def build_scale_shift(op, constant, gamma, beta, mean, var, epsilon: float) -> tuple[str, str]:
    """(scale, shift) as (C,) graph values built with `op(op_type, operands, attrs)` and `constant(value)`."""
    eps = constant(np.array(epsilon, dtype=np.float32))
    scale = op("multiply", [gamma, op("reciprocal", [op("sqrt", [op("add", [var, eps])])])])
    shift = op("subtract", [beta, op("multiply", [mean, scale])])
    return scale, shift


def _decompose(ctx):
    x, gamma, beta, mean, var = ctx.operands
    shape = ctx.node.shape
    dim = norm_dim(int(ctx.node.attrs.get("dim", -3)), len(shape))
    scale, shift = build_scale_shift(ctx.op, ctx.constant, gamma, beta, mean, var,
                                     float(ctx.node.attrs.get("epsilon", 1e-5)))
    cshape = [shape[dim]] + [1] * (-dim - 1)
    if len(cshape) > 1:
        scale = ctx.op("reshape", [scale], {"shape": cshape})
        shift = ctx.op("reshape", [shift], {"shape": cshape})
    ctx.replace(ctx.op("add", [ctx.op("multiply", [x, scale]), shift]))


register(OpDef("batchnorm", _shape, _eval, arity=(5, 5), kind="nn", decompose=_decompose))
