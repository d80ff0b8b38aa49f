"""Volume (3-D) window ops on (..., C, D, H, W) tensors: `conv3d`, `max_pool3d` and `resize3d` (legacy PyBuda's
Conv3d, MaxPool3d and Resize3d).

The device holds (z, r, c) tensors only, so each decomposes into its 2-D op over depth slices. The input is laid out
as depth-major "slabs", (..., D*C, H, W) with z-block i holding depth i's channels (a transpose and a reshape, which
the host applies to a model input), and the result goes back alike (applied by the host to a model output):
    conv3d      per output depth, one conv2d over the channel run of the input depths its kernel reads (the weight's
                depth taps as extra input channels, cut to the taps inside the input; with groups or depth dilation,
                one conv2d per tap, summed)
    max_pool3d  one max_pool2d of all slabs, then per output depth the maximum of the depth window's slabs
    resize3d    one resize2d of all slabs, then per output depth the depth map's slabs (weighted, summed)
Depth slices are channel narrows and concatenations, which run in the convolution layout (H*W, channels) as
column slices; conv3d reads its input's slices from one such matrix, so that a model input reaches them through one
chain of TMs, which the host applies (`passes/host_io.py`)."""
from __future__ import annotations

import functools

import numpy as np

from .conv import _conv_eval, _conv_shape, _pool_eval, _pool_shape, from_spatial_rows, out_size
from .registry import OpDef, OpError, register
from .resample import _resize_eval, _resize_shape, resize_matrix


def _triple(v) -> tuple[int, int, int]:
    return (int(v),) * 3 if np.isscalar(v) else tuple(int(x) for x in v)


def _pads(attrs: dict) -> list[int]:
    """The padding (front, top, left, back, bottom, right)."""
    pads = [int(v) for v in np.ravel(attrs.get("padding", 0))]
    pads = pads * 6 if len(pads) == 1 else pads
    if len(pads) != 6:
        raise OpError(f"padding {attrs['padding']}; legal: a number or (front, top, left, back, bottom, right)")
    return pads


def _depth(attrs: dict, d: int, k: int, ceil_mode: bool = False) -> tuple[int, int, int, int]:
    """(output depth, stride, dilation, front padding) of a window of `k` taps along a depth of `d`."""
    sd, dd = _triple(attrs.get("stride", 1))[0], _triple(attrs.get("dilation", 1))[0]
    front, back = _pads(attrs)[::3]
    do = out_size(d, k, sd, front, back, ceil_mode, dd)
    if do < 1:
        raise OpError(f"depth kernel {k} (dilation {dd}) larger than the padded input depth {d}")
    return do, sd, dd, front


def _taps(do: int, k: int, d: int, sd: int, dd: int, front: int) -> list[range]:
    """Per output depth, the kernel taps that read inside the input (input depth o*sd + t*dd - front): a run."""
    runs = []
    for o in range(do):
        inside = [t for t in range(k) if 0 <= o * sd + t * dd - front < d]
        runs.append(range(inside[0], inside[-1] + 1) if inside else range(0))
    return runs


def _attrs2d(attrs: dict) -> dict:
    """The H and W part of 3-D window attributes."""
    p = _pads(attrs)
    out = {"stride": _triple(attrs.get("stride", 1))[1:], "dilation": _triple(attrs.get("dilation", 1))[1:],
           "padding": (p[1], p[2], p[4], p[5])}
    for key in ("kernel", "groups", "ceil_mode"):
        if key in attrs:
            out[key] = _triple(attrs[key])[1:] if key == "kernel" else attrs[key]
    return out


def _check_rank(op: str, shape: tuple) -> None:
    if len(shape) < 4:
        raise OpError(f"{op} expects an input (..., C, D, H, W), got {shape}")


# ---- the slab layout ---------------------------------------------------------------------------------------

def _to_slabs(ctx, x, shape: tuple):
    """(..., C, D, H, W) -> (..., D*C, H, W), depth-major."""
    *lead, c, d, h, w = shape
    deep = ctx.op("transpose", [x], {"dim0": -4, "dim1": -3})
    return ctx.op("reshape", [deep], {"shape": [*lead, d * c, h, w]})


def _from_slabs(ctx, slabs: list, lead: list, c: int, h: int, w: int):
    """Per-depth (..., C, H, W) values stacked back to (..., C, D, H, W)."""
    y = slabs[0] if len(slabs) == 1 else ctx.op("concatenate", slabs, {"dim": -3})
    deep = ctx.op("reshape", [y], {"shape": [*lead, len(slabs), c, h, w]})
    return ctx.op("transpose", [deep], {"dim0": -4, "dim1": -3})


