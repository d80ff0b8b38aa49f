"""Average pooling: avg_pool2d (kernel, stride, padding, ceil_mode, count_include_pad, divisor_override, with
torch's semantics) and adaptive_avg_pool2d (output_size; output_size (1, 1) is the global average pool, the
mean over H and W).

Average pooling is linear, so it decomposes into ONE constant matmul over the activation kept as a
(spatial, channel) matrix, as convolutions are: row r of the averaging matrix holds 1/divisor at the input
pixels of output pixel r's window. A global pool of a convolution's output is a mean over the rows
(`reduce_avg` on dim -2, a matmul with a constant row of 1/(H*W) on device), as the legacy compiler's global
avg_pool2d was; of an NCHW tensor from elsewhere, means over W then H, which need no layout change.
"""
from __future__ import annotations

import numpy as np

from ..sparse import SparseMatrix
from .common import ceil_tile
from .conv import _pads, _pair, from_spatial_rows, out_size, picker_matmul, to_spatial_rows
from . import registry
from .registry import OpDef, OpError, register


def _avg_windows(n: int, k: int, s: int, pad_lo: int, pad_hi: int, ceil_mode: bool):
    """Per output index: (first, last+1) input index inside the image, and the padded window size."""
    out = out_size(n, k, s, pad_lo, pad_hi, ceil_mode)
    if out < 1:
        raise OpError(f"kernel {k} larger than padded input {n}")
    wins = []
    for o in range(out):
        start = o * s - pad_lo
        end = min(start + k, n + pad_hi)
        wins.append((max(start, 0), min(end, n), end - start))
    return wins


