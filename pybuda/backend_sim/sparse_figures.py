"""Non-zero tiles per core of an identity (sparse) matmul whose encoding the netlist does not carry.

A netlist written by this compiler states the figure (`indices_len`, the busiest core's encoded tiles). Legacy
netlists keep the encoding in a constant queue whose contents are not in the YAML; there the sparse matmul is a
conv or pooling picker (each output row picks at most one activation row, taps stacked along the rows), and the
picker is rebuilt from the op's shapes (docs/simulator.md "Sparse matmuls without encodings"):

- the activation's K = m_k x u_kt tile rows hold a square image of W x W pixels (ceil(W^2 / 32) = K);
- a (kernel, stride) conv or pool with "same" padding ((kernel - 1) // 2 before) on it has Ho = ceil(W / stride)
  and taps of ceil(Ho^2 / 32) tile rows each: kernel^2 taps, or kernel taps (one kernel row: the legacy
  compiler splits a conv into one sparse matmul per kernel row; the middle row is taken). Of the candidates
  with exactly the op's output tile rows (grid rows x t x mblock_m x ublock_rt), the smallest stride, then
  kernel, whole kernels before rows, is taken; none: not a picker, and the cycle model keeps its dense bound;
- its picks give the non-zero (output tile row, activation tile) pairs; output tile rows go to cores as the op
  lays them out (t slices of grid rows x mblock_m x ublock_rt tile rows); the busiest core's tiles are the
  figure (`indices_len`), with its non-zero ublocks and strips (`sparse_nz_ublocks`, `sparse_nz_strips`, for
  the V2 formula).
"""
from __future__ import annotations

import dataclasses
import functools
import math

import numpy as np

from pybuda.arch.operands import OpGeometry
from pybuda.netlist import model as nm
from pybuda.sparse import CoreFigures, busiest_core_figures

MAX_STRIDE = 4
MAX_KERNEL = 11
TILE = 32


@dataclasses.dataclass(frozen=True)
class Picker:
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


def image_widths(k_tiles: int) -> list[int]:
    """Square image widths whose pixels fill exactly `k_tiles` tile rows (the nearest width if none does)."""
    low = math.isqrt((k_tiles - 1) * TILE) + 1 if k_tiles > 1 else 1
    widths = [w for w in range(low, math.isqrt(k_tiles * TILE) + 1) if -(-w * w // TILE) == k_tiles]
    return widths or [max(1, round(math.sqrt(k_tiles * TILE)))]


def implied_picker(k_tiles: int, out_tile_rows: int) -> Picker | None:
    """The (width, kernel, stride) with exactly `out_tile_rows` output tile rows (None if there is none)."""
    candidates = [Picker(w, k, s, one_row) for w in image_widths(k_tiles) for s in range(1, MAX_STRIDE + 1)
                  for k in range(1, MAX_KERNEL + 1) for one_row in (False, True) if k > 1 or not one_row]
    matches = [p for p in candidates if p.tile_rows == out_tile_rows]
    return min(matches, key=lambda p: (p.stride, p.kernel, p.one_row, p.width)) if matches else None


def nz_pairs(picker: Picker) -> tuple[np.ndarray, np.ndarray]:
    """(output tile row, activation tile) of each non-zero tile of the picker (taps stacked along the rows)."""
    wo, s, pad, w = picker.out_width, picker.stride, (picker.kernel - 1) // 2, picker.width
    oy, ox = np.divmod(np.arange(wo * wo), wo)
    rows, cols = [], []
    for tap, (i, j) in enumerate(picker.taps):
        iy, ix = oy * s - pad + i, ox * s - pad + j
        ok = (iy >= 0) & (iy < w) & (ix >= 0) & (ix < w)
        rows.append((tap * picker.tap_tile_rows * TILE + np.flatnonzero(ok)) // TILE)
        cols.append((iy[ok] * w + ix[ok]) // TILE)
    pairs = np.unique(np.concatenate(rows) * (w * w) + np.concatenate(cols))
    return np.divmod(pairs, w * w)


@functools.lru_cache(maxsize=1024)
def inferred_figures(k_tiles: int, u_kt: int, grid_rows: int, t: int, mblock_m: int,
                     ublock_rt: int) -> CoreFigures | None:
    """Non-zero figures of the busiest core of a conv/pool picker, from the op's shapes (module docstring); None
    when the shapes are not a picker's."""
    picker = implied_picker(k_tiles, grid_rows * t * mblock_m * ublock_rt)
    if picker is None:
        return None
    rows, cols = nz_pairs(picker)
    return busiest_core_figures(rows, cols, k_tiles=k_tiles, u_kt=u_kt, grid_rows=grid_rows, mblock_m=mblock_m,
                                ublock_rt=ublock_rt)


def sparse_geometry(op: nm.Op) -> OpGeometry:
    """The op's geometry for the cycle model: an identity matmul without `indices_len` whose shapes are a
    conv/pool picker's gets the inferred figures as its attributes (`indices_len`, `sparse_nz_ublocks`,
    `sparse_nz_strips`)."""
    geom = op.geometry
    if not geom.identity or op.attrs.indices_len:
        return geom
    fig = inferred_figures(geom.k_tiles, geom.u_kt, op.grid_size[0], geom.t, geom.mblock[0], geom.ublock[0])
    if fig is None:
        return geom
    return dataclasses.replace(geom, attrs=dataclasses.replace(
        op.attrs, indices_len=fig.nz_tiles, sparse_nz_ublocks=fig.nz_ublocks, sparse_nz_strips=fig.nz_strips))
