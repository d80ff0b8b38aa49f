"""Convolution and pooling. Both decompose into picker matmuls (im2col by constant 0/1 matrices), the
way the legacy compiler lowered them: activations are kept as (spatial, channels) matrices, each kernel tap
is one block of rows of a picker matrix, and vslice/hstack TMs turn the stacked taps into im2col columns."""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from .common import ceil_tile
from .registry import OpDef, OpError, register


def _pair(v) -> tuple:
    return (int(v), int(v)) if np.isscalar(v) else tuple(int(x) for x in v)


def _pads(v) -> tuple:
    """(top, left, bottom, right) from an int, a pair (h, w) or a 4-tuple."""
    if np.isscalar(v):
        return (int(v),) * 4
    v = tuple(int(x) for x in v)
    return (v[0], v[1], v[0], v[1]) if len(v) == 2 else v


def _geometry(h: int, w: int, attrs: dict, kernel: tuple) -> tuple:
    sh, sw = _pair(attrs.get("stride", 1))
    dh, dw = _pair(attrs.get("dilation", 1))
    pt, pl, pb, pr = _pads(attrs.get("padding", 0))
    kh, kw = kernel
    ho = (h + pt + pb - dh * (kh - 1) - 1) // sh + 1
    wo = (w + pl + pr - dw * (kw - 1) - 1) // sw + 1
    if ho < 1 or wo < 1:
        raise OpError(f"kernel {kernel} larger than padded input {(h, w)}")
    return ho, wo, (sh, sw), (dh, dw), (pt, pl, pb, pr)


def _windows(x: np.ndarray, kernel: tuple, attrs: dict, fill: float) -> np.ndarray:
    """(..., C, Ho, Wo, kh, kw) windows of x (..., C, H, W) with padding `fill`."""
    ho, wo, (sh, sw), (dh, dw), (pt, pl, pb, pr) = _geometry(x.shape[-2], x.shape[-1], attrs, kernel)
    xp = np.pad(x, [(0, 0)] * (x.ndim - 2) + [(pt, pb), (pl, pr)], constant_values=fill)
    kh, kw = kernel
    win = sliding_window_view(xp, ((kh - 1) * dh + 1, (kw - 1) * dw + 1), axis=(-2, -1))
    return win[..., ::sh, ::sw, ::dh, ::dw][..., :ho, :wo, :, :]


# ---- conv2d ---------------------------------------------------------------------------------------

def _conv_shape(shapes, attrs):
    x, w = shapes[0], shapes[1]
    if len(x) < 3 or len(w) != 4:
        raise OpError(f"conv2d expects input (..., C, H, W) and weight (Cout, Cin/groups, kh, kw), got {x}, {w}")
    groups = int(attrs.get("groups", 1))
    if x[-3] != w[1] * groups:
        raise OpError(f"input channels {x[-3]} != weight in-channels {w[1]} x groups {groups}")
    ho, wo, *_ = _geometry(x[-2], x[-1], attrs, (w[2], w[3]))
    return (*x[:-3], w[0], ho, wo)


def _conv_eval(values, attrs):
    x, w = values[0].astype(np.float64), values[1].astype(np.float64)
    groups = int(attrs.get("groups", 1))
    win = _windows(x, (w.shape[2], w.shape[3]), attrs, 0.0)  # (..., Cin, Ho, Wo, kh, kw)
    cin_g, cout_g = w.shape[1], w.shape[0] // groups
    outs = []
    for g in range(groups):
        wg = w[g * cout_g:(g + 1) * cout_g]
        xg = win[..., g * cin_g:(g + 1) * cin_g, :, :, :, :]
        outs.append(np.einsum("...chwij,ocij->...ohw", xg, wg))
    out = np.concatenate(outs, axis=-3)
    if len(values) > 2 and values[2] is not None:
        out = out + values[2].reshape(-1, 1, 1)
    return out


def conv_picker(h: int, w: int, kernel: tuple, attrs: dict, clamp: bool) -> tuple[np.ndarray, int, int, int]:
    """Stacked picker (taps * ceil32(Ho*Wo), H*W): block `tap` selects each output position's input pixel.
    Out-of-image taps select nothing (zero padding), or with `clamp` the nearest in-image pixel of the same
    window (exact for max pooling). Returns (picker, Ho, Wo, rows per tap)."""
    ho, wo, (sh, sw), (dh, dw), (pt, pl, _, _) = _geometry(h, w, attrs, kernel)
    kh, kw = kernel
    rows = ceil_tile(ho * wo)
    picker = np.zeros((kh * kw * rows, h * w), dtype=np.float32)
    oy, ox = np.meshgrid(np.arange(ho), np.arange(wo), indexing="ij")
    out_idx = (oy * wo + ox).ravel()
    for i in range(kh):
        for j in range(kw):
            iy, ix = (oy * sh - pt + i * dh).ravel(), (ox * sw - pl + j * dw).ravel()
            if clamp:
                iy_lo, ix_lo = oy.ravel() * sh - pt, ox.ravel() * sw - pl
                iy = np.clip(iy, np.maximum(iy_lo, 0), np.minimum(iy_lo + (kh - 1) * dh, h - 1))
                ix = np.clip(ix, np.maximum(ix_lo, 0), np.minimum(ix_lo + (kw - 1) * dw, w - 1))
            ok = (iy >= 0) & (iy < h) & (ix >= 0) & (ix < w)
            picker[(i * kw + j) * rows + out_idx[ok], (iy * w + ix)[ok]] = 1.0
    return picker, ho, wo, rows


