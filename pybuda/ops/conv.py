"""Convolution and pooling. Both decompose into picker matmuls (im2col by constant 0/1 matrices, kept sparse:
sparse matmuls), the way the legacy compiler lowered them: activations are kept as (spatial, channels)
matrices, each kernel tap is one block of rows of a picker matrix, and vslice/hstack TMs turn the stacked taps
into im2col columns.

Grouped convolution uses the equivalent dense weight (block diagonal over groups, built by ops on the weight
that consteval folds). Depthwise convolution (groups == channels) uses it too when the channel count is at most
the output rows; with more channels it multiplies the picked taps by per-channel weights and sums the taps with
a constant [I I ... I] sparse matmul, which is cheaper there.

`override_multi_op_fracture_factor(conv, n)` splits an im2col convolution by kernel rows into n groups, each its
own picker sparse matmul and weight matmul (on the matching rows of the weight matrix), summed by adds.

`enable_conv_prestride`: a strided conv over a model input runs as a stride-1 im2col conv over the input's
space-to-depth, which a host op (`conv2d_prestride_act`) makes, already in (positions, channels) rows, with the
kernel rearranged alike (`conv2d_prestride_weights`, folded in consteval)."""
from __future__ import annotations

import functools

import numpy as np
from numpy.lib.stride_tricks import sliding_window_view

from ..sparse import TILE, SparseMatrix
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


def out_size(n: int, k: int, s: int, pad_lo: int, pad_hi: int, ceil_mode: bool = False, d: int = 1) -> int:
    """Output length of a window op (torch's pooling_output_shape_pad_lr): with `ceil_mode` a last window that
    runs past the padded end still counts when it starts inside the input or its low padding."""
    out = (n + pad_lo + pad_hi - d * (k - 1) - 1 + (s - 1 if ceil_mode else 0)) // s + 1
    if ceil_mode and (out - 1) * s >= n + pad_lo:
        out -= 1
    return out


def _geometry(h: int, w: int, attrs: dict, kernel: tuple) -> tuple:
    sh, sw = _pair(attrs.get("stride", 1))
    dh, dw = _pair(attrs.get("dilation", 1))
    pt, pl, pb, pr = _pads(attrs.get("padding", 0))
    kh, kw = kernel
    ceil_mode = bool(attrs.get("ceil_mode", False))
    ho, wo = out_size(h, kh, sh, pt, pb, ceil_mode, dh), out_size(w, kw, sw, pl, pr, ceil_mode, dw)
    if ho < 1 or wo < 1:
        raise OpError(f"kernel {kernel} larger than padded input {(h, w)}")
    return ho, wo, (sh, sw), (dh, dw), (pt, pl, pb, pr)


def _windows(x: np.ndarray, kernel: tuple, attrs: dict, fill: float) -> np.ndarray:
    """(..., C, Ho, Wo, kh, kw) windows of x (..., C, H, W) with padding `fill` (and, in ceil mode, the last
    windows' overhang past the padded end filled alike)."""
    ho, wo, (sh, sw), (dh, dw), (pt, pl, pb, pr) = _geometry(x.shape[-2], x.shape[-1], attrs, kernel)
    kh, kw = kernel
    over_h = max(0, (ho - 1) * sh + (kh - 1) * dh + 1 - (x.shape[-2] + pt + pb))
    over_w = max(0, (wo - 1) * sw + (kw - 1) * dw + 1 - (x.shape[-1] + pl + pr))
    xp = np.pad(x, [(0, 0)] * (x.ndim - 2) + [(pt, pb + over_h), (pl, pr + over_w)], constant_values=fill)
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


