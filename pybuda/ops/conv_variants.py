"""Convolutions expressed through conv2d: `conv1d` (a conv2d of height 1) and `conv_transpose2d` (zero insertion
and border padding as one spatial map, then a stride-1 conv2d with the flipped, in/out-swapped kernel)."""
from __future__ import annotations

import numpy as np

from .conv import _conv_eval, _conv_shape, _pads, _pair
from .registry import OpDef, OpError, register
from .resample import spatial_map, spatial_map_eval


# ---- conv1d -------------------------------------------------------------------------------------------

def _conv2d_attrs(attrs: dict) -> dict:
    """conv1d attributes (stride, (left, right) padding, dilation, groups) as conv2d ones over (1, L)."""
    pads = attrs.get("padding", 0)
    left, right = (int(pads), int(pads)) if np.isscalar(pads) else (int(pads[0]), int(pads[-1]))
    return {"stride": [1, int(np.ravel(attrs.get("stride", 1))[0])], "padding": [0, left, 0, right],
            "dilation": [1, int(np.ravel(attrs.get("dilation", 1))[0])], "groups": int(attrs.get("groups", 1))}


def _conv1d_shape(shapes, attrs):
    x, w = shapes[0], shapes[1]
    if len(x) < 2 or len(w) != 3:
        raise OpError(f"conv1d expects input (..., C, L) and weight (Cout, Cin/groups, k), got {x}, {w}")
    out = _conv_shape([(*x[:-1], 1, x[-1]), (*w[:2], 1, w[2])], _conv2d_attrs(attrs))
    return (*out[:-2], out[-1])


def _conv1d_eval(values, attrs):
    x, w, *bias = values
    y = _conv_eval([x[..., None, :], w[:, :, None, :], *bias], _conv2d_attrs(attrs))
    return y[..., 0, :]


def _decompose_conv1d(ctx):
    x, w, *bias = ctx.operands
    xs, ws = ctx.node_input_shape(0), ctx.node_input_shape(1)
    x4 = ctx.op("reshape", [x], {"shape": [*xs[:-1], 1, xs[-1]]})
    w4 = ctx.op("reshape", [w], {"shape": [*ws[:2], 1, ws[2]]})
    y = ctx.op("conv2d", [x4, w4, *bias], _conv2d_attrs(ctx.node.attrs))
    ctx.replace(ctx.op("reshape", [y], {"shape": list(ctx.node.shape)}))


register(OpDef("conv1d", _conv1d_shape, _conv1d_eval, arity=(2, 3), kind="nn", decompose=_decompose_conv1d))


# ---- conv_transpose2d -----------------------------------------------------------------------------------

def _insertion(n: int, k: int, stride: int, dilation: int, before: int, after: int) -> np.ndarray:
    """(n_out, n) 0/1 map of one axis: input i to position i*stride of the zero-inserted axis, bordered by
    dilation*(k-1) - padding zeros (a negative border crops)."""
    lo, hi = dilation * (k - 1) - before, dilation * (k - 1) - after
    n_out = (n - 1) * stride + 1 + lo + hi
    m = np.zeros((n_out, n), dtype=np.float32)
    pos = lo + np.arange(n) * stride
    ok = (pos >= 0) & (pos < n_out)
    m[pos[ok], np.arange(n)[ok]] = 1.0
    return m


def _transpose_geometry(x: tuple, w: tuple, attrs: dict) -> tuple[np.ndarray, np.ndarray, dict]:
    """The insertion maps of both axes and the attributes of the stride-1 conv2d that follows."""
    if int(attrs.get("groups", 1)) != 1:
        raise OpError(f"conv_transpose2d with groups={attrs['groups']} is not supported yet (groups=1 only)")
    (sh, sw), (dh, dw) = _pair(attrs.get("stride", 1)), _pair(attrs.get("dilation", 1))
    pt, pl, pb, pr = _pads(attrs.get("padding", 0))
    oph, opw = _pair(attrs.get("output_padding", 0))
    kh, kw = w[-2:]
    a = _insertion(x[-2], kh, sh, dh, pt, pb - oph)
    b = _insertion(x[-1], kw, sw, dw, pl, pr - opw)
    return a, b, {"stride": [1, 1], "padding": [0, 0, 0, 0], "dilation": [dh, dw], "groups": 1}


def _transpose_shape(shapes, attrs):
    x, w = shapes[0], shapes[1]
    if len(x) < 3 or len(w) != 4 or x[-3] != w[0]:
        raise OpError(f"conv_transpose2d expects input (..., C, H, W) and weight (C, Cout, kh, kw), got {x}, {w}")
    a, b, conv = _transpose_geometry(x, w, attrs)
    return _conv_shape([(*x[:-2], a.shape[0], b.shape[0]), (w[1], w[0], *w[2:])], conv)


def _transpose_eval(values, attrs):
    x, w, *bias = values
    a, b, conv = _transpose_geometry(x.shape, w.shape, attrs)
    flipped = np.transpose(w, (1, 0, 2, 3))[:, :, ::-1, ::-1]
    return _conv_eval([spatial_map_eval(x, a, b), flipped, *bias], conv)


def _decompose_transpose(ctx):
    x, w, *bias = ctx.operands
    xs, ws = ctx.node_input_shape(0), ctx.node_input_shape(1)
    a, b, conv = _transpose_geometry(xs, ws, ctx.node.attrs)
    z = spatial_map(ctx, x, xs, a, b)
    wt = ctx.op("permute", [w], {"axes": [1, 0, 2, 3]})
    for axis in (2, 3):  # flip the kernel (constant-evaluated with the weight)
        rev = ctx.constant(np.arange(ws[axis] - 1, -1, -1, dtype=np.float32), "flip")
        wt = ctx.op("take", [wt, rev], {"axis": axis})
    ctx.replace(ctx.op("conv2d", [z, wt, *bias], conv))


# Relax nn.conv2d_transpose (NCHW, IOHW kernel): torch ConvTranspose2d.
register(OpDef("conv_transpose2d", _transpose_shape, _transpose_eval, arity=(2, 3), kind="nn",
               decompose=_decompose_transpose))
