"""Quantization ops of `pybuda.op` with the legacy signatures (tenstorrent/tt-buda `op/quantize.py`): integer
values held as floats; a scale is an operand (a number, a Constant or Parameter, one value per channel along
`axis` or a tensor that broadcasts to the input), a zero point a number.

Dequantize is float arithmetic and runs on the device. Quantize, Requantize and BudaRequantize round, which no
device op does: they run on the host wherever they sit (the registry group "host_only"), or are folded at compile
time when they read only parameters and constants. Values are clamped to the full range of `out_dtype` (legacy
clamped int8 to [-127, 127]; torch's quantize_per_tensor to [-128, 127])."""
from __future__ import annotations

import math
import numbers

import torch

from ..errors import UserInputError
from ..module import Tensor, traced_op as _op
from ..ops.quantize import DTYPE_RANGES


def _out_dtype(op: str, name: str, out_dtype: torch.dtype) -> str:
    """The registry's name of an integer `out_dtype` (UserInputError naming the op otherwise)."""
    dtype = str(out_dtype).removeprefix("torch.")
    if not isinstance(out_dtype, torch.dtype) or dtype not in DTYPE_RANGES:
        raise UserInputError(f"{op} {name!r}: out_dtype={out_dtype!r}; legal: "
                             f"{', '.join(f'torch.{d}' for d in DTYPE_RANGES)}")
    return dtype


def _zero_point(op: str, name: str, zero_point) -> float:
    if isinstance(zero_point, bool) or not isinstance(zero_point, numbers.Real) or not math.isfinite(zero_point):
        raise UserInputError(f"{op} {name!r}: zero point {zero_point!r}; legal: a finite number")
    return float(zero_point)


def Quantize(name: str, operandA, operandB, zero_point: int, axis: int, out_dtype: torch.dtype) -> Tensor:
    """clamp(round(A / scale) + zero_point) to the range of `out_dtype` (torch.int8, uint8 or int32), rounding
    half to even; `operandB` is the scale."""
    attrs = {"zero_point": _zero_point("Quantize", name, zero_point), "axis": int(axis),
             "out_dtype": _out_dtype("Quantize", name, out_dtype)}
    return _op("quantize", name, [operandA, operandB], attrs)


def Dequantize(name: str, operandA, operandB, zero_point: int, axis: int = -1,
               out_dtype: torch.dtype = torch.float32) -> Tensor:
    """(A - zero_point) * scale; `operandB` is the scale. The result is float (`out_dtype` torch.float32; set other
    formats with configure_mixed_precision)."""
    if out_dtype != torch.float32:
        raise UserInputError(f"Dequantize {name!r}: out_dtype={out_dtype!r}; legal: torch.float32 (set a lower "
                             "precision with pybuda.config.configure_mixed_precision(name_regex=..., output_df=...))")
    attrs = {"zero_point": _zero_point("Dequantize", name, zero_point), "axis": int(axis)}
    return _op("dequantize", name, [operandA, operandB], attrs)


def Requantize(name: str, operandA, operand_inp_scale, operand_out_scale, input_zero_point: float,
               output_zero_point: float, out_dtype: torch.dtype, axis: int = -1, rounding: str = "None") -> Tensor:
    """clamp(round(inp_scale / out_scale * (A - input_zero_point) + output_zero_point)) to the range of `out_dtype`;
    `rounding` of values midway: "None" half to even (legacy), "TONEAREST" away from zero, "UPWARD" towards +inf."""
    attrs = {"inp_zero_point": _zero_point("Requantize", name, input_zero_point),
             "out_zero_point": _zero_point("Requantize", name, output_zero_point), "axis": int(axis),
             "rounding": str(rounding), "out_dtype": _out_dtype("Requantize", name, out_dtype)}
    return _op("requantize", name, [operandA, operand_inp_scale, operand_out_scale], attrs)


def BudaRequantize(name: str, operandA, scale, zero_point: float, out_dtype: torch.dtype, axis: int = -1,
                   rounding: str = "None") -> Tensor:
    """clamp(round(A * scale + zero_point)) to the range of `out_dtype` (the legacy Buda form of Requantize: one
    combined scale, multiplied); `rounding` as for Requantize."""
    attrs = {"zero_point": _zero_point("BudaRequantize", name, zero_point), "axis": int(axis),
             "rounding": str(rounding), "out_dtype": _out_dtype("BudaRequantize", name, out_dtype)}
    return _op("buda_requantize", name, [operandA, scale], attrs)
