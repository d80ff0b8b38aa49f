"""Reductions: PyBuda reduce_sum / reduce_avg / reduce_max / argmax and the Buda `reduce` (max) op."""
from __future__ import annotations

import numpy as np

from .common import ceil_tile, norm_dim
from .conv import from_spatial_rows, to_spatial_rows
from .registry import OpDef, OpError, register

PAD_FILL = -1.0e6  # value written into padding before a max reduction, as the legacy compiler does


def _shape(shapes, attrs):
    shape = shapes[0]
    dim = norm_dim(int(attrs["dim"]), len(shape))
    out = list(shape)
    if attrs.get("keep_dim", True):
        out[dim] = 1
    else:
        del out[dim]
    return tuple(out)


def _evaluator(fn):
    def ev(values, attrs):
        x = values[0]
        dim = norm_dim(int(attrs["dim"]), x.ndim)
        return fn(x, axis=dim, keepdims=attrs.get("keep_dim", True))
    return ev


def _decompose_reduce(ctx):
    """reduce(keep_dim=False) == reduce(keep_dim=True) followed by a reshape dropping the dim. A reduction over z
    (dim -3 of a tensor of 3 or more dims, (..., Z, R, C)) is one over the columns of the (..., R*C, Z) matrix
    (`to_spatial_rows`, the CNN layout, whose changes cancel between convolutions), back to (..., 1, R, C)."""
    shape = ctx.node_input_shape(0)
    dim = norm_dim(int(ctx.node.attrs["dim"]), len(shape))
    if not ctx.node.attrs.get("keep_dim", True):
        attrs = dict(ctx.node.attrs, keep_dim=True)
        red = ctx.op(ctx.node.op_type, ctx.operands, attrs)
        ctx.replace(ctx.op("reshape", [red], {"shape": list(ctx.node.shape)}))
    elif len(shape) >= 3 and dim == -3 and shape[-3] > 1:
        *_, z, r, c = shape
        matrix, lead = to_spatial_rows(ctx, ctx.operands[0], z, r, c)
        red = ctx.op(ctx.node.op_type, [matrix], dict(ctx.node.attrs, dim=-1))
        ctx.replace(from_spatial_rows(ctx, red, lead, 1, r, c, r * c))


def _lower_sum_like(scale_by_count: bool):
    def lower(ctx):
        (x,) = ctx.operands
        dim = norm_dim(int(ctx.node.attrs["dim"]), len(x.shape))
        n = x.shape[dim]
        scale = 1.0 / n if scale_by_count else 1.0
        if n == 1:
            return x
        if dim == -1:
            ones = np.zeros((1, 1, ceil_tile(n), 32), dtype=np.float32)
            ones[..., :n, :] = scale
            c = ctx.constant_padded(ones, (n, 1), name_hint="reduce_ones")
            return ctx.op("matmul", [x, ctx.broadcast_to(c, (*x.shape[:-2], n, 1), axes="z")], {},
                          pad_zero=(x.pad_zero[0], False), replicated=frozenset({"c"}), logical_shape=ctx.node.shape)
        if dim == -2:
            ones = np.zeros((1, 1, 32, ceil_tile(n)), dtype=np.float32)
            ones[..., :, :n] = scale
            c = ctx.constant_padded(ones, (1, n), name_hint="reduce_ones")
            return ctx.op("matmul", [ctx.broadcast_to(c, (*x.shape[:-2], 1, n), axes="z"), x], {},
                          pad_zero=(False, x.pad_zero[1]), replicated=frozenset({"r"}), logical_shape=ctx.node.shape)
        raise OpError(f"op {ctx.node.name!r}: reduction over dim {dim} (z) is not supported on device yet")
    return lower


def _lower_max(ctx):
    (x,) = ctx.operands
    dim = norm_dim(int(ctx.node.attrs["dim"]), len(x.shape))
    n = x.shape[dim]
    if n == 1:
        return x
    if dim not in (-1, -2):
        raise OpError(f"op {ctx.node.name!r}: max reduction over dim {dim} (z) is not supported on device yet")
    if n % 32:
        x = ctx.fill_padding(x, dim, PAD_FILL)
    return ctx.op("reduce", [x], {"dim": "c" if dim == -1 else "r", "type": "max"},
                  pad_zero=(x.pad_zero[0], False) if dim == -1 else (False, x.pad_zero[1]),
                  logical_shape=ctx.node.shape)


def _spread(ctx, grad):
    """The gradient of a keep_dim reduction broadcast back over the reduced dim."""
    if not ctx.attrs.get("keep_dim", True):
        raise OpError(f"op {ctx.node.name!r}: backward of a reduction without keep_dim (decompose it first)")
    return ctx.op("broadcast", [grad], {"shape": list(ctx.shape(0))})


def _avg_backward(ctx, index, grad):
    n = ctx.shape(0)[norm_dim(int(ctx.attrs["dim"]), len(ctx.shape(0)))]
    return ctx.op("multiply", [_spread(ctx, grad), ctx.scalar(1.0 / n)])


def _max_backward(ctx, index, grad):
    """The gradient goes to every position equal to the maximum (max - x <= 0 there)."""
    at_max = ctx.op("subtract", [ctx.scalar(1.0),
                                 ctx.op("heaviside", [ctx.op("subtract", [ctx.output, ctx.operand(0)])])])
    return ctx.op("multiply", [_spread(ctx, grad), at_max])


register(OpDef("reduce_sum", _shape, _evaluator(np.sum), kind="reduce", groups={"sign_keeping"},
               decompose=_decompose_reduce, lower=_lower_sum_like(False), backward=lambda ctx, i, g: _spread(ctx, g)))
register(OpDef("reduce_avg", _shape, _evaluator(np.mean), kind="reduce", groups={"sign_keeping"},
               decompose=_decompose_reduce, lower=_lower_sum_like(True), backward=_avg_backward))
register(OpDef("reduce_max", _shape, _evaluator(np.max), kind="reduce", decompose=_decompose_reduce,
               lower=_lower_max, backward=_max_backward))


def _argmax(x, axis, keepdims):
    return np.argmax(x, axis=axis, keepdims=keepdims).astype(np.float32)


# the index of the first largest value along `dim` (a classifier's predicted class); no device lowering: at the
# end of a model it runs on the host after the device (`cpu_fallback.behind_device`)
register(OpDef("argmax", _shape, _evaluator(_argmax), kind="reduce"))


# ---- Buda reduce: tile-level semantics on 4-D padded arrays --------------------------------------

def _buda_reduce_shape(shapes, attrs):
    *lead, z, r, c = shapes[0]
    if attrs["dim"] == "c":
        return (*lead, z, r, 32)
    if attrs["dim"] == "r":
        return (*lead, z, 32, c)
    raise OpError(f"Buda reduce dim {attrs['dim']!r} not supported; legal: r, c")


def _buda_reduce_eval(values, attrs):
    """Max of each row (dim c) lands in column 0 of the output tile row; other columns are 0 (dim r: rows)."""
    x = values[0]
    if attrs.get("type", "max") != "max":
        raise OpError(f"Buda reduce type {attrs.get('type')!r} not supported; legal: max")
    out = np.zeros(_buda_reduce_shape([x.shape], attrs), dtype=np.float32)
    if attrs["dim"] == "c":
        out[..., :, 0] = x.max(axis=-1)
    else:
        out[..., 0, :] = x.max(axis=-2)
    return out


register(OpDef("reduce", _buda_reduce_shape, _buda_reduce_eval, buda=True, kind="reduce",
               groups={"fusable", "streamable", "inner_dim"}))
