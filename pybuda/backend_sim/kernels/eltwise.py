"""Eltwise kernels: binary FPU ops, SFPU unary ops, datacopy (nop, datacopy, ethernet_datacopy, tilizer)."""
from __future__ import annotations

import numpy as np
import torch

from pybuda.arch import numerics
from pybuda.arch import optypes as arch_ops
from pybuda.netlist import Attributes, Op

from ..errors import SimulatorError
from ..formats import fidelity_product, quantize
from .common import expect_inputs, input_formats, int_math, src

# op types each kernel runs (pybuda.arch.optypes; the quantization ops are not simulated numerically)
BINARY_OPS = tuple(sorted(arch_ops.BINARY_OPS - arch_ops.QUANTIZATION_OPS))
SFPU_OPS = tuple(sorted(arch_ops.SFPU_OPS))
DATACOPY_OPS = tuple(sorted(n for n in arch_ops.OP_TYPES
                            if arch_ops.family_of(n) in ("datacopy", "ethernet", "tilizer")))


def binary(op: Op, ins: list[np.ndarray]) -> np.ndarray:
    """add / subtract / maximum on source-register values; multiply under the math-fidelity model
    (input 0 in srcA, input 1 in srcB); result rounded to acc_df (dest)."""
    expect_inputs(op, ins, 2)
    a, b = ins
    integer = int_math(op)
    a_df, b_df = input_formats(op, 2)
    if op.type == "multiply":
        y = a * b if integer else fidelity_product(a, b, op.math_fidelity, a_df, b_df)
    else:
        fn = {"add": np.add, "subtract": np.subtract, "maximum": np.maximum}[op.type]
        y = fn(src(a, integer, a_df), src(b, integer, b_df))
    return quantize(y, op.effective_acc_df)


def datacopy(op: Op, ins: list[np.ndarray]) -> np.ndarray:
    """nop / datacopy / ethernet_datacopy / tilizer: the value, in dest (acc_df)."""
    expect_inputs(op, ins, 1)
    return quantize(ins[0], op.effective_acc_df)


def sfpu(op: Op, ins: list[np.ndarray]) -> np.ndarray:
    """SFPU unary op (exact float32 value of the function), rounded to acc_df."""
    expect_inputs(op, ins, 1)
    return quantize(unary_value(op.type, op.attrs, ins[0], op.name), op.effective_acc_df)


_TORCH_UNARY = {
    "exp": lambda x, approx: torch.exp(x),
    "log": lambda x, approx: torch.log(x),
    "sqrt": lambda x, approx: torch.sqrt(x),
    "gelu": lambda x, approx: torch.nn.functional.gelu(x, approximate="tanh" if approx else "none"),
    "reciprocal": lambda x, approx: torch.reciprocal(x),
    "sigmoid": lambda x, approx: torch.sigmoid(x),
    "tanh": lambda x, approx: torch.tanh(x),
    "square": lambda x, approx: x * x,
    "sine": lambda x, approx: torch.sin(x),
    "cosine": lambda x, approx: torch.cos(x),
}


def unary_value(kind: str, attrs: Attributes, x: np.ndarray, name: str = "") -> np.ndarray:
    """Value of an SFPU function in float32 (torch's vectorised, multi-threaded kernels; gelu_derivative by the
    backend's reference, `pybuda.arch.numerics`; approximate_mode selects the tanh forms of gelu / gelu_derivative)."""
    with np.errstate(all="ignore"):
        if kind in ("nop", "datacopy", "ethernet_datacopy", "tilizer", "dropout"):  # dropout: identity (inference)
            return np.asarray(x, dtype=np.float32)
        if kind == "abs":
            return np.abs(x).astype(np.float32)
        if kind == "lrelu":
            slope = 0.01 if attrs.slope is None else float(attrs.slope)
            return np.where(x > 0, x, x * np.float32(slope)).astype(np.float32)
        if kind == "gelu_derivative":
            return numerics.gelu_derivative(x, tanh=bool(attrs.approximate_mode)).astype(np.float32)
        if kind == "power":
            if attrs.exp is None:
                raise SimulatorError(f"op {name!r} (power) needs attribute exp")
            return np.power(x.astype(np.float64), attrs.exp).astype(np.float32)
        fn = _TORCH_UNARY.get(kind)
        if fn is None:
            raise SimulatorError(f"op {name!r}: no unary model for {kind!r}")
        t = torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))
        return fn(t, bool(attrs.approximate_mode)).numpy()
