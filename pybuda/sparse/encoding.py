"""Operands of the backend's sparse ("identity") matmul for a constant sparse matrix (netlist-format.md §1.3).

For each grid row of the op, the non-zero 32x32 tiles of that row's block of the matrix are deduplicated into
the sparse-tiles operand (input 0: one tile row per grid row) and listed in the encoding (input 2, RawUInt32):
strips of u_kt tile rows of the activations, each with the output ublocks that read it and, per tile, the
position in the ublock and the index of its sparse tile. The word layout is the one
`pybuda.backend_sim.kernels.sparse.decode` reads (documented there and in docs/simulator.md).
"""
from __future__ import annotations

import dataclasses
import functools

import numpy as np

from ..errors import InternalError
from .matrix import TILE, SparseMatrix

U16_PER_TILE = 2 * TILE * TILE  # one 32x32 tile of uint32 encoding words


def bits_for(n: int) -> int:
    """Bits to index n values (at least 1): the backend's block_tile_dim_bits rule."""
    return max(1, (int(n) - 1).bit_length())


def encode(entries, *, t: int, outer_r: int, inner_r: int, u_kt: int, ptr_bits: int,
           ublock_bits: int | None = None, min_tiles: int = 1) -> np.ndarray:
    """Encoding words (uint32 values as float64, whole 1024-word tiles) of sparse-tile entries.

    `entries`: {(t-slice, output tile row, activation tile row): sparse tile index}. Strips come in increasing
    order per t-slice (an empty strip for a t-slice with no entries); a strip that does not fit the rest of an
    encoding tile starts the next one (the previous strip is marked last in its tile).
    """
    ublock_bits = ptr_bits if ublock_bits is None or ublock_bits <= 0 else ublock_bits
    d_bits = bits_for(u_kt)
    tile_bits = 16 - ptr_bits
    if (1 << (tile_bits - d_bits) if tile_bits >= d_bits else 0) < inner_r:
        raise InternalError(f"sparse_tile_ptr_bits={ptr_bits} leaves too few bits for ublock_rt={inner_r}, u_kt={u_kt}")
    by_strip: dict[tuple[int, int], dict[int, list[int]]] = {}
    for (b, out_row, act_row), idx in sorted(entries.items()):
        idx = int(idx)
        if idx >= (1 << ptr_bits):
            raise InternalError(f"sparse tile index {idx} needs more than {ptr_bits} bits")
        if not 0 <= b < t or not 0 <= out_row < outer_r * inner_r:
            raise InternalError(f"entry {(b, out_row, act_row)} outside t={t}, {outer_r * inner_r} output tile rows")
        out_r, in_r = divmod(out_row, inner_r)
        strip, in_d = divmod(act_row, u_kt)
        by_strip.setdefault((b, strip), {}).setdefault(out_r, []).append(
            (in_r, in_d, (idx << tile_bits) | (in_r << d_bits) | in_d))
    tiles: list[list[int]] = []
    cur: list[int] = []
    last_enc1 = None
    for b in range(t):
        strips = sorted(s for bb, s in by_strip if bb == b) or [0]
        for si, s in enumerate(strips):
            body: list[int] = []
            ublocks = by_strip.get((b, s), {})
            for out_r in sorted(ublocks):
                words = [w for _, _, w in sorted(ublocks[out_r])]
                if len(words) > (1 << (16 - ublock_bits)):
                    raise InternalError(f"{len(words)} tiles in one ublock exceed the {16 - ublock_bits}-bit count")
                body += [((len(words) % (1 << (16 - ublock_bits))) << ublock_bits) | out_r] + words
            enc = s | ((1 << 30) if si == len(strips) - 1 else 0)
            strip = [enc & 0xFFFF, enc >> 16, len(ublocks)] + body
            if len(strip) > U16_PER_TILE:
                raise InternalError(f"strip {s} needs {len(strip)} 16-bit words, more than one encoding tile holds")
            if len(cur) + len(strip) > U16_PER_TILE:
                cur[last_enc1] |= 1 << 15  # last strip in this tile: the next one starts the next tile
                tiles.append(cur)
                cur = []
            last_enc1 = len(cur) + 1
            cur += strip
    tiles.append(cur)
    while len(tiles) < min_tiles:
        tiles.append([])
    u16 = np.zeros(len(tiles) * U16_PER_TILE, dtype="<u2")
    for i, tile in enumerate(tiles):
        u16[i * U16_PER_TILE:i * U16_PER_TILE + len(tile)] = tile
    return u16.view("<u4").astype(np.float64)


@dataclasses.dataclass(frozen=True)
class SparseOperands:
    """The identity-matmul operands of one op model: host arrays (1, rows, cols) and the attributes."""

    sparse_tiles: np.ndarray        # (1, grid_rows * 32, num_sparse_tiles * 32)
    encoding: np.ndarray            # (1, grid_rows * 32, num_index_tiles * 32), uint32 values as float64
    num_sparse_tiles: int
    num_index_tiles: int
    sparse_tile_ptr_bits: int
    sparse_ublock_idx_bits: int
    nz_tiles_per_core: int          # the most encoded tiles of any grid row (the cycle model's indices_len)


