"""constant_pad(x; pad_width, value): pad with a constant, as Relax `nn.pad` (constant mode) and torch F.pad.

`pad_width` is Relax's flat list (before_0, after_0, before_1, after_1, ...) over all dims. (The registry's
`pad` op is different: it only grows the last dims into the tile padding.)

A zero pad feeding a convolution is folded into the convolution's padding before decomposition
(`passes/fuse_pad.py`). Otherwise a pad of the last two dims decomposes like a convolution tap: the
activation as a (spatial, channel) matrix, a 0/1 picker (sparse) matmul placing each input pixel at its
padded position, plus a constant holding `value` at the new border positions.
"""
from __future__ import annotations

import numpy as np

from ..sparse import SparseMatrix
from .common import ceil_tile
from .conv import from_spatial_rows, picker_matmul
from .registry import OpDef, OpError, register


def _widths(shape: tuple, attrs: dict) -> list[tuple[int, int]]:
    pw = [int(p) for p in attrs["pad_width"]]
    if len(pw) != 2 * len(shape):
        raise OpError(f"pad_width {pw} needs 2 values per dim of {tuple(shape)}")
    if any(p < 0 for p in pw):
        raise OpError(f"negative pad_width {pw} (cropping) is not supported")
    return [(pw[2 * i], pw[2 * i + 1]) for i in range(len(shape))]


def _shape(shapes, attrs):
    return tuple(s + a + b for s, (a, b) in zip(shapes[0], _widths(shapes[0], attrs)))


def _eval(values, attrs):
    x = values[0]
    return np.pad(x, _widths(x.shape, attrs), constant_values=float(attrs.get("value", 0.0)))


def _decompose(ctx):
    (x,) = ctx.operands
    shape = ctx.node_input_shape(0)
    widths = _widths(shape, ctx.node.attrs)
    if all(w == (0, 0) for w in widths):
        ctx.replace(x)
        return
    if any(w != (0, 0) for w in widths[:-2]):
        raise OpError(f"op {ctx.node.name!r}: constant_pad of dims other than the last two ({widths}) is not "
                      "supported yet")
    if len(shape) < 3:  # view (H, W) as (1, H, W)
        x = ctx.op("reshape", [x], {"shape": [1, *shape]})
        shape = (1, *shape)
    *lead, c, h, w = shape
    (top, bottom), (left, right) = widths[-2], widths[-1]
    ho, wo = h + top + bottom, w + left + right
    rows = ceil_tile(ho * wo)
    oy, ox = np.meshgrid(np.arange(h), np.arange(w), indexing="ij")
    picker = SparseMatrix.from_coo((rows, h * w), ((oy + top) * wo + ox + left).ravel(), (oy * w + ox).ravel())
    xt = ctx.op("transpose", [ctx.op("reshape", [x], {"shape": [*lead, c, h * w]})], {"dim0": -2, "dim1": -1})
    y = picker_matmul(ctx, picker, xt)
    value = float(ctx.node.attrs.get("value", 0.0))
    if value != 0.0:
        border = np.zeros((rows, 1), dtype=np.float32)
        border[:ho * wo, 0] = value
        border[((oy + top) * wo + ox + left).ravel(), 0] = 0.0
        y = ctx.op("add", [y, ctx.constant(border, "pad_value")])
    y = from_spatial_rows(ctx, y, lead, c, ho, wo, rows)
    if len(ctx.node.shape) < 3:
        y = ctx.op("reshape", [y], {"shape": list(ctx.node.shape)})
    ctx.replace(y)


register(OpDef("constant_pad", _shape, _eval, kind="nn", decompose=_decompose))
