"""What every picker kind shares: the tile size, square images filling a number of tile rows, and the step from
picked rows to non-zero tiles."""
from __future__ import annotations

import math

import numpy as np

TILE = 32


def square_widths(k_tiles: int) -> list[int]:
    """Widths W of the square images whose W x W pixels fill exactly `k_tiles` tile rows (ceil(W^2 / 32))."""
    low = math.isqrt((k_tiles - 1) * TILE) + 1 if k_tiles > 1 else 1
    return [w for w in range(low, math.isqrt(k_tiles * TILE) + 1) if -(-w * w // TILE) == k_tiles]


def divisors(n: int) -> list[int]:
    """The divisors of n > 0, ascending."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return small + [n // d for d in reversed(small) if d * d != n]


def tile_pairs(out_rows: np.ndarray, act_rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(output tile row, activation tile) of each non-zero tile of a matrix with non-zeros at (`out_rows`,
    `act_rows`), each pair once, sorted by output tile row then activation tile."""
    rows, cols = np.asarray(out_rows) // TILE, np.asarray(act_rows) // TILE
    span = int(cols.max()) + 1 if cols.size else 1
    return np.divmod(np.unique(rows * span + cols), span)