def _to_spatial_rows(ctx, x, c: int, h: int, w: int):
    """(..., C, H, W) -> (..., 1, H*W, C): spatial positions as rows, channels as columns."""
    lead = ctx.node_input_shape(0)[:-3]
    flat = ctx.op("reshape", [x], {"shape": [*lead, c, h * w]})
    return ctx.op("transpose", [flat], {"dim0": -2, "dim1": -1}), lead


def _from_spatial_rows(ctx, y, lead, c: int, ho: int, wo: int, rows: int):
    """(..., rows, C) -> (..., C, Ho, Wo), dropping the tile padding rows."""
    if rows != ho * wo:
        y = ctx.op("narrow", [y], {"dim": -2, "start": 0, "length": ho * wo})
    yt = ctx.op("transpose", [y], {"dim0": -2, "dim1": -1})
    return ctx.op("reshape", [yt], {"shape": [*lead, c, ho, wo]})


def _decompose_conv(ctx):
    x, wgt, *bias = ctx.operands
    *_, cin, h, w = ctx.node_input_shape(0)
    cout, _, kh, kw = ctx.node_input_shape(1)
    if int(ctx.node.attrs.get("groups", 1)) != 1:
        raise OpError(f"op {ctx.node.name!r}: grouped convolution is not supported yet (groups="
                      f"{ctx.node.attrs['groups']})")
    xt, lead = _to_spatial_rows(ctx, x, cin, h, w)
    cin_p = ceil_tile(cin)
    if cin_p != cin:
        xt = ctx.op("pad", [xt], {"shape": [*lead, h * w, cin_p]})
    picker, ho, wo, rows = conv_picker(h, w, (kh, kw), ctx.node.attrs, clamp=False)
    taps = kh * kw
    if taps == 1 and rows == h * w and np.array_equal(picker, np.eye(h * w, dtype=np.float32)):
        cols = xt
    else:
        cols = ctx.op("matmul", [ctx.constant(picker, "picker"), xt])
        if taps > 1:
            cols = ctx.op("hstack", [ctx.op("vslice", [cols], {"factor": taps})], {"factor": taps})
    # weight (Cout, Cin, kh, kw) -> rows ordered (tap, cin padded), columns Cout
    wt = ctx.op("permute", [wgt], {"axes": [2, 3, 1, 0]})
    if cin_p != cin:
        wt = ctx.op("pad", [wt], {"shape": [kh, kw, cin_p, cout]})
    wt = ctx.op("reshape", [wt], {"shape": [taps * cin_p, cout]})
    y = ctx.op("matmul", [cols, wt])
    if bias:
        y = ctx.op("add", [y, bias[0]])
    ctx.replace(_from_spatial_rows(ctx, y, lead, cout, ho, wo, rows))


register(OpDef("conv2d", _conv_shape, _conv_eval, arity=(2, 3), kind="nn", decompose=_decompose_conv))


# ---- max_pool2d -----------------------------------------------------------------------------------

def _pool_shape(shapes, attrs):
    x = shapes[0]
    if attrs.get("ceil_mode"):
        raise OpError("max_pool2d with ceil_mode=True is not supported yet")
    ho, wo, *_ = _geometry(x[-2], x[-1], attrs, _pair(attrs["kernel"]))
    return (*x[:-2], ho, wo)


def _pool_eval(values, attrs):
    win = _windows(values[0], _pair(attrs["kernel"]), attrs, -np.inf)
    return win.max(axis=(-2, -1))


def _decompose_max_pool(ctx):
    (x,) = ctx.operands
    *_, c, h, w = ctx.node_input_shape(0)
    kernel = _pair(ctx.node.attrs["kernel"])
    xt, lead = _to_spatial_rows(ctx, x, c, h, w)
    picker, ho, wo, rows = conv_picker(h, w, kernel, ctx.node.attrs, clamp=True)
    best = None
    for tap in range(kernel[0] * kernel[1]):
        sel = ctx.op("matmul", [ctx.constant(picker[tap * rows:(tap + 1) * rows], "pool_picker"), xt])
        best = sel if best is None else ctx.op("maximum", [best, sel])
    ctx.replace(_from_spatial_rows(ctx, best, lead, c, ho, wo, rows))


register(OpDef("max_pool2d", _pool_shape, _pool_eval, kind="nn", decompose=_decompose_max_pool))
