"""Non-zero tiles per core of an identity (sparse) matmul whose encoding the netlist does not carry.

A netlist written by this compiler states the figures (`indices_len`, the busiest core's encoded tiles, with
`sparse_nz_ublocks`, `sparse_nz_strips`). Legacy netlists keep the encoding in a constant queue whose contents are
not in the YAML; there the sparse matmul is a picker the legacy compiler built (`pickers`: conv/pool taps,
nearest/bilinear upsampling, one-axis downsampling, padding, concatenation and reshape runs), and it is rebuilt
from the op's shapes (docs/simulator.md "Sparse matmuls without encodings"):

- K = m_k x u_kt activation tile rows and the op's output tile rows (grid rows x t x mblock_m x ublock_rt) are the
  picker's; with `act_t` > 1 each of the activation's t-slices has its own copy of a picker of 1/act_t of the
  output rows;
- the kinds are tried in `pickers.kind_order`: those the op's name names (`concatenate_12.dc.sparse_matmul.3`),
  then those whose non-zeros are of its sparse tiles' format (0/1 in Bfp2/Bfp2_b/Int8, weights otherwise), then
  conv, upsample, bilinear, downsample, pad, concat, reshape; the first kind with a picker of exactly those
  shapes is taken;
- its non-zero (output tile row, activation tile) pairs go to cores as the op lays them out (t slices of grid
  rows x mblock_m x ublock_rt tile rows); the busiest core's tiles, ublocks and strips are the figures
  (`pybuda.sparse.busiest_core_figures`);
- no kind fits: a 0/1 picker still picks at most one activation row per output row, so a core's output tile row
  holds at most min(32, K) non-zero tiles (`bound_figures`, below the dense bound once K > 32); a weighted matrix
  keeps the dense bound.
"""
from __future__ import annotations

import dataclasses
import functools

import numpy as np

from pybuda.arch.operands import OpGeometry
from pybuda.dataformat import DataFormat
from pybuda.netlist import model as nm
from pybuda.sparse import CoreFigures, busiest_core_figures

from .pickers import Picker, implied_picker, kind_order
from .pickers.common import TILE

# formats of sparse tiles that hold a 0/1 picker (the legacy compiler's Bfp2_b, Int8 in integer graphs)
ONES_FORMATS = (DataFormat.Bfp2, DataFormat.Bfp2_b, DataFormat.Int8)


@functools.lru_cache(maxsize=1024)
def inferred(k_tiles: int, u_kt: int, grid_rows: int, t: int, mblock_m: int, ublock_rt: int, slices: int = 1,
             order: tuple[str, ...] = kind_order("", weighted=False)) -> tuple[str, Picker, CoreFigures] | None:
    """(kind, picker, busiest core's figures) of the first kind in `order` whose picker has the op's shapes: K
    activation tile rows and grid_rows x t x mblock_m x ublock_rt output tile rows, in `slices` equal copies (one
    per activation t-slice); None when no kind fits."""
    total = grid_rows * t * mblock_m * ublock_rt
    found = implied_picker(k_tiles, total // slices, order) if total % slices == 0 else None
    if found is None:
        return None
    kind, picker = found
    rows, cols = picker.pairs()
    rows = (rows + picker.tile_rows * np.arange(slices)[:, None]).ravel()
    fig = busiest_core_figures(rows, np.tile(cols, slices), k_tiles=k_tiles, u_kt=u_kt, grid_rows=grid_rows,
                               mblock_m=mblock_m, ublock_rt=ublock_rt)
    return kind, picker, fig


def inferred_figures(k_tiles: int, u_kt: int, grid_rows: int, t: int, mblock_m: int, ublock_rt: int,
                     slices: int = 1, order: tuple[str, ...] = kind_order("", weighted=False)) -> CoreFigures | None:
    """The busiest core's figures of the picker the shapes imply (`inferred`); None when no kind fits."""
    found = inferred(k_tiles, u_kt, grid_rows, t, mblock_m, ublock_rt, slices, order)
    return None if found is None else found[2]


def bound_figures(k_tiles: int, u_kt: int, t: int, mblock_m: int, ublock_rt: int) -> CoreFigures:
    """Upper bounds of a core's figures for a 0/1 picker of unknown structure: each of its t x mblock_m x
    ublock_rt output tile rows picks at most 32 activation rows, so holds at most min(32, K) tiles; an output
    ublock touches at most min(m_k, 32 x ublock_rt) strips, a t-slice at most min(m_k, 32 x its tile rows)."""
    m_k = -(-k_tiles // u_kt)
    rows = mblock_m * ublock_rt
    return CoreFigures(t * rows * min(TILE, k_tiles), t * mblock_m * min(m_k, TILE * ublock_rt),
                       t * min(m_k, TILE * rows))


def sparse_geometry(op: nm.Op) -> OpGeometry:
    """The op's geometry for the cycle model: an identity matmul without `indices_len` gets the figures of the
    picker its shapes imply (else, for a 0/1 picker, `bound_figures`) as its attributes (`indices_len`,
    `sparse_nz_ublocks`, `sparse_nz_strips`)."""
    geom = op.geometry
    if not geom.identity or op.attrs.indices_len:
        return geom
    ones = op.in_df[0] in ONES_FORMATS
    act_t = op.attrs.act_t or 1
    fig = inferred_figures(geom.k_tiles, geom.u_kt, op.grid_size[0], geom.t, geom.mblock[0], geom.ublock[0],
                           act_t, kind_order(op.name, weighted=not ones))
    if fig is None and ones:
        fig = bound_figures(geom.k_tiles, geom.u_kt, geom.t, geom.mblock[0], geom.ublock[0])
    if fig is None:
        return geom
    return dataclasses.replace(geom, attrs=dataclasses.replace(
        op.attrs, indices_len=fig.nz_tiles, sparse_nz_ublocks=fig.nz_ublocks, sparse_nz_strips=fig.nz_strips))
