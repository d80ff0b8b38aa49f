"""Batch normalization (inference) and group normalization.

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
from .conv import from_spatial_rows, to_spatial_rows
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


# ---- groupnorm ----------------------------------------------------------------------------------------
# groupnorm(x, gamma, beta; groups, epsilon) over (N, C, L) or (N, C, H, W), as torch GroupNorm: each group of
# C/groups channels is normalized over its channels and positions, then scaled and shifted per channel.

def _group_shape(shapes, attrs):
    x, gamma, beta = shapes
    groups = int(attrs["groups"])
    if len(x) not in (3, 4) or x[1] % groups or tuple(gamma) != (x[1],) or tuple(beta) != (x[1],):
        raise OpError(f"groupnorm expects (N, C, L) or (N, C, H, W) with C divisible by groups={groups} and "
                      f"(C,) gamma/beta, got {x}, {gamma}, {beta}")
    return x


def _group_eval(values, attrs):
    x, gamma, beta = (v.astype(np.float64) for v in values)
    g = x.reshape(x.shape[0], int(attrs["groups"]), -1)
    norm = (g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + float(attrs["epsilon"]))
    shape = (-1,) + (1,) * (x.ndim - 2)
    return norm.reshape(x.shape) * gamma.reshape(shape) + beta.reshape(shape)


def _decompose_group(ctx):
    """On the (positions, channels) layout of convolutions: per-channel means over the rows, averaged over each
    group by a constant block matrix (a matmul), so no reshape moves channels across tiles."""
    x, gamma, beta = ctx.operands
    shape = ctx.node.shape
    c, groups = shape[1], int(ctx.node.attrs["groups"])
    h, w = (1, shape[2]) if len(shape) == 3 else shape[2:]
    if len(shape) == 3:
        x = ctx.op("reshape", [x], {"shape": [shape[0], c, 1, shape[2]]})
    xt, lead = to_spatial_rows(ctx, x, c, h, w)                                    # (N, H*W, C)
    size = c // groups
    block = (np.arange(c)[:, None] // size == np.arange(c)[None, :] // size) / size
    average = ctx.constant(block.astype(np.float32), "group_average")

    def group_mean(v):
        return ctx.op("matmul", [ctx.op("reduce_avg", [v], {"dim": -2, "keep_dim": True}), average])

    centered = ctx.op("subtract", [xt, group_mean(xt)])
    var = group_mean(ctx.op("multiply", [centered, centered]))
    eps = ctx.constant(np.array(float(ctx.node.attrs["epsilon"]), dtype=np.float32), "epsilon")
    inv = ctx.op("reciprocal", [ctx.op("sqrt", [ctx.op("add", [var, eps])])])
    y = ctx.op("add", [ctx.op("multiply", [ctx.op("multiply", [centered, inv]), gamma]), beta])
    y = from_spatial_rows(ctx, y, lead, c, h, w, h * w)
    ctx.replace(y if len(shape) == 4 else ctx.op("reshape", [y], {"shape": list(shape)}))


register(OpDef("groupnorm", _group_shape, _group_eval, arity=(3, 3), kind="nn", decompose=_decompose_group))
