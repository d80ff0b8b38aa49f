"""Byte sizes of queue buffers and tile alignment rules (netlist-format.md §1.5, §3.5); tile sizes are
`pybuda.dataformat.tile_bytes`."""
from __future__ import annotations

from ..dataformat import DataFormat, tile_bytes

QUEUE_HEADER_BYTES = 32


def tile_data_aligned(df: DataFormat, tile_dim: tuple) -> bool:
    """The backend needs tile sizes 32 B aligned for the NOC: Bfp2 with 1x32 / 2x32 tiles and Bfp4 with 1x32
    tiles are not (`verify_complex_settings`)."""
    if df in (DataFormat.Bfp2, DataFormat.Bfp2_b):
        return tile_dim not in ((1, 32), (2, 32))
    if df in (DataFormat.Bfp4, DataFormat.Bfp4_b):
        return tile_dim != (1, 32)
    return True


def queue_buffer_bytes(q, tilized: bool = True) -> int:
    """Bytes of one DRAM/host buffer of a queue: entries x entry + 32 B header (`get_buffer_range`); entries hold
    tilized tiles (with headers) unless the producer untilizes."""
    return q.entries * q.buffer_tiles * tile_bytes(q.df, q.effective_tile_dim, tilized) + QUEUE_HEADER_BYTES
