"""Resize and pad pickers over square images: nearest and bilinear upsampling by an integer scale (the legacy
compiler's `create_nearest_neighbor_upsample_picker_matrix`, `create_bilinear_upsample_picker_matrix`; this
compiler's `resize2d`), nearest downsampling of both axes (this compiler's `resize2d`) or of one axis (legacy
`create_nearest_neighbor_downsample_picker_matrix`, one sparse matmul per axis) and constant padding
(`create_all_around_padding_picker_matrix`; this compiler's `constant_pad`)."""
from __future__ import annotations

import dataclasses

import numpy as np

from .common import TILE, square_widths, tile_pairs
from .conv import ConvPicker

MAX_SCALE = 8
MAX_PAD = 8


@dataclasses.dataclass(frozen=True)
class Upsample:
    """A W x W image upsampled `scale` times: output pixel (y, x) reads (y // scale, x // scale) (nearest), or
    the up to 2 x 2 neighbours of ((y + 0.5) / scale - 0.5, (x + 0.5) / scale - 0.5) with non-zero weight,
    clamped to the image (bilinear, align_corners=False)."""

    width: int
    scale: int
    bilinear: bool = False

    @property
    def tile_rows(self) -> int:
        return -(-(self.scale * self.width) ** 2 // TILE)

    def sources(self) -> list[np.ndarray]:
        """Per output coordinate, the input coordinates it reads: one array (nearest) or two (bilinear: the
        floor, and the next one where its weight is non-zero, else -1)."""
        out = np.arange(self.scale * self.width)
        if not self.bilinear:
            return [out // self.scale]
        x = np.clip((out + 0.5) / self.scale - 0.5, 0, self.width - 1)
        x0 = np.floor(x).astype(np.int64)
        return [x0, np.where(x > x0, np.minimum(x0 + 1, self.width - 1), -1)]

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """(output tile row, activation tile) of each non-zero tile."""
        wo, w = self.scale * self.width, self.width
        oy, ox = np.divmod(np.arange(wo * wo), wo)
        rows, cols = [], []
        for sy in self.sources():
            for sx in self.sources():
                iy, ix = sy[oy], sx[ox]
                ok = (iy >= 0) & (ix >= 0)
                rows.append(np.flatnonzero(ok))
                cols.append(iy[ok] * w + ix[ok])
        return tile_pairs(np.concatenate(rows), np.concatenate(cols))


@dataclasses.dataclass(frozen=True)
class RowStride:
    """Every `stride`-th of `rows` activation rows, in order: output row r reads activation row r * stride."""

    rows: int
    stride: int

    @property
    def tile_rows(self) -> int:
        return -(-self.rows // (self.stride * TILE))

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """(output tile row, activation tile) of each non-zero tile."""
        out = np.arange(-(-self.rows // self.stride))
        return tile_pairs(out, out * self.stride)


@dataclasses.dataclass(frozen=True)
class Pad:
    """A W x W image with `before` zero rows and columns on top and left, `after` on bottom and right: output
    pixel (y + before, x + before) reads input pixel (y, x)."""

    width: int
    before: int
    after: int

    @property
    def out_width(self) -> int:
        return self.width + self.before + self.after

    @property
    def tile_rows(self) -> int:
        return -(-self.out_width ** 2 // TILE)

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """(output tile row, activation tile) of each non-zero tile."""
        pixels = np.arange(self.width ** 2)
        iy, ix = np.divmod(pixels, self.width)
        return tile_pairs((iy + self.before) * self.out_width + ix + self.before, pixels)


def _upsample(k_tiles: int, tile_rows: int, bilinear: bool) -> Upsample | None:
    matches = [Upsample(w, s, bilinear) for w in square_widths(k_tiles) for s in range(2, MAX_SCALE + 1)
               if Upsample(w, s).tile_rows == tile_rows]
    return min(matches, key=lambda p: (p.scale, p.width)) if matches else None


def implied_nearest(k_tiles: int, tile_rows: int) -> Upsample | None:
    """The nearest upsampling (width, scale) with exactly `tile_rows` output tile rows: smallest scale, then
    width (None if there is none)."""
    return _upsample(k_tiles, tile_rows, bilinear=False)


def implied_bilinear(k_tiles: int, tile_rows: int) -> Upsample | None:
    """As `implied_nearest`, for bilinear upsampling."""
    return _upsample(k_tiles, tile_rows, bilinear=True)


def implied_downsample(k_tiles: int, tile_rows: int) -> ConvPicker | RowStride | None:
    """Nearest downsampling by s = 2..MAX_SCALE, smallest first: of both axes of a square image (the picker of a
    1x1 conv of stride s: output pixel (y, x) reads (s y, s x)); else of one axis: the smallest s for which some
    row count n fills `k_tiles` activation tile rows with ceil(n / s) filling `tile_rows`, the largest such n
    (None if neither fits)."""
    both = [ConvPicker(w, 1, s) for s in range(2, MAX_SCALE + 1) for w in square_widths(k_tiles)]
    both = [p for p in both if p.tile_rows == tile_rows]
    if both:
        return both[0]
    for s in range(2, MAX_SCALE + 1):
        n = min(TILE * k_tiles, TILE * tile_rows * s)
        if n > max(TILE * (k_tiles - 1), TILE * (tile_rows - 1) * s):
            return RowStride(n, s)
    return None


def implied_pad(k_tiles: int, tile_rows: int) -> Pad | None:
    """The (width, padding) with exactly `tile_rows` output tile rows: the least total padding p (up to
    2 * MAX_PAD), p // 2 before and the rest after, then the smallest width (None if there is none)."""
    matches = [Pad(w, p // 2, p - p // 2) for w in square_widths(k_tiles) for p in range(1, 2 * MAX_PAD + 1)]
    matches = [p for p in matches if p.tile_rows == tile_rows]
    return min(matches, key=lambda p: (p.before + p.after, p.width)) if matches else None
