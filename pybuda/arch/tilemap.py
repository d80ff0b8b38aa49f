"""Which producer tiles each consumer of an edge reads (shared/reference/data-movement.md §2.1, net2pipe's tile
maps): every tile of the consumer's input tensor (after the edge's unpad, TMs and pad) is traced back through the
TMs to a producer tile, hence to the producer core (an op) or buffer (a queue) that holds it.

The consumer side is grouped as the backend's pipes group it (§2.2): a matmul's first operand by grid row (one
pipe per row multicasts it along the row), its second by grid column, other inputs per core. Counts are whole
tiles per input, vectorised with numpy; results are cached per edge signature (the balancer costs the same edges
many times).
"""
from __future__ import annotations

import dataclasses
import functools

import numpy as np

from .tms import TMError, shape_after_tms, tm_shape

MAX_TILES = 1 << 22     # an edge with more tiles than this (no real tensor has) is not mapped


@dataclasses.dataclass(frozen=True)
class GroupReads:
    """What one consumer group (a core, or a grid row or column that one multicast pipe feeds) reads per input:
    `sources` ((producer unit (row, col), tiles), ...) in first-read order, `tiles` in all, `phases` (how often
    the source changes along the group's tile order in its first t slice: a stream phase each; the stream loops
    over the t slices, §2.7)."""

    group: tuple
    sources: tuple
    tiles: int
    phases: int


def _tm_shapes(producer_shape: tuple, tms: tuple, unpad: tuple | None) -> list[tuple] | None:
    """(t, rt, ct) of an edge's producer after its unpad, then after each of its TMs; None if a TM does not
    apply."""
    shapes = [(producer_shape[0], producer_shape[1] - (unpad[0] if unpad else 0),
               producer_shape[2] - (unpad[1] if unpad else 0))]
    try:
        for tm in tms:
            shapes.append(tm_shape(shapes[-1], tm))
    except TMError:
        return None
    return shapes


def _inverse(coords: tuple, shape_in: tuple, tm: tuple) -> tuple:
    """Coordinates (t, r, c) in the TM's input of the given coordinates in its output (numpy arrays); a pad tile
    maps to -1 rows."""
    t, r, c = coords
    _, rin, cin = shape_in
    kind = tm[0]
    if kind == "transpose":
        return t, c, r
    if kind == "broadcast":
        if tm[1] == "r":
            return t, r % rin, c
        if tm[1] == "c":
            return t, r, c % cin
        return t % shape_in[0], r, c
    if kind == "pad":
        r = np.where((r < rin) & (c < cin), r, -1)
        return t, r, np.minimum(c, cin - 1)
    if kind == "tile_broadcast":
        return t, r, c
    n = int(tm[1])
    if kind == "hslice":
        return t // n, r, (t % n) * (cin // n) + c
    if kind == "hstack":
        return t * n + c // cin, r, c % cin
    if kind == "vslice":
        return t // n, (t % n) * (rin // n) + r, c
    if kind == "vstack":
        return t * n + r // rin, r % rin, c
    raise TMError("tm.kind", f"unknown TM {tm!r}", None, kind)


