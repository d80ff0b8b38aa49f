"""splice (n-ary): interleave ublocks (granularity ublock, per core) or t-slices (granularity t) of its inputs.

Attributes `input<N>: [index, length, stride]`. Per output (per core for ublock granularity), repeatedly for
every input in order: skip `index` units, copy `length` units, then advance by `stride` units in total; until
the output is full. Each input must be consumed exactly (backend `ops/nary_bare.cpp` semantics). Ublock
granularity reblocks every input's per-core block into ublocks of the output's ublock shape and scans ublocks
in the output's ublock_order.
"""
from __future__ import annotations

import functools

import numpy as np

from pybuda.netlist import Op

from ..errors import SimulatorError
from .common import TILE, lead_broadcast


def splice_configs(op: Op, n_inputs: int) -> list[tuple[int, int, int]]:
    """(index, length, stride) of every input, from the `input<N>` attributes."""
    cfgs: dict[int, tuple[int, int, int]] = op.attrs.splice or {}
    if sorted(cfgs) != list(range(n_inputs)):
        raise SimulatorError(f"op {op.name!r}: splice needs attributes input0..input{n_inputs - 1}, got "
                             f"{', '.join(f'input{k}' for k in sorted(cfgs)) or 'none'}")
    for k, (index, length, stride) in cfgs.items():
        if index < 0 or length <= 0 or stride < length:
            raise SimulatorError(f"op {op.name!r}: splice input{k} = [{index}, {length}, {stride}] needs index >= 0,"
                                 f" length > 0, stride >= length")
    return [tuple(cfgs[k]) for k in range(n_inputs)]


def _schedule(op_name: str, cfgs: tuple, units_out: int, units_in: tuple[int, ...]) -> list[tuple[int, int]]:
    """For each output unit: (input, input unit)."""
    out: list[tuple[int, int]] = []
    offset = [0] * len(cfgs)
    while len(out) < units_out:
        for k, (index, length, stride) in enumerate(cfgs):
            offset[k] += index
            for j in range(length):
                if len(out) >= units_out:
                    raise SimulatorError(f"op {op_name!r}: splice lengths overrun the output ({units_out} units)")
                if offset[k] + j >= units_in[k]:
                    raise SimulatorError(f"op {op_name!r}: splice reads unit {offset[k] + j} of input {k}, which has "
                                         f"{units_in[k]}")
                out.append((k, offset[k] + j))
            offset[k] += stride
    for k, units in enumerate(units_in):
        if offset[k] != units:
            raise SimulatorError(f"op {op_name!r}: splice consumes {offset[k]} of the {units} units of input {k}; "
                                 f"inputs must be consumed exactly (index + stride must divide the input)")
    return out


@functools.lru_cache(maxsize=256)
def _ublock_tile_map(op_name: str, cfgs: tuple, grid: tuple, mblock: tuple, ublock: tuple, order: str,
                     in_tiles: tuple) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(input index, input tile row, input tile col) for every output tile (row-major over the output)."""
    gr, gc = grid
    mm, mn = mblock
    ur, uc = ublock

    def tile_of(offset: int, tile: int, blocks: tuple[int, int]) -> tuple[int, int]:
        br, bc = blocks
        if order == "c":
            r, c = offset % br, offset // br
        else:
            r, c = offset // bc, offset % bc
        return r * ur + tile // uc, c * uc + tile % uc

    in_blocks = []
    for k, (rt, ct) in enumerate(in_tiles):
        if rt % (gr * ur) or ct % (gc * uc):
            raise SimulatorError(f"op {op_name!r}: splice input {k} ({rt}x{ct} tiles) does not split into {gr}x{gc} "
                                 f"cores of {ur}x{uc} ublocks")
        in_blocks.append((rt // gr // ur, ct // gc // uc))
    sched = _schedule(op_name, cfgs, mm * mn, tuple(br * bc for br, bc in in_blocks))
    rows_out, cols_out = gr * mm * ur, gc * mn * uc
    src_k = np.zeros((rows_out, cols_out), dtype=np.int64)
    src_r = np.zeros_like(src_k)
    src_c = np.zeros_like(src_k)
    for cr in range(gr):
        for cc in range(gc):
            for u, (k, u_in) in enumerate(sched):
                for tile in range(ur * uc):
                    orow, ocol = tile_of(u, tile, (mm, mn))
                    irow, icol = tile_of(u_in, tile, in_blocks[k])
                    br, bc = in_blocks[k]
                    src_k[cr * mm * ur + orow, cc * mn * uc + ocol] = k
                    src_r[cr * mm * ur + orow, cc * mn * uc + ocol] = cr * br * ur + irow
                    src_c[cr * mm * ur + orow, cc * mn * uc + ocol] = cc * bc * uc + icol
    return src_k, src_r, src_c


def splice(op: Op, ins: list[np.ndarray]) -> np.ndarray:
    if not ins:
        raise SimulatorError(f"op {op.name!r}: splice needs at least one input")
    cfgs = tuple(splice_configs(op, len(ins)))
    granularity = op.attrs.granularity or "ublock"
    ins = lead_broadcast(ins)
    if granularity == "t":
        for k, x in enumerate(ins):
            if x.shape[-2:] != ins[0].shape[-2:]:
                raise SimulatorError(f"op {op.name!r}: splice granularity t needs equal R x C on every input; input "
                                     f"{k} is {x.shape[-2:]} vs {ins[0].shape[-2:]}")
        sched = _schedule(op.name, cfgs, op.t, tuple(x.shape[-3] for x in ins))
        return np.stack([ins[k][..., j, :, :] for k, j in sched], axis=-3)
    if granularity != "ublock":
        raise SimulatorError(f"op {op.name!r}: splice granularity must be ublock or t, got {granularity!r}")
    t = op.t
    for k, x in enumerate(ins):
        if x.shape[-3] != t:
            raise SimulatorError(f"op {op.name!r}: splice input {k} has t={x.shape[-3]}, the op t={t}")
    in_tiles = tuple((x.shape[-2] // TILE, x.shape[-1] // TILE) for x in ins)
    src_k, src_r, src_c = _ublock_tile_map(op.name, cfgs, tuple(op.grid_size), tuple(op.mblock), tuple(op.ublock),
                                           op.ublock_order, in_tiles)
    # all input tiles in one array: (..., t, tiles, 32, 32), then gather
    tiles = []
    base = []
    start = 0
    for x in ins:
        *lead, tt, rows, cols = x.shape
        rt, ct = rows // TILE, cols // TILE
        v = x.reshape(*lead, tt, rt, TILE, ct, TILE).swapaxes(-3, -2).reshape(*lead, tt, rt * ct, TILE, TILE)
        tiles.append(v)
        base.append((start, ct))
        start += rt * ct
    allt = np.concatenate(tiles, axis=-3) if len(tiles) > 1 else tiles[0]
    starts = np.array([b[0] for b in base])[src_k]
    widths = np.array([b[1] for b in base])[src_k]
    flat = starts + src_r * widths + src_c
    rows_out, cols_out = src_k.shape
    out = allt[..., flat.ravel(), :, :]
    *lead, tt = out.shape[:-3]
    out = out.reshape(*lead, tt, rows_out, cols_out, TILE, TILE).swapaxes(-3, -2)
    return np.ascontiguousarray(out).reshape(*lead, tt, rows_out * TILE, cols_out * TILE)