def conv_picker(h: int, w: int, kernel: tuple, attrs: dict, clamp: bool) -> tuple[SparseMatrix, int, int, int]:
    """Stacked picker (taps * ceil32(Ho*Wo), H*W): block `tap` selects each output position's input pixel.
    Out-of-image taps select nothing (zero padding), or with `clamp` the nearest in-image pixel of the same
    window (exact for max pooling). Returns (picker, Ho, Wo, rows per tap)."""
    ho, wo, (sh, sw), (dh, dw), (pt, pl, _, _) = _geometry(h, w, attrs, kernel)
    kh, kw = kernel
    rows = ceil_tile(ho * wo)
    oy, ox = np.meshgrid(np.arange(ho), np.arange(wo), indexing="ij")
    out_idx = (oy * wo + ox).ravel()
    picker_rows, picker_cols = [], []
    for i in range(kh):
        for j in range(kw):
            iy, ix = (oy * sh - pt + i * dh).ravel(), (ox * sw - pl + j * dw).ravel()
            if clamp:
                iy_lo, ix_lo = oy.ravel() * sh - pt, ox.ravel() * sw - pl
                iy = np.clip(iy, np.maximum(iy_lo, 0), np.minimum(iy_lo + (kh - 1) * dh, h - 1))
                ix = np.clip(ix, np.maximum(ix_lo, 0), np.minimum(ix_lo + (kw - 1) * dw, w - 1))
            ok = (iy >= 0) & (iy < h) & (ix >= 0) & (ix < w)
            picker_rows.append((i * kw + j) * rows + out_idx[ok])
            picker_cols.append((iy * w + ix)[ok])
    picker = SparseMatrix.from_coo((kh * kw * rows, h * w), np.concatenate(picker_rows), np.concatenate(picker_cols))
    return picker, ho, wo, rows


def picker_matmul(ctx, picker: SparseMatrix, x):
    """picker @ x, a sparse matmul (the backend's identity matmul): pickers have one non-zero per row, so
    their dense form grows with the square of the pixel count."""
    return ctx.op("sparse_matmul", [x], {"sparse": picker})


def to_spatial_rows(ctx, x, c: int, h: int, w: int):
    """(..., C, H, W) -> (..., H*W, C): spatial positions as rows, channels as columns. Returns (value, lead dims)."""
    lead = ctx.node_input_shape(0)[:-3]
    flat = ctx.op("reshape", [x], {"shape": [*lead, c, h * w]})
    return ctx.op("transpose", [flat], {"dim0": -2, "dim1": -1}), lead


def from_spatial_rows(ctx, y, lead, c: int, ho: int, wo: int, rows: int):
    """(..., rows, C) -> (..., C, Ho, Wo), dropping the tile padding rows."""
    if rows != ho * wo:
        y = ctx.op("narrow", [y], {"dim": -2, "start": 0, "length": ho * wo})
    yt = ctx.op("transpose", [y], {"dim0": -2, "dim1": -1})
    return ctx.op("reshape", [yt], {"shape": [*lead, c, ho, wo]})


def _is_identity_picker(picker: SparseMatrix, hw: int, taps: int, ho: int, wo: int) -> bool:
    """A 1x1, stride-1, unpadded window: output pixel p reads input pixel p."""
    return (taps == 1 and ho * wo == hw and picker.nnz == hw and np.array_equal(picker.rows, np.arange(hw))
            and np.array_equal(picker.cols, np.arange(hw)))


