"""Convolution and pooling pickers: taps of a (kernel, stride) window with "same" padding over a square image,
stacked along the rows (the legacy compiler's `create_conv2d_sparse_picker_matrix`)."""
from __future__ import annotations

import dataclasses
import math

import numpy as np

from .common import TILE, square_widths, tile_pairs

MAX_STRIDE = 4
MAX_KERNEL = 11


@dataclasses.dataclass(frozen=True)
class ConvPicker:
    """The conv/pool an identity matmul's shapes imply: image width, kernel and stride (square, same padding),
    and whether the op holds one kernel row only."""

    width: int
    kernel: int
    stride: int
    one_row: bool = False

    @property
    def out_width(self) -> int:
        return -(-self.width // self.stride)

    @property
    def taps(self) -> list[tuple[int, int]]:
        """(row, column) kernel offsets of the op's taps, in the order they are stacked along the rows."""
        k = self.kernel
        rows = [k // 2] if self.one_row else range(k)
        return [(i, j) for i in rows for j in range(k)]

    @property
    def tap_tile_rows(self) -> int:
        return -(-self.out_width ** 2 // TILE)

    @property
    def tile_rows(self) -> int:
        return len(self.taps) * self.tap_tile_rows

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """(output tile row, activation tile) of each non-zero tile (each output pixel of a tap reads one input
        pixel; taps outside the image read none)."""
        wo, s, pad, w = self.out_width, self.stride, (self.kernel - 1) // 2, self.width
        oy, ox = np.divmod(np.arange(wo * wo), wo)
        rows, cols = [], []
        for tap, (i, j) in enumerate(self.taps):
            iy, ix = oy * s - pad + i, ox * s - pad + j
            ok = (iy >= 0) & (iy < w) & (ix >= 0) & (ix < w)
            rows.append(tap * self.tap_tile_rows * TILE + np.flatnonzero(ok))
            cols.append(iy[ok] * w + ix[ok])
        return tile_pairs(np.concatenate(rows), np.concatenate(cols))


def image_widths(k_tiles: int) -> list[int]:
    """Square image widths whose pixels fill exactly `k_tiles` tile rows (the nearest width if none does)."""
    return square_widths(k_tiles) or [max(1, round(math.sqrt(k_tiles * TILE)))]


def implied(k_tiles: int, tile_rows: int) -> ConvPicker | None:
    """The (width, kernel, stride) with exactly `tile_rows` output tile rows: smallest stride, then kernel, whole
    kernels before one kernel row (None if there is none)."""
    candidates = [ConvPicker(w, k, s, one_row) for w in image_widths(k_tiles) for s in range(1, MAX_STRIDE + 1)
                  for k in range(1, MAX_KERNEL + 1) for one_row in (False, True) if k > 1 or not one_row]
    matches = [p for p in candidates if p.tile_rows == tile_rows]
    return min(matches, key=lambda p: (p.stride, p.kernel, p.one_row, p.width)) if matches else None
