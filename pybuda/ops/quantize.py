"""Quantization ops (legacy `quantize`, `dequantize`, `requantize`, `buda_requantize`): integer values held in
float arrays, scales as operands (a number, one value per channel along `axis`, or a tensor that broadcasts to
the input), zero points as attributes.

`dequantize`, (x - zero_point) * scale, is float arithmetic: it decomposes into device ops. The others round, and
no device op rounds (nor does the simulator model the Buda quantization ops numerically): they have no lowering
and belong to the group "host_only", so they run on the host wherever they sit (`passes/cpu_fallback.py`), or
are constant-evaluated when they read only parameters and constants."""
from __future__ import annotations

import numpy as np

from .common import norm_dim
from .registry import OpDef, OpError, register

# the legal integer output types and their value ranges
DTYPE_RANGES: dict[str, tuple[int, int]] = {"int8": (-128, 127), "uint8": (0, 255), "int32": (-2**31, 2**31 - 1)}

# rounding modes (legacy names; TVM's for requantize): how a value midway between two integers rounds
_ROUNDING = {
    "None": np.rint,                                                      # half to even (torch.round, legacy)
    "TONEAREST": lambda v: np.where(v >= 0, np.floor(v + 0.5), np.ceil(v - 0.5)),   # half away from zero
    "UPWARD": lambda v: np.floor(v + 0.5),                                # half towards +infinity
}


def scale_view(scale: tuple, x: tuple, axis: int) -> tuple:
    """The shape a scale of shape `scale` takes against an input of shape `x`: a 1-D scale of x[axis] values lies
    along `axis`; any other scale must broadcast to `x` as it is. OpError otherwise."""
    axis = norm_dim(int(axis), len(x)) + len(x)
    view = (1,) * axis + scale + (1,) * (len(x) - axis - 1) if len(scale) == 1 and scale[0] == x[axis] else scale
    try:
        fits = np.broadcast_shapes(view, x) == tuple(x)
    except ValueError:
        fits = False
    if not fits:
        raise OpError(f"a scale of shape {scale} does not fit an input of shape {x} (axis {axis}); legal: a number, "
                      f"{x[axis]} values (one per channel along the axis), or a tensor that broadcasts to {x}")
    return view


def _check_attrs(attrs: dict) -> None:
    if "out_dtype" in attrs and attrs["out_dtype"] not in DTYPE_RANGES:
        raise OpError(f"out_dtype {attrs['out_dtype']!r}; legal: {', '.join(DTYPE_RANGES)}")
    if attrs.get("rounding", "None") not in _ROUNDING:
        raise OpError(f"rounding {attrs['rounding']!r}; legal: {', '.join(map(repr, _ROUNDING))}")


def _shape(shapes: list, attrs: dict) -> tuple:
    x, *scales = shapes
    _check_attrs(attrs)
    for scale in scales:
        scale_view(scale, x, attrs.get("axis", -1))
    return x


def _operands(values: list, attrs: dict) -> list[np.ndarray]:
    """The input and its scales (viewed along `axis`), in float32 as torch computes them."""
    x, *scales = (np.asarray(v, dtype=np.float32) for v in values)
    return [x, *(s.reshape(scale_view(s.shape, x.shape, attrs.get("axis", -1))) for s in scales)]


def _integers(v: np.ndarray, attrs: dict, zero_point: float = 0.0) -> np.ndarray:
    """v rounded (in float64: v + 0.5 is exact there), plus `zero_point`, clamped to the range of `out_dtype`."""
    rounded = _ROUNDING[attrs.get("rounding", "None")](v.astype(np.float64)) + zero_point
    return np.clip(rounded, *DTYPE_RANGES[attrs["out_dtype"]]).astype(np.float32)


def _quantize(values: list, attrs: dict) -> np.ndarray:
    """clamp(round(x / scale) + zero_point)."""
    x, scale = _operands(values, attrs)
    return _integers(x / scale, attrs, float(attrs["zero_point"]))


def _dequantize(values: list, attrs: dict) -> np.ndarray:
    """(x - zero_point) * scale."""
    x, scale = _operands(values, attrs)
    return (x - np.float32(attrs["zero_point"])) * scale


def _requantize(values: list, attrs: dict) -> np.ndarray:
    """clamp(round(inp_scale / out_scale * (x - inp_zero_point) + out_zero_point))."""
    x, inp_scale, out_scale = _operands(values, attrs)
    shifted = x - np.float32(attrs["inp_zero_point"])
    return _integers(inp_scale / out_scale * shifted + np.float32(attrs["out_zero_point"]), attrs)


def _buda_requantize(values: list, attrs: dict) -> np.ndarray:
    """clamp(round(x * scale + zero_point))."""
    x, scale = _operands(values, attrs)
    return _integers(x * scale + np.float32(attrs["zero_point"]), attrs)


def _decompose_dequantize(ctx) -> None:
    """(x - zero_point) * scale, the scale reshaped to lie along `axis` (folded when it is a constant)."""
    x, scale = ctx.operands
    x_shape, scale_shape = ctx.node_input_shape(0), ctx.node_input_shape(1)
    view = scale_view(scale_shape, x_shape, ctx.node.attrs.get("axis", -1))
    if view != scale_shape:
        scale = ctx.op("reshape", [scale], {"shape": list(view)})
    zero_point = float(ctx.node.attrs["zero_point"])
    if zero_point:
        x = ctx.op("subtract", [x, ctx.constant(np.array(zero_point, dtype=np.float32), "zero_point")])
    ctx.replace(ctx.op("multiply", [x, scale]))


register(OpDef("dequantize", _shape, _dequantize, arity=(2, 2), kind="binary", decompose=_decompose_dequantize))
for _name, _eval, _arity in (("quantize", _quantize, 2), ("requantize", _requantize, 3),
                             ("buda_requantize", _buda_requantize, 2)):
    register(OpDef(_name, _shape, _eval, arity=(_arity, _arity), kind="other", groups={"host_only"}))