def _first_occurrence(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(position of each distinct key's first occurrence, in that order; rank of every key among them)."""
    _, first, inverse = np.unique(keys, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return first[order], rank[inverse.ravel()]


def unique_tiles(contents: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(unique tiles, index of each input tile), deterministic (first occurrence order)."""
    flat = np.ascontiguousarray(contents.reshape(len(contents), -1))
    first, rank = _first_occurrence(flat.view(np.dtype((np.void, flat.dtype.itemsize * flat.shape[1]))).ravel())
    return contents[first], rank


@dataclasses.dataclass(frozen=True)
class TileTable:
    """The non-zero 32x32 tiles of a sparse matrix, deduplicated once: tile row and column of each (sorted by
    row, then column), the index of its contents among `distinct` (first-occurrence order)."""

    rows: np.ndarray
    cols: np.ndarray
    ids: np.ndarray
    distinct: np.ndarray     # (n distinct, 32, 32)


@functools.lru_cache(maxsize=256)
def tile_table(matrix: SparseMatrix) -> TileTable:
    """The deduplicated tiles of `matrix` (cached per matrix)."""
    rows, cols, contents = matrix.tiles()
    distinct, ids = unique_tiles(contents) if len(contents) else (np.zeros((0, TILE, TILE), np.float32),
                                                                    np.zeros(0, np.int64))
    return TileTable(rows, cols, ids, distinct)


@functools.lru_cache(maxsize=64)
def sparse_operands(matrix: SparseMatrix, grid_rows: int, mblock_m: int, ublock_rt: int, u_kt: int,
                    t: int = 1) -> SparseOperands:
    """Encode a tile-padded sparse matrix for an identity matmul whose output is split into t slices (of
    consecutive row blocks) over `grid_rows` rows of cores."""
    rt = matrix.shape[0] // TILE
    if rt % (t * grid_rows) or rt // (t * grid_rows) != mblock_m * ublock_rt:
        raise InternalError(f"{rt} tile rows do not split into t={t} slices of {grid_rows} grid rows of mblock "
                            f"{mblock_m} x ublock {ublock_rt}")
    table = tile_table(matrix)
    rows_core = rt // (t * grid_rows)
    per_row = []
    for r in range(grid_rows):
        keys, ids = [], []
        for b in range(t):
            start = b * rt // t + r * rows_core
            lo, hi = np.searchsorted(table.rows, [start, start + rows_core])
            keys += [(b, int(tr) - start, int(tc)) for tr, tc in zip(table.rows[lo:hi], table.cols[lo:hi])]
            ids.append(table.ids[lo:hi])
        row_ids = np.concatenate(ids)
        if row_ids.size:
            first, index = _first_occurrence(row_ids)
            unique = table.distinct[row_ids[first]]
        else:
            unique, index = np.zeros((1, TILE, TILE), np.float32), np.zeros(0, np.int64)
        per_row.append((dict(zip(keys, index.tolist())), unique))
    n_unique = max(len(u) for _, u in per_row)
    ptr_bits = bits_for(n_unique)
    ublock_bits = bits_for(mblock_m)
    encodings = [encode(entries, t=t, outer_r=mblock_m, inner_r=ublock_rt, u_kt=u_kt, ptr_bits=ptr_bits,
                        ublock_bits=ublock_bits) for entries, _ in per_row]
    n_index = max(len(e) for e in encodings) // (TILE * TILE)
    sparse = np.zeros((1, grid_rows * TILE, n_unique * TILE), dtype=np.float32)
    encoding = np.zeros((1, grid_rows * TILE, n_index * TILE), dtype=np.float64)
    for r, ((_, unique), words) in enumerate(zip(per_row, encodings)):
        sparse[0, r * TILE:(r + 1) * TILE, :len(unique) * TILE] = np.concatenate(list(unique), axis=1)
        block = np.zeros(n_index * TILE * TILE)
        block[:len(words)] = words
        encoding[0, r * TILE:(r + 1) * TILE] = block.reshape(TILE, n_index * TILE)
    return SparseOperands(sparse, encoding, n_unique, n_index, ptr_bits, ublock_bits,
                          max(len(entries) for entries, _ in per_row))


@dataclasses.dataclass(frozen=True)
class CoreFigures:
    """What one core's encoding holds, for the core with the most non-zero tiles: non-zero tiles, non-zero
    ublocks (output ublock x strip holding a tile) and non-zero strips (t slice x u_kt-wide activation block
    holding a tile): the inputs of the backend's sparse-matmul cycle formulas (`sparse_indices`,
    `sparse_nz_ublocks`, `sparse_nz_strips`)."""

    nz_tiles: int
    nz_ublocks: int
    nz_strips: int


def busiest_core_figures(rows: np.ndarray, cols: np.ndarray, *, k_tiles: int, u_kt: int, grid_rows: int,
                         mblock_m: int, ublock_rt: int) -> CoreFigures:
    """`CoreFigures` of a sparse matmul whose non-zero tiles sit at output tile rows `rows` and activation tile
    columns `cols` (0 <= cols < k_tiles), laid out as the op does: t slices of `grid_rows` cores of
    `mblock_m * ublock_rt` tile rows each."""
    core_rows = mblock_m * ublock_rt
    if len(rows) == 0:
        return CoreFigures(0, 0, 0)
    ti, local = np.divmod(np.asarray(rows), grid_rows * core_rows)
    core, row = np.divmod(local, core_rows)
    mine = core == np.argmax(np.bincount(core, minlength=grid_rows))
    strip = ti[mine] * -(-k_tiles // u_kt) + np.asarray(cols)[mine] // u_kt
    ublock = strip * mblock_m + row[mine] // ublock_rt
    return CoreFigures(int(mine.sum()), len(np.unique(ublock)), len(np.unique(strip)))


def encoding_fits(n_unique: int, mblock_m: int, ublock_rt: int, u_kt: int) -> bool:
    """Whether tile indices, ublock rows and tile positions fit the 16-bit encoding words."""
    ptr_bits, ublock_bits = bits_for(n_unique), bits_for(mblock_m)
    return (ptr_bits + bits_for(ublock_rt) + bits_for(u_kt) <= 16 and ublock_bits <= 15
            and ublock_rt * u_kt <= (1 << (16 - ublock_bits)))
