"""Byte sizes of tiles, queue buffers and op buffers (netlist-format.md §1.5, §3.5, §3.8)."""
from __future__ import annotations

from ..dataformat import DataFormat

_BYTES_PER_DATUM = {
    DataFormat.Float32: 4, DataFormat.Int32: 4, DataFormat.RawUInt32: 4,
    DataFormat.Float16: 2, DataFormat.Float16_b: 2, DataFormat.UInt16: 2, DataFormat.RawUInt16: 2,
    DataFormat.Bfp8: 1, DataFormat.Bfp8_b: 1, DataFormat.Int8: 1, DataFormat.UInt8: 1, DataFormat.Lf8: 1,
    DataFormat.Fp8_e4m3: 1, DataFormat.RawUInt8: 1,
    DataFormat.Bfp4: 0.5, DataFormat.Bfp4_b: 0.5, DataFormat.Bfp2: 0.25, DataFormat.Bfp2_b: 0.25,
}
TILE_HEADER_BYTES = 16
QUEUE_HEADER_BYTES = 32
NOC_ALIGN = 32

_cache: dict = {}


def tile_bytes(df: DataFormat, tile_dim: tuple = (32, 32), tilized: bool = True) -> int:
    """Bytes of one tile: data (+ one shared exponent byte per 16 values for Bfp) + 16 B header, padded to
    32 B when tilized (`size_lib.cpp: get_tile_size_in_bytes`); bare data when untilized."""
    key = (df, tile_dim, tilized)
    r = _cache.get(key)
    if r is None:
        h, w = tile_dim
        data = int(h * w * _BYTES_PER_DATUM[df])
        if not tilized:
            r = data
        else:
            exps = -(-(h * w) // 256) * 16 if df.is_bfp else 0   # one exponent per 16 values, 16 B granules
            raw = data + exps + TILE_HEADER_BYTES
            r = -(-raw // NOC_ALIGN) * NOC_ALIGN
        _cache[key] = r
    return r


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
