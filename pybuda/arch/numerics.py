"""The backend's reference numerics of op functions written once, in numpy: the op registry's golden evals
(`pybuda.ops`) and the simulator's kernels (`pybuda.backend_sim.kernels`) both call them.

`erf` and `gelu_derivative` compute in float64; `packer_relu` keeps its input's dtype.
"""
from __future__ import annotations

import numpy as np

RELU_MODES = ("min", "max")   # packer ReLU: zero what is <= threshold / clamp to [0, threshold]

_SQRT_2_OVER_PI = np.sqrt(2.0 / np.pi)
_GELU_TANH_CUBIC = 0.044715    # the cubic coefficient of gelu's tanh approximation


def erf(x: np.ndarray) -> np.ndarray:
    """Error function (Abramowitz & Stegun 7.1.26, |error| < 1.5e-7), float64 inside."""
    x = np.asarray(x, dtype=np.float64)
    s = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    return s * (1.0 - poly * np.exp(-a * a))


def gelu_derivative(x: np.ndarray, tanh: bool = False) -> np.ndarray:
    """d gelu(x) / dx in float64: of the exact erf form, or (`tanh`) of the tanh approximation."""
    x = np.asarray(x, dtype=np.float64)
    if tanh:
        th = np.tanh(_SQRT_2_OVER_PI * (x + _GELU_TANH_CUBIC * x ** 3))
        return 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * _SQRT_2_OVER_PI * (1.0 + 3 * _GELU_TANH_CUBIC * x * x)
    return 0.5 * (1.0 + erf(x / np.sqrt(2.0))) + x * np.exp(-0.5 * x * x) / np.sqrt(2.0 * np.pi)


def packer_relu(x: np.ndarray, threshold: float = 0.0, mode: str = "min") -> np.ndarray:
    """The packer's ReLU as the backend's golden model applies it: mode "min" zeroes the values <= threshold,
    mode "max" clamps to [0, threshold] (a mode outside `RELU_MODES` is the caller's to reject)."""
    x = np.asarray(x)
    if mode == "max":
        return np.clip(x, 0.0, threshold).astype(x.dtype)
    return np.where(x > threshold, x, 0.0).astype(x.dtype)