def _channel_reader(ctx, x, shape: tuple):
    """fn(start, length) -> the slabs' channels start..start+length of x (..., C, D, H, W), as (..., length, H, W):
    column slices of one (..., H*W, D*C) matrix, which a model input reaches through one chain of TMs (host
    transforms) however many slices read it."""
    *lead, c, d, h, w = shape
    slabs = ctx.op("reshape", [_to_slabs(ctx, x, shape)], {"shape": [*lead, d * c, h * w]})
    matrix = ctx.op("transpose", [slabs], {"dim0": -2, "dim1": -1})

    def read(start: int, length: int):
        cols = matrix if length == d * c else ctx.op("narrow", [matrix], {"dim": -1, "start": start, "length": length})
        return from_spatial_rows(ctx, cols, lead, length, h, w, h * w)
    return read


def _channels(ctx, x, size: int, start: int, length: int):
    """Channels start..start+length of x (..., size, H, W) (x itself when that is all of them)."""
    if start == 0 and length == size:
        return x
    return ctx.op("narrow", [x], {"dim": -3, "start": start, "length": length})


# ---- conv3d ------------------------------------------------------------------------------------------------

def _conv3d_shape(shapes, attrs):
    x, w = shapes[0], shapes[1]
    _check_rank("conv3d", x)
    if len(w) != 5:
        raise OpError(f"conv3d expects a weight (Cout, Cin/groups, kD, kH, kW), got {w}")
    do = _depth(attrs, x[-3], w[2])[0]
    *lead, cout, ho, wo = _conv_shape([(*x[:-3], *x[-2:]), (*w[:2], *w[3:])], _attrs2d(attrs))
    return (*lead, cout, do, ho, wo)


def _conv3d_eval(values, attrs):
    x, w, *bias = values
    do, sd, dd, front = _depth(attrs, x.shape[-3], w.shape[2])
    a2 = _attrs2d(attrs)
    zero = np.zeros(_conv_shape([x.shape[:-3] + x.shape[-2:], w.shape[:2] + w.shape[3:]], a2))
    if bias and bias[0] is not None:
        zero = zero + bias[0].reshape(-1, 1, 1)
    return np.stack([sum((_conv_eval([x[..., o * sd + t * dd - front, :, :], w[:, :, t]], a2) for t in taps), zero)
                     for o, taps in enumerate(_taps(do, w.shape[2], x.shape[-3], sd, dd, front))], axis=-3)


def _decompose_conv3d(ctx):
    x, wgt, *bias = ctx.operands
    *lead, cin, d, h, w = ctx.node_input_shape(0)
    cout, cin_g, kd, kh, kw = ctx.node_input_shape(1)
    *_, ho, wo = ctx.node.shape
    attrs, a2 = ctx.node.attrs, _attrs2d(ctx.node.attrs)
    groups = int(attrs.get("groups", 1))
    do, sd, dd, front = _depth(attrs, d, kd)
    read = _channel_reader(ctx, x, (*lead, cin, d, h, w))
    # the depth taps as input channels, tap-major: (Cout, kD*Cin/g, kH, kW), folded with the weight
    taps_as_channels = ctx.op("reshape", [ctx.op("permute", [wgt], {"axes": [0, 2, 1, 3, 4]})],
                              {"shape": [cout, kd * cin_g, kh, kw]})
    weight = functools.cache(lambda lo, n: taps_as_channels if n == kd else ctx.op(
        "narrow", [taps_as_channels], {"dim": 1, "start": lo * cin_g, "length": n * cin_g}))
    out = []
    for o, taps in enumerate(_taps(do, kd, d, sd, dd, front)):
        # a run of taps whose input depths are contiguous slabs: all of them, unless grouped or depth-dilated
        runs = [taps] if taps and groups == 1 and dd == 1 else [range(t, t + 1) for t in taps]
        terms = []
        for run in runs:
            acts = read((o * sd + run.start * dd - front) * cin, len(run) * cin)
            extra = bias if not terms else []
            terms.append(ctx.op("conv2d", [acts, weight(run.start, len(run)), *extra], a2))
        if not terms:  # the window lies in the depth padding
            zero = ctx.constant(np.zeros((*lead, cout, ho, wo), dtype=np.float32), "zero_depth")
            terms = [ctx.op("add", [zero, ctx.op("reshape", [bias[0]], {"shape": [cout, 1, 1]})])] if bias else [zero]
        out.append(functools.reduce(lambda a, b: ctx.op("add", [a, b]), terms))
    ctx.replace(_from_slabs(ctx, out, lead, cout, ho, wo))


register(OpDef("conv3d", _conv3d_shape, _conv3d_eval, arity=(2, 3), kind="nn", decompose=_decompose_conv3d))


# ---- max_pool3d --------------------------------------------------------------------------------------------

def _pool3d_depth(attrs: dict, d: int) -> tuple[int, int, int, int]:
    return _depth(attrs, d, _triple(attrs["kernel"])[0], bool(attrs.get("ceil_mode", False)))