def _dense_grouped_weight(ctx, wgt, groups: int, cout: int, cin_g: int, kh: int, kw: int):
    """Grouped weight (Cout, Cin/g, kh, kw) -> the equivalent dense (Cout, Cin, kh, kw) (block diagonal over
    groups), built by ops on the weight so consteval folds it: repeat along Cin, then zero other groups."""
    cin = cin_g * groups
    w5 = ctx.op("reshape", [wgt], {"shape": [cout, 1, cin_g, kh, kw]})
    rep = ctx.op("broadcast", [w5], {"shape": [cout, groups, cin_g, kh, kw]})
    dense = ctx.op("reshape", [rep], {"shape": [cout, cin, kh, kw]})
    same_group = (np.arange(cout)[:, None] // (cout // groups)) == (np.arange(cin)[None, :] // cin_g)
    mask = ctx.constant(same_group.astype(np.float32).reshape(cout, cin, 1, 1), "group_mask")
    return ctx.op("multiply", [dense, mask])


def _im2col_conv(ctx, xt, wgt, lead, picker, row_groups: list[range], cin: int, cout: int, hw: int, ho: int,
                 wo: int, rows: int, kernel: tuple | None = None):
    """Dense convolution: per group of kernel rows (one group: the whole kernel), the im2col columns of its taps
    times its rows of the weight matrix; the groups' products summed. `kernel`: (kh, kw) of `wgt` when it is not
    the conv's own weight. Returns (y (..., rows, Cout), rows)."""
    kh, kw = kernel or ctx.node_input_shape(1)[2:]
    taps = kh * kw
    # weight (Cout, Cin, kh, kw) -> rows ordered (tap, cin [padded]), columns Cout
    wt = ctx.op("permute", [wgt], {"axes": [2, 3, 1, 0]})
    cin_p = ceil_tile(cin) if taps > 1 else cin  # with several taps, each tap's channels are one tile-aligned block
    if cin_p != cin:
        xt = ctx.op("pad", [xt], {"shape": [*lead, hw, cin_p]})
        wt = ctx.op("pad", [wt], {"shape": [kh, kw, cin_p, cout]})
    if _is_identity_picker(picker, hw, taps, ho, wo):
        picker, rows = None, hw
    cols = [_im2col_columns(ctx, xt, picker, kernel_rows, kw, rows) for kernel_rows in row_groups]
    wt = ctx.op("reshape", [wt], {"shape": [taps * cin_p, cout]})  # one matrix: a trained weight stays 2-D
    parts = [ctx.op("matmul", [c, _weight_rows(ctx, wt, kernel_rows, kh, kw * cin_p)])
             for c, kernel_rows in zip(cols, row_groups)]
    return functools.reduce(lambda a, b: ctx.op("add", [a, b]), parts), rows


def _im2col_columns(ctx, xt, picker: SparseMatrix | None, kernel_rows: range, kw: int, rows: int):
    """The taps of `kernel_rows` side by side: their blocks of the stacked picker (None: the identity) times xt,
    vsliced per tap and hstacked."""
    taps = len(kernel_rows) * kw
    cols = xt if picker is None else \
        picker_matmul(ctx, picker.row_block(kernel_rows.start * kw * rows, kernel_rows.stop * kw * rows), xt)
    if taps > 1:
        cols = ctx.op("hstack", [ctx.op("vslice", [cols], {"factor": taps})], {"factor": taps})
    return cols


def _weight_rows(ctx, wmat, kernel_rows: range, kh: int, per_kernel_row: int):
    """The rows of the weight matrix `wmat` (kh * per_kernel_row, Cout) that belong to `kernel_rows`."""
    if len(kernel_rows) == kh:
        return wmat
    return ctx.op("narrow", [wmat], {"dim": 0, "start": kernel_rows.start * per_kernel_row,
                                     "length": len(kernel_rows) * per_kernel_row})


def _depthwise_tap_sum(ctx, xt, wgt, picker, c: int, taps: int, rows: int):
    """Depthwise convolution (groups == Cin == Cout): one stacked picker matmul selects every tap's pixels,
    an elementwise multiply applies each tap's per-channel weights (channels untouched), and a constant
    [I I ... I] matmul sums the taps. Costs taps*rows*rows*C MACs for the sum instead of the dense
    formulation's taps*rows*C*C."""
    sel = picker_matmul(ctx, picker, xt)                         # (..., taps*rows, C)
    w = ctx.op("reshape", [wgt], {"shape": [c, taps]})
    w = ctx.op("reshape", [ctx.op("transpose", [w], {"dim0": 0, "dim1": 1})], {"shape": [taps, 1, c]})
    w = ctx.op("broadcast", [w], {"shape": [taps, rows, c]})
    w = ctx.op("reshape", [w], {"shape": [taps * rows, c]})                  # row block t: tap t's weights
    prod = ctx.op("multiply", [sel, w])
    diag = np.tile(np.arange(rows), taps)
    summer = SparseMatrix.from_coo((rows, taps * rows), diag, np.arange(taps * rows))  # [I I ... I]
    return picker_matmul(ctx, summer, prod)


def _is_patchify(ctx, h: int, w: int, kh: int, kw: int) -> bool:
    """A conv over a graph input whose kernels tile the image (stride == kernel, no padding/dilation/groups):
    im2col is then a pure permutation of the input, done on the host (ViT patch embeddings)."""
    a = ctx.node.attrs
    return (ctx.graph.node(ctx.operands[0].src).kind == "input" and (kh, kw) != (1, 1)
            and _pair(a.get("stride", 1)) == (kh, kw) and _pads(a.get("padding", 0)) == (0, 0, 0, 0)
            and _pair(a.get("dilation", 1)) == (1, 1) and int(a.get("groups", 1)) == 1
            and h % kh == 0 and w % kw == 0)


def _patchify_conv(ctx, x, wgt, cin: int, h: int, w: int, cout: int, kh: int, kw: int):
    """(.., C, H, W) -> patches (.., Ho*Wo, C*kh*kw) by reshape/permute (hoisted to the host), then one matmul."""
    lead = ctx.node_input_shape(0)[:-3]
    ho, wo = h // kh, w // kw
    n = len(lead)
    split = ctx.op("reshape", [x], {"shape": [*lead, cin, ho, kh, wo, kw]})
    axes = list(range(n)) + [n + 1, n + 3, n, n + 2, n + 4]
    patches = ctx.op("reshape", [ctx.op("permute", [split], {"axes": axes})],
                     {"shape": [*lead, ho * wo, cin * kh * kw]})
    wmat = ctx.op("permute", [ctx.op("reshape", [wgt], {"shape": [cout, cin * kh * kw]})], {"axes": [1, 0]})
    return ctx.op("matmul", [patches, wmat]), lead, ho, wo


def _prestride_attrs(ctx, h: int, w: int, kh: int, kw: int) -> dict | None:
    """`enable_conv_prestride`: for a strided conv over a graph input (no dilation or groups, a kernel at least the
    stride, a weight that is not trained), the host's space-to-depth of the input that makes it a stride-1 conv:
    the stride, the low padding, the padded (or cropped) extent (whole strides) and the rows of its (positions,
    channels) layout; else None."""
    a = ctx.node.attrs
    stride = _pair(a.get("stride", 1))
    if (ctx.config is None or not ctx.config.enable_conv_prestride or stride == (1, 1)
            or ctx.graph.node(ctx.operands[0].src).kind != "input" or ctx.operands[0].tms
            or _pair(a.get("dilation", 1)) != (1, 1) or int(a.get("groups", 1)) != 1
            or kh < stride[0] or kw < stride[1] or ctx.graph.node(ctx.operands[1].src).mutable):
        return None
    ho, wo, _, _, (pt, pl, _, _) = _geometry(h, w, a, (kh, kw))
    khp, kwp = -(-kh // stride[0]), -(-kw // stride[1])
    pixels = (ho - 1 + khp) * (wo - 1 + kwp)
    return {"stride": list(stride), "top": pt, "left": pl,
            "rows": (ho - 1 + khp) * stride[0], "cols": (wo - 1 + kwp) * stride[1],
            "positions": TILE * _blockable_tiles(ceil_tile(pixels) // TILE)}


def _blockable_tiles(tiles: int) -> int:
    """The fewest tiles, at least `tiles`, that split into blocks of 16 to 64 tiles (or one block of all): the
    picker's inner dimension, so that its u_kt is not stuck at 1 on a prime count (821 tiles of YOLOv5's stem)."""
    count = tiles
    while count > 64 and not any(count % d == 0 for d in range(16, 65)):
        count += 1
    return count


def _space_to_depth(x: np.ndarray, stride: tuple) -> np.ndarray:
    """(..., C, H, W) with H, W whole strides -> (..., C*sh*sw, H/sh, W/sw): channel c*sh*sw + a*sw + b holds
    pixels (a + sh*i, b + sw*j)."""
    (sh, sw), (*lead, c, h, w) = stride, x.shape
    x = x.reshape(*lead, c, h // sh, sh, w // sw, sw)
    n = len(lead)
    x = x.transpose(*range(n), n, n + 2, n + 4, n + 1, n + 3)
    return x.reshape(*lead, c * sh * sw, h // sh, w // sw)


def _prestride_act_shape(shapes, attrs):
    (*lead, c, _, _), (sh, sw) = shapes[0], attrs["stride"]
    return (*lead, attrs["positions"], c * sh * sw)


def _prestride_act_eval(values, attrs):
    """The input placed at (top, left) in a zero image of (rows, cols) (cropped where it runs past), space-to-depth
    by the stride, as (positions, channels) rows (zero rows after the last position up to `positions`)."""
    x = values[0]
    *lead, c, h, w = x.shape
    top, left, rows, cols = attrs["top"], attrs["left"], attrs["rows"], attrs["cols"]
    image = np.zeros((*lead, c, rows, cols), dtype=x.dtype)
    kept_h, kept_w = min(h, rows - top), min(w, cols - left)
    image[..., top:top + kept_h, left:left + kept_w] = x[..., :kept_h, :kept_w]
    deep = _space_to_depth(image, tuple(attrs["stride"]))
    flat = np.swapaxes(deep.reshape(*deep.shape[:-2], -1), -1, -2)
    out = np.zeros((*lead, attrs["positions"], flat.shape[-1]), dtype=x.dtype)
    out[..., :flat.shape[-2], :] = flat
    return out


def _prestride_weights_shape(shapes, attrs):
    (cout, cin, kh, kw), (sh, sw) = shapes[0], attrs["stride"]
    return (cout, cin * sh * sw, -(-kh // sh), -(-kw // sw))


def _prestride_weights_eval(values, attrs):
    """The kernel zero-padded to whole strides, then space-to-depth like the input."""
    wgt = values[0]
    cout, cin, kh, kw = wgt.shape
    sh, sw = attrs["stride"]
    padded = np.zeros((cout, cin, -(-kh // sh) * sh, -(-kw // sw) * sw), dtype=wgt.dtype)
    padded[..., :kh, :kw] = wgt
    return _space_to_depth(padded, (sh, sw))


# No device lowering: the activation's runs on the host ahead of the device (`cpu_fallback.ahead_of_device`), the
# weights' folds in consteval (the legacy tilizer's conv prestride).
register(OpDef("conv2d_prestride_act", _prestride_act_shape, _prestride_act_eval, kind="tm"))
register(OpDef("conv2d_prestride_weights", _prestride_weights_shape, _prestride_weights_eval, kind="tm"))


def _prestrided_conv(ctx, attrs: dict):
    """The conv as a stride-1, unpadded im2col conv over the prestrided input, already in (positions, channels)
    rows, and the prestrided weights. Returns (y (..., rows, Cout), lead dims, Ho, Wo, rows)."""
    x, wgt = ctx.operands[:2]
    *lead, cin, _, _ = ctx.node_input_shape(0)
    cout, _, kh, kw = ctx.node_input_shape(1)
    (sh, sw), positions = attrs["stride"], attrs["positions"]
    h, w = attrs["rows"] // sh, attrs["cols"] // sw
    khp, kwp = -(-kh // sh), -(-kw // sw)
    picker, ho, wo, rows = conv_picker(h, w, (khp, kwp), {}, clamp=False)
    picker = picker.resized((picker.shape[0], positions))      # zero columns for the padding positions
    xt = ctx.op("conv2d_prestride_act", [x], attrs)
    wgt = ctx.op("conv2d_prestride_weights", [wgt], attrs)
    y, rows = _im2col_conv(ctx, xt, wgt, lead, picker, [range(khp)], cin * sh * sw, cout, positions, ho, wo, rows,
                           kernel=(khp, kwp))
    return y, lead, ho, wo, rows


def _fracture_overrides(ctx) -> dict[str, int]:
    """conv name -> `override_multi_op_fracture_factor`."""
    return ctx.config.conv_multi_op_fracture_factor_override if ctx.config is not None else {}


def _unfractured(ctx, factor: int, why: str) -> None:
    """OpError unless `factor` leaves the conv whole (a conv path with no kernel rows to split: `why`)."""
    if factor > 1:
        raise OpError(f"conv2d {ctx.node.name!r}: override_multi_op_fracture_factor {factor} cannot apply, {why}; "
                      "legal: 1")


def _kernel_row_groups(ctx, kh: int, factor: int) -> list[range]:
    """The kernel rows split into `factor` contiguous groups, as even as possible (earlier groups larger)."""
    if factor > kh:
        legal = "1" if kh == 1 else f"1..{kh}"
        raise OpError(f"conv2d {ctx.node.name!r}: override_multi_op_fracture_factor {factor} exceeds its kernel "
                      f"rows, it splits them into that many ops; legal: {legal} for a {kh}-row kernel")
    return [range(int(g[0]), int(g[-1]) + 1) for g in np.array_split(np.arange(kh), factor)]


def _picker_conv(ctx, x, wgt, factor: int):
    """A conv by picker matmuls: the depthwise tap sum or im2col (its kernel rows split into `factor` ops).
    Returns (y (..., rows, Cout), lead dims, Ho, Wo, rows)."""
    *_, cin, h, w = ctx.node_input_shape(0)
    cout, cin_g, kh, kw = ctx.node_input_shape(1)
    groups = int(ctx.node.attrs.get("groups", 1))
    xt, lead = to_spatial_rows(ctx, x, cin, h, w)
    picker, ho, wo, rows = conv_picker(h, w, (kh, kw), ctx.node.attrs, clamp=False)
    taps = kh * kw
    depthwise = groups > 1 and groups == cin == cout
    if depthwise and taps > 1 and cout > rows:
        _unfractured(ctx, factor, "it runs as a depthwise tap sum, with no weight matmul to split")
        return _depthwise_tap_sum(ctx, xt, wgt, picker, cout, taps, rows), lead, ho, wo, rows
    row_groups = _kernel_row_groups(ctx, kh, factor)
    if groups > 1:
        if ctx.graph.node(wgt.src).mutable:
            raise OpError(f"conv2d {ctx.node.name!r}: its weight {wgt.src!r} is trained, but a grouped "
                          f"convolution (groups {groups}) runs as a dense block-diagonal weight built from it, "
                          "which the device cannot hold in its matrix layout; training grouped and depthwise "
                          "convolution weights is not supported yet: freeze them (requires_grad=False)")
        wgt = _dense_grouped_weight(ctx, wgt, groups, cout, cin_g, kh, kw)
    y, rows = _im2col_conv(ctx, xt, wgt, lead, picker, row_groups, cin, cout, h * w, ho, wo, rows)
    return y, lead, ho, wo, rows


def _decompose_conv(ctx):
    x, wgt, *bias = ctx.operands
    *_, cin, h, w = ctx.node_input_shape(0)
    cout, _, kh, kw = ctx.node_input_shape(1)
    overrides = _fracture_overrides(ctx)
    factor = overrides.get(ctx.node.name, 1)
    prestride = None if _is_patchify(ctx, h, w, kh, kw) else _prestride_attrs(ctx, h, w, kh, kw)
    if prestride is not None and factor == 1:
        y, lead, ho, wo, rows = _prestrided_conv(ctx, prestride)
    elif _is_patchify(ctx, h, w, kh, kw):
        _unfractured(ctx, factor, "it runs as one matmul over patches made on the host (stride == kernel)")
        y, lead, ho, wo = _patchify_conv(ctx, x, wgt, cin, h, w, cout, kh, kw)
        rows = ho * wo
    else:
        y, lead, ho, wo, rows = _picker_conv(ctx, x, wgt, factor)
    if bias:
        y = ctx.op("add", [y, bias[0]])
    ctx.replace(from_spatial_rows(ctx, y, lead, cout, ho, wo, rows))


register(OpDef("conv2d", _conv_shape, _conv_eval, arity=(2, 3), kind="nn", decompose=_decompose_conv))


# ---- max_pool2d -----------------------------------------------------------------------------------

def _pool_shape(shapes, attrs):
    x = shapes[0]
    ho, wo, *_ = _geometry(x[-2], x[-1], attrs, _pair(attrs["kernel"]))
    return (*x[:-2], ho, wo)


def _pool_eval(values, attrs):
    win = _windows(values[0], _pair(attrs["kernel"]), attrs, -np.inf)
    return win.max(axis=(-2, -1))


def _decompose_max_pool(ctx):
    (x,) = ctx.operands
    *_, c, h, w = ctx.node_input_shape(0)
    kernel = _pair(ctx.node.attrs["kernel"])
    xt, lead = to_spatial_rows(ctx, x, c, h, w)
    picker, ho, wo, rows = conv_picker(h, w, kernel, ctx.node.attrs, clamp=True)
    best = None
    for tap in range(kernel[0] * kernel[1]):
        sel = picker_matmul(ctx, picker.row_block(tap * rows, (tap + 1) * rows), xt)
        best = sel if best is None else ctx.op("maximum", [best, sel])
    ctx.replace(from_spatial_rows(ctx, best, lead, c, ho, wo, rows))


register(OpDef("max_pool2d", _pool_shape, _pool_eval, kind="nn", decompose=_decompose_max_pool))
