"""Helpers shared by the op kernels.

Tensor convention for every kernel: float arrays shaped (..., t, R, C) in elements of whole 32x32 tiles. The
leading dimensions are free: the executor puts the inputs of a microbatch there (size N, or 1 when a value is
the same for every input, e.g. a parameter), the fused-op kernel adds per-core dimensions. Kernels broadcast
over them with numpy rules and never modify their inputs in place.
"""
from __future__ import annotations

import numpy as np

from pybuda.arch import numerics
from pybuda.dataformat import DataFormat
from pybuda.netlist import Op

from ..errors import SimulatorError
from ..formats import to_source_register

TILE = 32
INT_MATH_FORMATS = frozenset({DataFormat.Int8, DataFormat.UInt8, DataFormat.Int32})


def int_math(op: Op) -> bool:
    """True if the op runs the integer FPU path (Int8/Int32 inputs or accumulation)."""
    return op.effective_acc_df in INT_MATH_FORMATS or any(df in INT_MATH_FORMATS for df in op.in_df)


def src(x: np.ndarray, integer: bool = False, stored: "DataFormat | None" = None) -> np.ndarray:
    """An operand as the matrix unit's source register holds it (19-bit float; integers exact); `stored`: the
    format `x` holds values of, if known."""
    return x if integer else to_source_register(x, stored)


def input_formats(op: Op, n: int) -> tuple:
    """The formats the op's first n inputs hold values of (the executor rounds every input to its in_df)."""
    return tuple(op.in_df[:n])


def expect_inputs(op: Op, ins: list, n: int | tuple[int, ...]) -> None:
    allowed = (n,) if isinstance(n, int) else n
    if len(ins) not in allowed:
        want = " or ".join(str(a) for a in allowed)
        raise SimulatorError(f"op {op.name!r} ({op.type}) takes {want} inputs, got {len(ins)}")


def packer_relu(op: Op, y: np.ndarray) -> np.ndarray:
    """Packer ReLU (`relu_en`, `relu_threshold`, `relu_mode`), by the backend's reference
    (`pybuda.arch.numerics.packer_relu`)."""
    a = op.attrs
    if not a.relu_en:
        return y
    mode = a.relu_mode or "min"
    if mode not in numerics.RELU_MODES:
        raise SimulatorError(f"op {op.name!r}: relu_mode must be min or max, got {mode!r}")
    return numerics.packer_relu(y, 0.0 if a.relu_threshold is None else float(a.relu_threshold), mode)


def clear_outside_tile(x: np.ndarray, tile_dim: tuple[int, int]) -> np.ndarray:
    """Zero every element outside the top-left `tile_dim` corner of each 32x32 tile (tiny-tile tensors)."""
    h, w = tile_dim
    if (h, w) == (TILE, TILE):
        return x
    *lead, rows, cols = x.shape
    v = x.reshape(*lead, rows // TILE, TILE, cols // TILE, TILE).copy()
    v[..., h:, :, :] = 0
    v[..., :, :, w:] = 0
    return v.reshape(x.shape)


def lead_broadcast(arrays: list[np.ndarray]) -> list[np.ndarray]:
    """Broadcast the leading (non t/R/C) dimensions of arrays to a common shape (views)."""
    lead = np.broadcast_shapes(*(a.shape[:-3] for a in arrays))
    return [np.broadcast_to(a, lead + a.shape[-3:]) for a in arrays]
