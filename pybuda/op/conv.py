"""Spatial ops of `pybuda.op` with the legacy signatures and defaults (tenstorrent/tt-buda `op/convolution.py`,
`op/pooling.py`, `op/resize.py`, `op/tm.py`'s Pad, `op/nn.py`'s Batchnorm): NCHW activations (NHWC with
`channel_last`), padding "same" by default, as a number, a pair (height, width) or a list [left, right, top,
bottom]; the 3-D ops (Conv3d, MaxPool3d, Resize3d) take NCDHW activations (NDHWC with `channel_last`) and padding
as a number, a triple (depth, height, width) or a list [left, right, top, bottom, front, back]."""
from __future__ import annotations

import numpy as np

from ..errors import UserInputError
from ..module import Constant, Tensor, traced_op as _op
from .eltwise import part


def _pair(value) -> tuple[int, int]:
    return (int(value), int(value)) if isinstance(value, int) else tuple(int(v) for v in value)


def _padding(name: str, padding, kernel: tuple[int, int], even_kernel_trims: bool) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) of a legacy padding: "same" is half the kernel on each side (a convolution's even
    kernel one less on the right and bottom), a number on every side, a pair (height, width), or [left, right, top,
    bottom]."""
    kh, kw = kernel
    if padding == "same":
        right, bottom = kw // 2, kh // 2
        if even_kernel_trims:
            right, bottom = right - (kw % 2 == 0), bottom - (kh % 2 == 0)
        return kh // 2, kw // 2, bottom, right
    if isinstance(padding, int):
        return (padding,) * 4
    if isinstance(padding, (tuple, list)) and len(padding) == 2:
        return padding[0], padding[1], padding[0], padding[1]
    if isinstance(padding, (tuple, list)) and len(padding) == 4:
        left, right, top, bottom = padding
        return top, left, bottom, right
    raise UserInputError(f"op {name!r}: padding {padding!r}; legal: 'same', a number, (height, width) or "
                         "[left, right, top, bottom]")


def _channels_first(name: str, activations, channel_last: bool):
    """NHWC activations as NCHW (two transposes), else as they are."""
    if not channel_last:
        return activations
    return _op("transpose", part(name, "nchw"), [_op("transpose", part(name, "nhcw"), [activations],
                                                     {"dim0": -2, "dim1": -1})], {"dim0": -3, "dim1": -2})


def _channels_back(name: str, result, channel_last: bool):
    """An NCHW result back in NHWC when the activations came so."""
    if not channel_last:
        return result
    return _op("transpose", part(name, "nhwc"), [_op("transpose", part(name, "nhcw_out"), [result],
                                                     {"dim0": -3, "dim1": -2})], {"dim0": -2, "dim1": -1})


def Conv2d(name: str, activations, weights, bias=None, stride=1, padding="same", dilation=1, groups: int = 1,
           channel_last: bool = False) -> Tensor:
    """2-D convolution with OIHW weights (and a bias per output channel)."""
    x = _channels_first(name, activations, channel_last)
    operands = [x, weights] + ([bias] if bias is not None else [])
    pads = _padding(name, padding, tuple(weights.shape[2:4]), even_kernel_trims=True)
    y = _op("conv2d", name, operands, {"stride": _pair(stride), "padding": pads, "dilation": _pair(dilation),
                                        "groups": groups})
    return _channels_back(name, y, channel_last)


def Conv2dTranspose(name: str, activations, weights, bias=None, stride=1, padding="same", dilation=1,
                    groups: int = 1, channel_last: bool = False, output_padding=0) -> Tensor:
    """2-D transposed convolution with (in, out / groups, kh, kw) weights (and a bias per output channel); "same"
    padding is half the kernel on each side."""
    x = _channels_first(name, activations, channel_last)
    operands = [x, weights] + ([bias] if bias is not None else [])
    pads = _padding(name, padding, tuple(weights.shape[2:4]), even_kernel_trims=False)
    y = _op("conv_transpose2d", name, operands, {"stride": _pair(stride), "padding": pads, "dilation": _pair(dilation),
                                                  "groups": groups, "output_padding": _pair(output_padding)})
    return _channels_back(name, y, channel_last)


def _as_2d(name: str, fn, activations, **kwargs) -> Tensor:
    """A 1-D window op on (N, C, W) as the 2-D one on (N, C, 1, W)."""
    *lead, w = activations.shape
    wide = _op("reshape", part(name, "2d"), [activations], {"shape": [*lead, 1, w]})
    y = fn(part(name, "pool2d"), wide, **kwargs)
    return _op("reshape", name, [y], {"shape": [*y.shape[:-2], y.shape[-1]]})


def MaxPool1d(name: str, activations, kernel_size: int, stride: int = 1, padding: int = 0, dilation: int = 1,
              ceil_mode: bool = False, return_indices: bool = False) -> Tensor:
    """1-D max pooling of (N, C, W) activations."""
    return _as_2d(name, MaxPool2d, activations, kernel_size=(1, kernel_size), stride=(1, stride),
                  padding=[padding, padding, 0, 0], dilation=(1, dilation), ceil_mode=ceil_mode,
                  return_indices=return_indices)


def AvgPool1d(name: str, activations, kernel_size: int, stride: int = 1, padding="same", ceil_mode: bool = False,
              count_include_pad: bool = True) -> Tensor:
    """1-D average pooling of (N, C, W) activations ("same": half the kernel on each side)."""
    pad = kernel_size // 2 if padding == "same" else padding
    return _as_2d(name, AvgPool2d, activations, kernel_size=(1, kernel_size), stride=(1, stride),
                  padding=[pad, pad, 0, 0], ceil_mode=ceil_mode, count_include_pad=count_include_pad)


def MaxPool2d(name: str, activations, kernel_size, stride=1, padding="same", dilation=1, ceil_mode: bool = False,
              return_indices: bool = False, max_pool_add_sub_surround: bool = False,
              max_pool_add_sub_surround_value: float = 1.0, channel_last: bool = False) -> Tensor:
    """2-D max pooling (padding takes no part in the maximum)."""
    if return_indices or max_pool_add_sub_surround:
        raise UserInputError(f"MaxPool2d {name!r}: return_indices and max_pool_add_sub_surround are not supported "
                             "(legacy internals); legal: False")
    kernel = _pair(kernel_size)
    x = _channels_first(name, activations, channel_last)
    y = _op("max_pool2d", name, [x], {"kernel": kernel, "stride": _pair(stride), "dilation": _pair(dilation),
                                      "padding": _padding(name, padding, kernel, even_kernel_trims=False),
                                      "ceil_mode": ceil_mode})
    return _channels_back(name, y, channel_last)


def AvgPool2d(name: str, activations, kernel_size, stride=1, padding="same", ceil_mode: bool = False,
              count_include_pad: bool = True, divisor_override: float | None = None,
              channel_last: bool = False) -> Tensor:
    """2-D average pooling (torch's semantics for `ceil_mode`, `count_include_pad` and `divisor_override`)."""
    kernel = _pair(kernel_size)
    x = _channels_first(name, activations, channel_last)
    y = _op("avg_pool2d", name, [x], {"kernel": kernel, "stride": _pair(stride),
                                      "padding": _padding(name, padding, kernel, even_kernel_trims=False),
                                      "ceil_mode": ceil_mode, "count_include_pad": count_include_pad,
                                      "divisor_override": divisor_override})
    return _channels_back(name, y, channel_last)


def Pad(name: str, operandA, pad, mode: str = "constant", channel_last: bool = False) -> Tensor:
    """Pad the last two spatial dims: `pad` is (left, right) or (left, right, top, bottom); mode "constant"
    (zeros), "replicate" (the edge value) or "reflect" (mirrored, without the edge)."""
    if len(pad) not in (2, 4) or mode not in ("constant", "replicate", "reflect"):
        raise UserInputError(f"Pad {name!r}: pad={pad!r}, mode={mode!r}; legal: (left, right) or (left, right, top, "
                             "bottom), mode constant, replicate or reflect")
    x = _channels_first(name, operandA, channel_last)
    widths = {-1: tuple(pad[:2]), -2: tuple(pad[2:]) if len(pad) == 4 else (0, 0)}
    if mode == "constant":
        pad_width = [0] * (2 * len(x.shape))
        for dim, (lo, hi) in widths.items():
            pad_width[2 * (len(x.shape) + dim):2 * (len(x.shape) + dim) + 2] = [lo, hi]
        y = _op("constant_pad", name, [x], {"pad_width": pad_width, "value": 0.0})
    else:                       # the padded positions read these input positions (a constant index: a picker)
        steps = [(dim, widths[dim]) for dim in (-2, -1) if any(widths[dim])]
        y = x
        for k, (dim, (lo, hi)) in enumerate(steps):
            index = np.pad(np.arange(x.shape[dim]), (lo, hi), mode="edge" if mode == "replicate" else "reflect")
            y = _op("take", name if k == len(steps) - 1 else part(name, "rows"),
                    [y, Constant(index.astype(np.float32))], {"axis": dim})
    return _channels_back(name, y, channel_last)


def _resize_attrs(where: str, method: str, linear: str, align_corners: bool) -> dict:
    """The resize registry attrs of legacy `method`: "nearest_neighbor" (torch's nearest) or `linear` (bilinear,
    trilinear; `align_corners` as torch's); UserInputError naming `where` otherwise."""
    if method == "nearest_neighbor":
        return {"method": "nearest_neighbor", "coordinate_transformation_mode": "asymmetric",
                "rounding_method": "floor"}
    if method == linear:
        return {"method": "linear", "rounding_method": "",
                "coordinate_transformation_mode": "align_corners" if align_corners else "half_pixel"}
    raise UserInputError(f"{where}: method {method!r}; legal: nearest_neighbor, {linear}")


def Resize2d(name: str, operandA, sizes, method: str = "nearest_neighbor", align_corners: bool = False,
             extrapolation_value: float = 0, channel_last: bool = False) -> Tensor:
    """Resize the last two spatial dims to `sizes` (height, width): "nearest_neighbor" (as torch's nearest) or
    "bilinear" (`align_corners` as torch's)."""
    attrs = _resize_attrs(f"Resize2d {name!r}", method, "bilinear", align_corners)
    x = _channels_first(name, operandA, channel_last)
    y = _op("resize2d", name, [x], {"size": [int(s) for s in sizes], **attrs})
    return _channels_back(name, y, channel_last)


def _triple(name: str, what: str, value) -> tuple[int, int, int]:
    """A number for all three of depth, height and width, or a (depth, height, width) triple."""
    if isinstance(value, int):
        return (value,) * 3
    if isinstance(value, (tuple, list)) and len(value) == 3:
        return tuple(int(v) for v in value)
    raise UserInputError(f"op {name!r}: {what} {value!r}; legal: a number or (depth, height, width)")


def _padding3d(name: str, padding, kernel: tuple[int, int, int], even_kernel_trims: bool) -> tuple[int, ...]:
    """(front, top, left, back, bottom, right) of a legacy 3-D padding: "same" (as 2-D, and likewise in depth), a
    number on every side, a triple (depth, height, width), or [left, right, top, bottom, front, back]."""
    if padding == "same" or isinstance(padding, int):
        front, back = _padding(name, padding, kernel[:2], even_kernel_trims)[::2]
        top, left, bottom, right = _padding(name, padding, kernel[1:], even_kernel_trims)
    elif isinstance(padding, (tuple, list)) and len(padding) == 3:
        front = back = int(padding[0])
        top, left, bottom, right = _padding(name, tuple(padding[1:]), kernel[1:], even_kernel_trims)
    elif isinstance(padding, (tuple, list)) and len(padding) == 6:
        front, back = int(padding[4]), int(padding[5])
        top, left, bottom, right = _padding(name, list(padding[:4]), kernel[1:], even_kernel_trims)
    else:
        raise UserInputError(f"op {name!r}: padding {padding!r}; legal: 'same', a number, (depth, height, width) or "
                             "[left, right, top, bottom, front, back]")
    return front, top, left, back, bottom, right


def _channels_first3d(name: str, activations, channel_last: bool):
    """(N, D, H, W, C) activations as (N, C, D, H, W), else as they are."""
    if not channel_last:
        return activations
    rank = len(activations.shape)
    axes = [*range(rank - 4), rank - 1, *range(rank - 4, rank - 1)]
    return _op("permute", part(name, "ncdhw"), [activations], {"axes": axes})


def _channels_back3d(name: str, result, channel_last: bool):
    """An (N, C, D, H, W) result back in (N, D, H, W, C) when the activations came so."""
    if not channel_last:
        return result
    rank = len(result.shape)
    axes = [*range(rank - 4), *range(rank - 3, rank), rank - 4]
    return _op("permute", part(name, "ndhwc"), [result], {"axes": axes})


def _volume(name: str, activations, channel_last: bool):
    """The activations as (N, C, D, H, W) (UserInputError naming the op unless 5-D)."""
    if len(activations.shape) != 5:
        layout = "(N, D, H, W, C)" if channel_last else "(N, C, D, H, W)"
        raise UserInputError(f"op {name!r}: activations of shape {tuple(activations.shape)}; legal: 5-D {layout}")
    return _channels_first3d(name, activations, channel_last)


def Conv3d(name: str, activations, weights, bias=None, stride=1, padding="same", dilation=1, groups: int = 1,
           channel_last: bool = False) -> Tensor:
    """3-D convolution of (N, C, D, H, W) activations ((N, D, H, W, C) with `channel_last`) with (Cout, Cin / groups,
    kD, kH, kW) weights (and a bias per output channel)."""
    x = _volume(name, activations, channel_last)
    if len(weights.shape) != 5:
        raise UserInputError(f"Conv3d {name!r}: weights of shape {tuple(weights.shape)}; legal: (Cout, Cin / groups, "
                             "kD, kH, kW)")
    operands = [x, weights] + ([bias] if bias is not None else [])
    pads = _padding3d(name, padding, tuple(weights.shape[2:5]), even_kernel_trims=True)
    y = _op("conv3d", name, operands, {"stride": _triple(name, "stride", stride), "padding": pads,
                                        "dilation": _triple(name, "dilation", dilation), "groups": groups})
    return _channels_back3d(name, y, channel_last)


def MaxPool3d(name: str, activations, kernel_size, stride=1, padding="same", dilation=1, ceil_mode: bool = False,
              return_indices: bool = False, max_pool_add_sub_surround: bool = False,
              max_pool_add_sub_surround_value: float = 1.0, channel_last: bool = False) -> Tensor:
    """3-D max pooling of (N, C, D, H, W) activations ((N, D, H, W, C) with `channel_last`); padding takes no part
    in the maximum."""
    if return_indices or max_pool_add_sub_surround:
        raise UserInputError(f"MaxPool3d {name!r}: return_indices and max_pool_add_sub_surround are not supported "
                             "(legacy internals); legal: False")
    kernel = _triple(name, "kernel_size", kernel_size)
    x = _volume(name, activations, channel_last)
    y = _op("max_pool3d", name, [x], {"kernel": kernel, "stride": _triple(name, "stride", stride),
                                      "dilation": _triple(name, "dilation", dilation), "ceil_mode": ceil_mode,
                                      "padding": _padding3d(name, padding, kernel, even_kernel_trims=False)})
    return _channels_back3d(name, y, channel_last)


def Resize3d(name: str, operandA, sizes, method: str = "nearest_neighbor", align_corners: bool = False,
             extrapolation_value: float = 0, channel_last: bool = False) -> Tensor:
    """Resize the last three spatial dims of (N, C, D, H, W) activations ((N, D, H, W, C) with `channel_last`) to
    `sizes` (depth, height, width): "nearest_neighbor" (as torch's nearest, legacy's only method) or "trilinear"
    (`align_corners` as torch's)."""
    attrs = _resize_attrs(f"Resize3d {name!r}", method, "trilinear", align_corners)
    if len(sizes) != 3:
        raise UserInputError(f"Resize3d {name!r}: sizes {sizes!r}; legal: (depth, height, width)")
    x = _volume(name, operandA, channel_last)
    y = _op("resize3d", name, [x], {"size": [int(s) for s in sizes], **attrs})
    return _channels_back3d(name, y, channel_last)


def Batchnorm(name: str, operandA, weights, bias, running_mean, running_var, epsilon: float = 1e-5) -> Tensor:
    """Inference batch normalization over the channels (dim -3) with running statistics."""
    return _op("batchnorm", name, [operandA, weights, bias, running_mean, running_var],
               {"dim": -3, "epsilon": float(epsilon)})