def _adaptive_windows(n: int, out: int):
    return [((i * n) // out, -(-((i + 1) * n) // out), None) for i in range(out)]


def _matrix(h: int, w: int, rows_win, cols_win, count_include_pad: bool = False, divisor=None) -> np.ndarray:
    """(Ho*Wo, H*W) averaging matrix."""
    a = np.zeros((len(rows_win) * len(cols_win), h * w), dtype=np.float64)
    for oy, (y0, y1, ysize) in enumerate(rows_win):
        for ox, (x0, x1, xsize) in enumerate(cols_win):
            if divisor:
                d = float(divisor)
            elif count_include_pad and ysize is not None:
                d = float(ysize * xsize)
            else:
                d = float((y1 - y0) * (x1 - x0))
            if y1 > y0 and x1 > x0:
                idx = (np.arange(y0, y1)[:, None] * w + np.arange(x0, x1)[None, :]).ravel()
                a[oy * len(cols_win) + ox, idx] = 1.0 / d
    return a


def avg_pool_matrix(h: int, w: int, attrs: dict) -> np.ndarray:
    kh, kw = _pair(attrs["kernel"])
    sh, sw = _pair(attrs.get("stride", attrs["kernel"]))
    pt, pl, pb, pr = _pads(attrs.get("padding", 0))
    if max(pt, pb) * 2 > kh or max(pl, pr) * 2 > kw:
        raise OpError(f"padding {(pt, pl, pb, pr)} must be at most half the kernel {(kh, kw)}")
    ceil_mode = bool(attrs.get("ceil_mode", False))
    return _matrix(h, w, _avg_windows(h, kh, sh, pt, pb, ceil_mode), _avg_windows(w, kw, sw, pl, pr, ceil_mode),
                   bool(attrs.get("count_include_pad", True)), attrs.get("divisor_override"))


def adaptive_pool_matrix(h: int, w: int, attrs: dict) -> np.ndarray:
    oh, ow = _pair(attrs["output_size"])
    if oh < 1 or ow < 1:
        raise OpError(f"output_size {(oh, ow)} must be positive")
    return _matrix(h, w, _adaptive_windows(h, oh), _adaptive_windows(w, ow))


def _shape_fn(out_hw):
    def shape(shapes, attrs):
        x = shapes[0]
        if len(x) < 3:
            raise OpError(f"expects an input (..., C, H, W), got {x}")
        return (*x[:-2], *out_hw(x[-2], x[-1], attrs))
    return shape


def _avg_out_hw(h, w, attrs):
    if _pair(attrs.get("dilation", 1)) != (1, 1):
        raise OpError(f"avg_pool2d with dilation {attrs['dilation']} is not supported")
    kh, kw = _pair(attrs["kernel"])
    sh, sw = _pair(attrs.get("stride", attrs["kernel"]))
    pt, pl, pb, pr = _pads(attrs.get("padding", 0))
    ceil_mode = bool(attrs.get("ceil_mode", False))
    ho, wo = out_size(h, kh, sh, pt, pb, ceil_mode), out_size(w, kw, sw, pl, pr, ceil_mode)
    if ho < 1 or wo < 1:
        raise OpError(f"kernel {(kh, kw)} larger than padded input {(h, w)}")
    return ho, wo


def _adaptive_out_hw(h, w, attrs):
    return _pair(attrs["output_size"])


def _eval_fn(matrix_fn, out_hw):
    def ev(values, attrs):
        x = values[0].astype(np.float64)
        *lead, h, w = x.shape
        ho, wo = out_hw(h, w, attrs)
        y = x.reshape(*lead, h * w) @ matrix_fn(h, w, attrs).T
        return y.reshape(*lead, ho, wo)
    return ev


def _in_conv_layout(graph, name: str) -> bool:
    """Whether `name` is computed, through elementwise ops, from a (spatial, channel) matrix viewed as NCHW (the
    transpose + reshape that decomposed convolutions and pools end with), so that layout TMs around it cancel."""
    stack, seen = [name], set()
    while stack:
        node = graph.node(stack.pop())
        if node.name in seen or node.kind != "op":
            continue
        seen.add(node.name)
        if node.op_type == "reshape":
            src = graph.node(graph.operands(node.name)[0].src)
            if src.kind == "op" and src.op_type == "transpose":
                return True
        elif registry.get(node.op_type).kind in ("unary", "binary"):
            stack.extend(o.src for o in graph.operands(node.name))
    return False


def _decompose_fn(matrix_fn, out_hw):
    def decompose(ctx):
        (x,) = ctx.operands
        *_, c, h, w = ctx.node_input_shape(0)
        ho, wo = out_hw(h, w, ctx.node.attrs)
        a = matrix_fn(h, w, ctx.node.attrs)
        if ho * wo == 1 and np.allclose(a, 1.0 / (h * w)):
            # global average pool: the mean of the rows of the (spatial, channel) view of a convolution's
            # output, or (an NCHW tensor from elsewhere) means over W then H, which need no layout change
            if _in_conv_layout(ctx.graph, x.src):
                xt, lead = to_spatial_rows(ctx, x, c, h, w)
                y = ctx.op("reduce_avg", [xt], {"dim": -2, "keep_dim": True})
                ctx.replace(ctx.op("reshape", [y], {"shape": [*lead, c, 1, 1]}))
            else:
                y = ctx.op("reduce_avg", [x], {"dim": -1, "keep_dim": True})
                ctx.replace(ctx.op("reduce_avg", [y], {"dim": -2, "keep_dim": True}))
            return
        xt, lead = to_spatial_rows(ctx, x, c, h, w)
        rows = ceil_tile(ho * wo)
        padded = np.zeros((rows, h * w), dtype=np.float32)
        padded[:ho * wo] = a
        y = picker_matmul(ctx, SparseMatrix.from_coo(padded.shape, *np.nonzero(padded), padded[np.nonzero(padded)]),
                          xt)
        ctx.replace(from_spatial_rows(ctx, y, lead, c, ho, wo, rows))
    return decompose


register(OpDef("avg_pool2d", _shape_fn(_avg_out_hw), _eval_fn(avg_pool_matrix, _avg_out_hw), kind="nn",
               decompose=_decompose_fn(avg_pool_matrix, _avg_out_hw)))
register(OpDef("adaptive_avg_pool2d", _shape_fn(_adaptive_out_hw), _eval_fn(adaptive_pool_matrix, _adaptive_out_hw),
               kind="nn", decompose=_decompose_fn(adaptive_pool_matrix, _adaptive_out_hw)))

