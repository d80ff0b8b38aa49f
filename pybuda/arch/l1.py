"""L1 footprint of one core of an op (netlist-format.md §3.8): output and intermediate buffers, one input buffer
per input (an identity matmul's sparse tiles and encoding held whole and read in place instead; a prologued input
kept raw (pre-TM, `pybuda.arch.movement.prologue_layout`) besides its buffer), fork-join buffering and extra
overlay space.

The compiler sizes input buffers as the backend does (with ~32 KB latency hiding, `latency_hiding=True`) against
the compiler-usable L1; the netlist validator checks the legal minimum (two granules) against the backend's
data-buffer space. Both use this one function.
"""
from __future__ import annotations

import dataclasses

from .operands import OpGeometry, input_buffer_tiles, input_granule

OVERLAY_INCLUDED_BYTES = 64 * 1024   # overlay blob space every core already has (L1 reservation)


def overlay_extra_bytes(overlay_size: int) -> int:
    """L1 data-buffer bytes an op's `overlay_size` takes beyond the blob every core already has."""
    return max(0, overlay_size - OVERLAY_INCLUDED_BYTES)


@dataclasses.dataclass(frozen=True, slots=True)
class InputBuffer:
    """How one input of an op lives in L1.

    in_place_tiles: > 0 for an input preloaded whole and read in place (an identity matmul's sparse tiles and
    encoding), instead of an input buffer; raw_tiles: a pre-TM prologued input's raw copy, held besides the input
    buffer it is re-streamed into; min_size_tiles: input_buf_min_size_tiles (fork-join buffering, a transformed
    prologue's whole post-TM data); dram_io_tiles: input_dram_io_buf_size_tiles."""

    tile_bytes: int
    in_place_tiles: float = 0
    raw_tiles: float = 0
    min_size_tiles: int = 0
    dram_io_tiles: int = 0


def footprint(op: OpGeometry, inputs: list[InputBuffer], *, out_tile_bytes: int, intermed_tile_bytes: int,
              intermed_separate: bool, buf_size_mb: int = 2, gradient_op: bool = False,
              fused_intermed_tiles: int = 0, overlay_size: int = 0, latency_hiding: bool = True) -> dict[str, int]:
    """L1 bytes one core of `op` needs, by buffer kind.

    intermed_separate: the intermediate format differs from the output's, so matmul, reduce-z and gradient ops
    keep an intermediate buffer of their own (one mblock); fused ops keep `fused_intermed_tiles` instead."""
    mblock_tiles = op.mblock_tiles
    out = (op.t if gradient_op else max(buf_size_mb, 1)) * mblock_tiles * out_tile_bytes
    inter = 0
    if fused_intermed_tiles:
        inter = fused_intermed_tiles * intermed_tile_bytes
    elif intermed_separate and (gradient_op or op.type == "matmul" or (op.type == "reduce" and op.attrs.dim == "z")):
        inter = mblock_tiles * intermed_tile_bytes
    streamed = prologue = fork_join = 0
    for index, buf in enumerate(inputs):
        prologue += int((buf.in_place_tiles + buf.raw_tiles) * buf.tile_bytes)
        if buf.in_place_tiles:
            continue
        kb = op.attrs.kernel_broadcast_tiles(index)
        if kb:
            tiles = kb
        else:
            granule = input_granule(op, index)
            tiles = input_buffer_tiles(granule, buf.tile_bytes, latency_hiding=latency_hiding)
            with_min = input_buffer_tiles(granule, buf.tile_bytes, latency_hiding=latency_hiding,
                                          min_tiles=buf.min_size_tiles)
            fork_join += (with_min - tiles) * buf.tile_bytes
        streamed += (tiles + buf.dram_io_tiles) * buf.tile_bytes
    return {"output": out, "intermediate": inter, "inputs": streamed, "prologue": prologue,
            "overlay": overlay_extra_bytes(overlay_size), "input_buf_min_size": fork_join}