def _pool3d_taps(attrs: dict, d: int) -> list[range]:
    """Per output depth, the window's taps inside the input (OpError if a window has none)."""
    do, sd, dd, front = _pool3d_depth(attrs, d)
    taps = _taps(do, _triple(attrs["kernel"])[0], d, sd, dd, front)
    if not all(taps):
        raise OpError(f"a depth window lies wholly in the padding {attrs['padding']}; legal: padding at most half "
                      "the kernel")
    return taps


def _pool3d_shape(shapes, attrs):
    x = shapes[0]
    _check_rank("max_pool3d", x)
    do = len(_pool3d_taps(attrs, x[-3]))
    *lead, c, ho, wo = _pool_shape([(*x[:-3], *x[-2:])], _attrs2d(attrs))
    return (*lead, c, do, ho, wo)


def _pool3d_eval(values, attrs):
    pooled = _pool_eval([values[0]], _attrs2d(attrs))        # every depth slice: (..., C, D, Ho, Wo)
    _, sd, dd, front = _pool3d_depth(attrs, values[0].shape[-3])
    return np.stack([np.max([pooled[..., o * sd + t * dd - front, :, :] for t in taps], axis=0)
                     for o, taps in enumerate(_pool3d_taps(attrs, values[0].shape[-3]))], axis=-3)


def _decompose_pool3d(ctx):
    (x,) = ctx.operands
    *lead, c, d, h, w = ctx.node_input_shape(0)
    *_, ho, wo = ctx.node.shape
    _, sd, dd, front = _pool3d_depth(ctx.node.attrs, d)
    pooled = ctx.op("max_pool2d", [_to_slabs(ctx, x, (*lead, c, d, h, w))], _attrs2d(ctx.node.attrs))
    depth = functools.cache(lambda i: _channels(ctx, pooled, d * c, i * c, c))
    out = [functools.reduce(lambda a, b: ctx.op("maximum", [a, b]), [depth(o * sd + t * dd - front) for t in taps])
           for o, taps in enumerate(_pool3d_taps(ctx.node.attrs, d))]
    ctx.replace(_from_slabs(ctx, out, lead, c, ho, wo))


register(OpDef("max_pool3d", _pool3d_shape, _pool3d_eval, kind="nn", decompose=_decompose_pool3d))


# ---- resize3d ----------------------------------------------------------------------------------------------

def _resize3d_parts(shape: tuple, attrs: dict) -> tuple[dict, np.ndarray]:
    """The resize2d attributes of the H and W part, and the (Do, D) depth map."""
    if len(attrs["size"]) != 3:
        raise OpError(f"resize3d size {list(attrs['size'])}: legal: (depth, height, width)")
    method = attrs.get("method", "nearest_neighbor")
    a2 = {**attrs, "size": [int(s) for s in attrs["size"][1:]]}
    return a2, resize_matrix(shape[-3], int(attrs["size"][0]), method,
                             attrs.get("coordinate_transformation_mode", "half_pixel"),
                             attrs.get("rounding_method", "round"))


def _resize3d_shape(shapes, attrs):
    _check_rank("resize3d", shapes[0])
    a2, depth_map = _resize3d_parts(shapes[0], attrs)
    *lead, c, ho, wo = _resize_shape([(*shapes[0][:-3], *shapes[0][-2:])], a2)
    return (*lead, c, depth_map.shape[0], ho, wo)


def _resize3d_eval(values, attrs):
    a2, depth_map = _resize3d_parts(values[0].shape, attrs)
    return np.einsum("od,...dhw->...ohw", depth_map, _resize_eval([values[0]], a2))


def _decompose_resize3d(ctx):
    (x,) = ctx.operands
    *lead, c, d, h, w = ctx.node_input_shape(0)
    *_, ho, wo = ctx.node.shape
    a2, depth_map = _resize3d_parts(ctx.node_input_shape(0), ctx.node.attrs)
    resized = ctx.op("resize2d", [_to_slabs(ctx, x, (*lead, c, d, h, w))], a2)
    depth = functools.cache(lambda i: _channels(ctx, resized, d * c, i * c, c))
    out = []
    for row in depth_map:
        terms = [depth(int(i)) if row[i] == 1.0 else
                 ctx.op("multiply", [depth(int(i)), ctx.constant(np.float32(row[i]).reshape(1), "depth_weight")])
                 for i in np.flatnonzero(row)]
        out.append(functools.reduce(lambda a, b: ctx.op("add", [a, b]), terms))
    ctx.replace(_from_slabs(ctx, out, lead, c, ho, wo))


register(OpDef("resize3d", _resize3d_shape, _resize3d_eval, kind="nn", decompose=_decompose_resize3d))
