"""Concatenation and reshape pickers: runs of consecutive rows moved between tile-aligned and packed layouts.

- compaction: `blocks` runs of `length` rows, each starting on a tile in the activation (stride ceil32(length))
  and packed one after the other in the output; the legacy compiler's padding removal after a concatenation of
  inputs that are not whole tiles along the axis (`concatenate`: each input padded to whole tiles, concatenated,
  then packed) and after a flatten (`create_flattened_padding_removal_sparse_picker_matrix`; `length` 1 with 32
  runs per output tile row when it keeps one row of each tile);
- spread: the reverse, packed activation runs each starting on a tile in the output (`reshape` flatten and
  unflatten: `create_reshape_flatten_sparse_picker_matrix`, one row per output tile row, and its `_narrower`
  form, `length` rows per output tile row).

One run (K = output tile rows) is the identity, a narrow or a concatenation whose inputs but the last are whole
tiles. Inputs of different lengths cannot be told apart from the shapes: the inference takes equal runs.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from .common import TILE, divisors, tile_pairs


@dataclasses.dataclass(frozen=True)
class RowBlocks:
    """`blocks` runs of `length` rows: run i is output rows [i * out_stride, + length), read from activation
    rows [i * act_stride, + length)."""

    blocks: int
    length: int
    out_stride: int
    act_stride: int

    @property
    def tile_rows(self) -> int:
        return -(-((self.blocks - 1) * self.out_stride + self.length) // TILE)

    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """(output tile row, activation tile) of each non-zero tile."""
        run, offset = np.divmod(np.arange(self.blocks * self.length), self.length)
        return tile_pairs(run * self.out_stride + offset, run * self.act_stride + offset)


def _runs(aligned_tiles: int, packed_tiles: int) -> tuple[int, int] | None:
    """(runs p, length n) of equal runs that fill `aligned_tiles` tile rows when each starts on a tile and
    `packed_tiles` when packed: the fewest runs (p divides aligned_tiles and p > aligned - packed, since packing
    saves less than a tile per run), then the longest runs (None if there are none)."""
    if packed_tiles > aligned_tiles:
        return None
    for p in divisors(aligned_tiles):
        if p <= aligned_tiles - packed_tiles:
            continue
        per_run = aligned_tiles // p
        n = min(TILE * per_run, TILE * packed_tiles // p)
        if n > max(TILE * (per_run - 1), TILE * (packed_tiles - 1) // p):
            return p, n
    return None


def implied_compaction(k_tiles: int, tile_rows: int) -> RowBlocks | None:
    """Equal tile-aligned activation runs packed into `tile_rows` output tile rows (`_runs`; None if none fit)."""
    runs = _runs(k_tiles, tile_rows)
    if runs is None:
        return None
    p, n = runs
    return RowBlocks(p, n, n, TILE * -(-n // TILE))


def implied_spread(k_tiles: int, tile_rows: int) -> RowBlocks | None:
    """Equal packed activation runs, each starting on an output tile (`_runs` with the roles swapped; None if
    none fit)."""
    runs = _runs(tile_rows, k_tiles)
    if runs is None:
        return None
    p, n = runs
    return RowBlocks(p, n, TILE * -(-n // TILE), n)