def _block_index(index: np.ndarray, size: int, parts: int) -> np.ndarray:
    """Which of `parts` equal blocks of a dimension of `size` each index falls in (proportional if they do not
    divide evenly, as an inconsistent netlist may have)."""
    if parts <= 1 or size <= 0:
        return np.zeros_like(index)
    if size % parts == 0:
        return index // (size // parts)
    return np.minimum(index * parts // size, parts - 1)


@functools.lru_cache(maxsize=4096)
def edge_reads(producer_shape: tuple, producer_grid: tuple, tms: tuple, unpad: tuple | None, pad: tuple | None,
               consumer_grid: tuple, role: str) -> tuple:
    """Per consumer group, what it reads of the producer per input (`GroupReads`, groups in row-major order);
    none where a TM does not apply or a shape or grid is empty or beyond `MAX_TILES` (an inconsistent netlist).

    producer_shape: (t, rt, ct) of the producer's output (an op) or of one queue entry; producer_grid: the
    producer's grid (its cores, or a queue's buffers). role: "rows" (a group per consumer grid row), "cols" (per
    column) or "both" (per core)."""
    shapes = _tm_shapes(producer_shape, tms, unpad)
    if shapes is None:
        return ()
    shape, out = shapes[0], shapes[-1]
    if pad:
        out = (out[0], out[1] + pad[0], out[2] + pad[1])
    gr, gc = consumer_grid
    groups = gr if role == "rows" else gc if role == "cols" else gr * gc
    if min(*out, *shape, *producer_grid, *consumer_grid) <= 0 or out[0] * out[1] * out[2] > MAX_TILES \
            or groups > MAX_TILES or producer_grid[0] * producer_grid[1] > MAX_TILES:
        return ()
    t, r, c = (a.ravel() for a in np.indices(out, dtype=np.int64))
    row = _block_index(r, out[1], gr)
    col = _block_index(c, out[2], gc)
    group = row if role == "rows" else col if role == "cols" else row * gc + col
    valid = np.ones_like(t, dtype=bool)
    if pad:
        tm_out = shapes[-1]
        valid &= (r < tm_out[1]) & (c < tm_out[2])
    coords = (t, np.where(valid, r, 0), np.where(valid, c, 0))
    for tm, shape_in in zip(reversed(tms), reversed(shapes[:-1])):
        coords = _inverse(coords, shape_in, tm)
    valid &= coords[1] >= 0
    pgr, pgc = producer_grid
    unit = _block_index(coords[1], shape[1], pgr) * pgc + _block_index(coords[2], shape[2], pgc)
    # consumer tile order within a group: t-major, then rows, then columns
    order = np.lexsort((c, r, t, group))
    group, unit, valid, first_t = group[order], unit[order], valid[order], t[order] == 0
    result = []
    bounds = np.searchsorted(group, np.arange(groups + 1))
    for g in range(groups):
        span = slice(bounds[g], bounds[g + 1])
        units = unit[span][valid[span]]
        if units.size == 0:
            result.append(GroupReads(_group_key(g, role, gc), (), 0, 0))
            continue
        looped = unit[span][valid[span] & first_t[span]]
        changes = int(np.count_nonzero(looped[1:] != looped[:-1])) + 1 if looped.size else 1
        first = units[np.sort(np.unique(units, return_index=True)[1])]
        counts = np.bincount(units, minlength=pgr * pgc)
        sources = tuple(((int(u) // pgc, int(u) % pgc), int(counts[u])) for u in first)
        result.append(GroupReads(_group_key(g, role, gc), sources, int(units.size), changes))
    return tuple(result)


def _group_key(g: int, role: str, gc: int) -> tuple:
    """A group's key: ("row", r), ("col", c) or ("core", r, c)."""
    if role == "rows":
        return ("row", g)
    if role == "cols":
        return ("col", g)
    return ("core", g // gc, g % gc)


def consumer_shape(producer_shape: tuple, tms: tuple, unpad: tuple | None, pad: tuple | None) -> tuple | None:
    """(t, rt, ct) the consumer reads through the edge, None if a TM does not apply."""
    shape = (producer_shape[0], producer_shape[1] - (unpad[0] if unpad else 0),
             producer_shape[2] - (unpad[1] if unpad else 0))
    try:
        shape = shape_after_tms(shape, tms)
    except TMError:
        return None
    return (shape[0], shape[1] + (pad[0] if pad else 0), shape[2] + (pad[1] if pad else 0))


@functools.lru_cache(maxsize=64)      # arrays of up to MAX_TILES ids: the periods of one edge are tried in a row
def _core_streams(producer_shape: tuple, tms: tuple, unpad: tuple | None, pad: tuple | None, grid: tuple, t: int,
                  mblock: tuple, ublock: tuple, ublock_order: str) -> np.ndarray | None:
    """The producer tile each core of an eltwise consumer reads at each step of its input stream (t slices in
    order, ublocks in `ublock_order` within the mblock, tiles row-major within the ublock): tile ids (t, r, c
    row-major; -1: padding), one row per core; None where the edge's shape is not the op's or a TM does not
    apply."""
    shapes = _tm_shapes(producer_shape, tms, unpad)
    if shapes is None:
        return None
    shape = shapes[0]
    (gr, gc), (mm, mn), (ur, uc) = grid, mblock, ublock
    tm_out = shapes[-1]
    out = (tm_out[0], tm_out[1] + (pad[0] if pad else 0), tm_out[2] + (pad[1] if pad else 0))
    if out != (t, gr * mm * ur, gc * mn * uc) or min(*shape) <= 0 or t * out[1] * out[2] > MAX_TILES:
        return None
    axes = (gr, gc, t, mm, mn, ur, uc) if ublock_order == "r" else (gr, gc, t, mn, mm, ur, uc)
    i, j, tt, a, b, x, y = (v.ravel() for v in np.indices(axes, dtype=np.int64))
    if ublock_order != "r":
        a, b = b, a
    r, c = i * mm * ur + a * ur + x, j * mn * uc + b * uc + y
    valid = (r < tm_out[1]) & (c < tm_out[2])
    coords = (tt, np.where(valid, r, 0), np.where(valid, c, 0))
    for tm, shape_in in zip(reversed(tms), reversed(shapes[:-1])):
        coords = _inverse(coords, shape_in, tm)
    valid &= coords[1] >= 0
    ids = np.where(valid, (coords[0] * shape[1] + coords[1]) * shape[2] + coords[2], -1)
    return ids.reshape(gr * gc, -1)


def stream_repeats(producer_shape: tuple, tms: tuple, unpad: tuple | None, pad: tuple | None, grid: tuple, t: int,
                   mblock: tuple, ublock: tuple, period: int, ublock_order: str = "r") -> bool | None:
    """Whether every core of an eltwise consumer reads the same producer tiles every `period` tiles of its input
    stream, all t slices included (`_core_streams`): what a kernel broadcast of `period` tiles needs (§2.6: the
    kernel reuses them; the backend refuses a stream that does not repeat). None where the edge's shape is not
    the op's (a fused op whose sub-op broadcasts)."""
    streams = _core_streams(producer_shape, tms, unpad, pad, grid, t, mblock, ublock, ublock_order)
    if streams is None:
        return None
    if period <= 0 or streams.shape[1] % period:
        return False
    chunks = streams.reshape(streams.shape[0], -1, period)
    return bool((chunks == chunks[:, :1, :]).all())


def broadcast_period(producer_shape: tuple, tms: tuple, unpad: tuple | None, pad: tuple | None, grid: tuple, t: int,
                     mblock: tuple, ublock: tuple) -> int:
    """The kernel-broadcast tiles of an eltwise consumer's input (§2.6), as the legacy netlists have them: 1
    where every core reads one tile throughout, else the fewest whole ublocks dividing one t slice of a core's
    block with which every core's stream repeats (`stream_repeats`); 0 where no period shorter than the whole
    stream does (a producer with t > 1 is not broadcast without per-t)."""
    if producer_shape[0] != 1 or not any(tm[0] == "broadcast" for tm in tms):
        return 0
    ublock_tiles = ublock[0] * ublock[1]
    slice_tiles = mblock[0] * mblock[1] * ublock_tiles
    for period in (1, *range(ublock_tiles, slice_tiles + 1, ublock_tiles)):
        if slice_tiles % period == 0 and period < t * slice_tiles and \
                stream_repeats(producer_shape, tms, unpad, pad, grid, t, mblock, ublock, period) is True:
            return period
    return 0
