"""Convolution and pooling ops of `pybuda.op` with the legacy signatures and defaults (tenstorrent/tt-buda
`op/convolution.py`, `op/pooling.py`): NCHW activations (NHWC with `channel_last`), padding "same" by default, as a
number, a pair (height, width) or a list [left, right, top, bottom]."""
from __future__ import annotations

from ..errors import UserInputError
from ..module import Tensor, traced_op as _op
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
