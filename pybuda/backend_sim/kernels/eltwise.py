"""Eltwise kernels: binary FPU ops, SFPU unary ops, datacopy (nop, datacopy, ethernet_datacopy, tilizer)."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..errors import SimulatorError
from ..formats import fidelity_product, quantize
from .common import expect_inputs, int_math, src, truthy

BINARY_OPS = ("add", "subtract", "multiply", "maximum")
SFPU_OPS = ("exp", "log", "sqrt", "gelu", "gelu_derivative", "reciprocal", "sigmoid", "tanh", "square", "abs",
            "lrelu", "power", "sine", "cosine", "dropout")
DATACOPY_OPS = ("nop", "datacopy", "ethernet_datacopy", "tilizer")

_SQRT_2_OVER_PI = float(np.sqrt(2.0 / np.pi))


def erf(x: np.ndarray) -> np.ndarray:
    """erf in float64 (torch's vectorised implementation)."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    return torch.erf(torch.from_numpy(x)).numpy()


def binary(op: Any, ins: list[np.ndarray]) -> np.ndarray:
    """add / subtract / maximum on source-register values; multiply under the math-fidelity model
    (input 0 in srcA, input 1 in srcB); result rounded to acc_df (dest)."""
    expect_inputs(op, ins, 2)
    a, b = ins
    integer = int_math(op)
    if op.type == "multiply":
        y = a * b if integer else fidelity_product(a, b, op.math_fidelity)
    else:
        fn = {"add": np.add, "subtract": np.subtract, "maximum": np.maximum}[op.type]
        y = fn(src(a, integer), src(b, integer))
    return quantize(y, op.acc_df)


def datacopy(op: Any, ins: list[np.ndarray]) -> np.ndarray:
    """nop / datacopy / ethernet_datacopy / tilizer: the value, in dest (acc_df)."""
    expect_inputs(op, ins, 1)
    return quantize(ins[0], op.acc_df)


def sfpu(op: Any, ins: list[np.ndarray]) -> np.ndarray:
    """SFPU unary op computed in float64 (float32 for the cheap ones), rounded to acc_df."""
    expect_inputs(op, ins, 1)
    return quantize(unary_value(op.type, op.attributes, ins[0], op.name), op.acc_df)


def unary_value(kind: str, attrs: Any, x: np.ndarray, name: str = "") -> np.ndarray:
    """Exact value of an SFPU function (approximate_mode selects the tanh forms of gelu / gelu_derivative)."""
    approx = truthy(attrs.get("approximate_mode", False))
    with np.errstate(all="ignore"):
        if kind in ("nop", "datacopy", "ethernet_datacopy", "tilizer", "dropout"):  # dropout: identity (inference)
            return np.asarray(x, dtype=np.float32)
        if kind == "abs":
            return np.abs(x).astype(np.float32)
        if kind == "square":
            return (x.astype(np.float64) ** 2).astype(np.float32)
        if kind == "lrelu":
            slope = float(attrs.get("slope", 0.01))
            return np.where(x > 0, x, x * np.float32(slope)).astype(np.float32)
        xd = x.astype(np.float64)
        if kind == "exp":
            y = np.exp(xd)
        elif kind == "log":
            y = np.log(xd)
        elif kind == "sqrt":
            y = np.sqrt(xd)
        elif kind == "gelu":
            if approx:
                y = 0.5 * xd * (1.0 + np.tanh(_SQRT_2_OVER_PI * (xd + 0.044715 * xd ** 3)))
            else:
                y = 0.5 * xd * (1.0 + erf(xd / np.sqrt(2.0)))
        elif kind == "gelu_derivative":
            if approx:
                inner = _SQRT_2_OVER_PI * (xd + 0.044715 * xd ** 3)
                th = np.tanh(inner)
                y = 0.5 * (1.0 + th) + 0.5 * xd * (1.0 - th * th) * _SQRT_2_OVER_PI * (1.0 + 3 * 0.044715 * xd * xd)
            else:
                y = 0.5 * (1.0 + erf(xd / np.sqrt(2.0))) + xd * np.exp(-0.5 * xd * xd) / np.sqrt(2.0 * np.pi)
        elif kind == "reciprocal":
            y = 1.0 / xd
        elif kind == "sigmoid":
            y = 1.0 / (1.0 + np.exp(-xd))
        elif kind == "tanh":
            y = np.tanh(xd)
        elif kind == "power":
            if "exp" not in attrs:
                raise SimulatorError(f"op {name!r} (power) needs attribute exp")
            y = np.power(xd, int(attrs["exp"]))
        elif kind == "sine":
            y = np.sin(xd)
        elif kind == "cosine":
            y = np.cos(xd)
        else:
            raise SimulatorError(f"op {name!r}: no unary model for {kind!r}")
        return y.astype(np.float32)
