"""Shape and numeric helpers shared by the op definitions."""
from __future__ import annotations

import numpy as np

from ..arch.numerics import erf
from .registry import OpError


def broadcast_shapes(*shapes: tuple) -> tuple:
    try:
        return tuple(np.broadcast_shapes(*shapes))
    except ValueError:
        raise OpError(f"operand shapes {list(shapes)} do not broadcast") from None


def norm_dim(dim: int, rank: int) -> int:
    """Negative form of a dimension index, checked against the rank."""
    if not -rank <= dim < rank:
        raise OpError(f"dim {dim} out of range for rank {rank}")
    return dim - rank if dim >= 0 else dim


def gelu(x: np.ndarray, approximate: str = "none") -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    if approximate == "tanh":
        return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1.0 + erf(x / np.sqrt(2.0)))


def ceil_tile(n: int, tile: int = 32) -> int:
    return -(-int(n) // tile) * tile
