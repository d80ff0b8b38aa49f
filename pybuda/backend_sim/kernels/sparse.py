"""Sparse ("identity") matmul: the backend's strip encoding, a decoder, an encoder and the kernel.

Operands (netlist-format.md §1.3, backend `ops/mm_bare.cpp`): input 0 = the unique non-zero 32x32 tiles of the
sparse left matrix (one row of tiles per grid row), input 1 = the dense right matrix (activations), input 2 =
the encoding (RawUInt32), optional input 3 = bias. The encoding of one grid row is a stream of 16-bit words
(the uint32 values of that row's block, row-major, each split low half first):

    strip  := enc0, enc1, nz_ublocks, ublock*            (6 bytes + 2 bytes per ublock word)
              strip_index = ((enc1 << 16) | enc0) & (2**30 - 1)    -- K strip of u_kt tile rows of input 1
              enc1 bit 14 = last strip of the output t-slice, enc1 bit 15 = last strip in this encoding tile
              (the next strip then starts at the next 1024-word tile)
    ublock := header, tile*     header: low sparse_ublock_idx_bits = output ublock row (0..mblock_m-1),
                                        high bits = number of tiles (0 means 2**(16 - sparse_ublock_idx_bits))
    tile   := low (16 - sparse_tile_ptr_bits) bits = (in_r << block_tile_dim_bits) | in_d,
              high sparse_tile_ptr_bits = index of the tile in input 0
    block_tile_dim_bits = max(1, ceil(log2(u_kt))); sparse_ublock_idx_bits defaults to sparse_tile_ptr_bits.

Each encoded tile contributes  out[t, ublock_row*ublock_rt + in_r, :] += sparse_tile @ in1[strip*u_kt + in_d, :]
(tile rows of input 1 counted across its t-slices) for every output column of the core.
"""
from __future__ import annotations

import functools

import numpy as np
import torch

from pybuda.netlist import Op
from pybuda.sparse.encoding import U16_PER_TILE, bits_for, encode

from ..errors import SimulatorError
from ..formats import quantize
from .common import TILE, expect_inputs, int_math
from .matmul import fidelity_pairs

__all__ = ["bits_for", "decode", "encode", "encoding_params", "random_operands", "sparse_matmul"]


def encoding_params(op: Op) -> dict:
    a = op.attrs
    ptr_bits = a.sparse_tile_ptr_bits or 0
    if ptr_bits <= 0 or ptr_bits >= 16:
        raise SimulatorError(f"op {op.name!r}: identity matmul needs 0 < sparse_tile_ptr_bits < 16, got {ptr_bits}")
    ublock_bits = a.sparse_ublock_idx_bits or 0
    if ublock_bits <= 0:
        ublock_bits = ptr_bits
    u_kt = op.geometry.u_kt
    return {"ptr_bits": ptr_bits, "ublock_bits": ublock_bits, "u_kt": u_kt, "d_bits": bits_for(u_kt),
            "inner_r": op.ublock[0], "outer_r": op.mblock[0], "t": op.t}


def decode(words: np.ndarray, *, ptr_bits: int, ublock_bits: int, u_kt: int, d_bits: int, inner_r: int,
           outer_r: int, t: int, where: str = "") -> list[tuple[int, int, int, int]]:
    """Decode one grid row's encoding into (t, output tile row, input-1 tile row, sparse tile index) entries."""
    u16 = np.ascontiguousarray(np.asarray(words, dtype=np.float64).astype(np.uint64).astype("<u4")).view("<u2")
    n = len(u16)
    tile_bits = 16 - ptr_bits
    r_bits = tile_bits - d_bits
    if r_bits < 0 or (1 << r_bits) < inner_r or (1 << d_bits) < u_kt:
        raise SimulatorError(f"{where}: sparse_tile_ptr_bits={ptr_bits} leaves too few bits for ublock_rt={inner_r}"
                             f", u_kt={u_kt}")
    entries: list[tuple[int, int, int, int]] = []
    ptr = 0
    tile_base = 0
    batch = 0
    while batch < t:
        if ptr + 3 > n:
            raise SimulatorError(f"{where}: encoding ends inside strip header at word {ptr // 2} (t-slice {batch} of "
                                 f"{t} not finished: no strip marked last_strip_in_row)")
        enc0, enc1, nz_ublocks = int(u16[ptr]), int(u16[ptr + 1]), int(u16[ptr + 2])
        strip = ((enc1 << 16) | enc0) & ((1 << 30) - 1)
        last_in_row = bool(enc1 & (1 << 14))
        last_in_tile = bool(enc1 & (1 << 15))
        arr = ptr + 3
        pos = arr
        for _ in range(nz_ublocks):
            if pos >= n:
                raise SimulatorError(f"{where}: encoding ends inside strip {strip}")
            header = int(u16[pos])
            out_r = header & ((1 << ublock_bits) - 1)
            count = header >> ublock_bits or (1 << (16 - ublock_bits))
            if out_r >= outer_r:
                raise SimulatorError(f"{where}: strip {strip} names ublock row {out_r}, but mblock_m is {outer_r}")
            if pos + 1 + count > n:
                raise SimulatorError(f"{where}: encoding ends inside strip {strip}")
            for word in u16[pos + 1:pos + 1 + count]:
                word = int(word)
                pos_in_ublock = word & ((1 << tile_bits) - 1)
                in_r, in_d = pos_in_ublock >> d_bits, pos_in_ublock & ((1 << d_bits) - 1)
                if in_r >= inner_r or in_d >= u_kt:
                    raise SimulatorError(f"{where}: strip {strip} encodes tile position (r={in_r}, d={in_d}) outside "
                                         f"the ublock (ublock_rt={inner_r}, u_kt={u_kt})")
                entries.append((batch, out_r * inner_r + in_r, strip * u_kt + in_d, word >> tile_bits))
            pos += 1 + count
        if last_in_tile:
            tile_base += U16_PER_TILE
            ptr = tile_base
        else:
            ptr = pos
        batch += int(last_in_row)
    return entries


@functools.lru_cache(maxsize=64)
def _decode_cached(words: bytes, key: tuple) -> np.ndarray:
    """Decoded entries of one encoding block as a read-only (E, 4) int64 array of (t, output tile row, input-1
    tile row, sparse tile index)."""
    params = dict(key[:-1])
    entries = decode(np.frombuffer(words, dtype=np.float64), where=key[-1], **params)
    arr = np.array(entries, dtype=np.int64).reshape(-1, 4)
    arr.flags.writeable = False
    return arr


_CHUNK_BYTES = 64 << 20  # bound on one gathered (..., chunk, 32, C) block of input-1 tile rows


def _merge_entries(entries: np.ndarray, tiles: np.ndarray, *, rows_core: int, k_tiles: int,
                   where: str) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Validate one block's entries and merge those naming the same (t, output row, input-1 row).

    Returns (flat output tile row b*rows_core + out_rt, input-1 tile row, tile index, extra tiles): one entry per
    distinct position, sorted; an entry whose position repeats refers to tiles.shape[0] + i, extra tile i being the
    float32 sum of the repeated tiles in encoding order (the left matrix the dense product would build, before the
    fidelity model truncates it)."""
    n_sparse = tiles.shape[0]
    b, out_rt, act_rt, s = entries.T
    bad = (s >= n_sparse) | (act_rt >= k_tiles) | (out_rt >= rows_core)
    if bad.any():
        i = int(np.argmax(bad))
        if s[i] >= n_sparse:
            raise SimulatorError(f"{where}: sparse tile index {s[i]} but input 0 holds {n_sparse} tiles per row")
        raise SimulatorError(f"{where}: entry (t={b[i]}, out row {out_rt[i]}, in1 row {act_rt[i]}) outside the "
                             f"operands ({rows_core} output tile rows, {k_tiles} input-1 tile rows)")
    key = (b * rows_core + out_rt) * k_tiles + act_rt
    uniq, first, inverse, counts = np.unique(key, return_index=True, return_inverse=True, return_counts=True)
    tile_idx = s[first]
    extra = np.zeros((0, TILE, TILE), dtype=np.float32)
    if len(uniq) < len(key):
        dup_groups = np.flatnonzero(counts > 1)
        slot = np.full(len(uniq), -1, dtype=np.int64)
        slot[dup_groups] = np.arange(len(dup_groups))
        members = np.flatnonzero(counts[inverse] > 1)  # entries of repeated positions, in encoding order
        extra = np.zeros((len(dup_groups), TILE, TILE), dtype=np.float32)
        np.add.at(extra, slot[inverse[members]], tiles[s[members]])  # sequential float32 adds, as left += tile
        tile_idx = tile_idx.copy()
        tile_idx[dup_groups] = n_sparse + np.arange(len(dup_groups))
    return uniq // k_tiles, uniq % k_tiles, tile_idx, extra


def sparse_matmul(op: Op, ins: list[np.ndarray]) -> np.ndarray:
    """Identity matmul: decode each grid row's encoding (and fracture group) into entries, multiply each entry's
    input-0 tile with its input-1 tile row under the fidelity model and add the product into its output tile row,
    round to acc_df; a 4th input (bias) is added as is (no row broadcast, as in the backend golden model).

    Work and memory are proportional to the number of encoded tiles (the sparse left matrix is never built):
    the fidelity model truncates elementwise, so it is applied once to the input-0 tiles and to input 1, and the
    entries' products are computed in chunks of batched 32x32 @ 32xC matmuls and scattered with index_add_.
    """
    has_bias = bool(op.attrs.bias)
    expect_inputs(op, ins, 4 if has_bias else 3)
    sparse_in, act, enc = ins[0], ins[1], ins[2]
    gr, gc = op.grid_size
    ff = fracture_factor(op)
    if ff < 1 or gc % ff:
        raise SimulatorError(f"op {op.name!r}: fracture_factor {ff} must divide grid columns {gc}")
    params = encoding_params(op)
    t = op.t
    rows_core = op.mblock[0] * op.ublock[0]
    for name, x in (("input 0 (sparse tiles)", sparse_in), ("input 2 (encoding)", enc)):
        if int(np.prod(x.shape[:-3], dtype=np.int64)) != 1:
            raise SimulatorError(f"op {op.name!r}: {name} must be the same for every input of the microbatch "
                                 f"(a prologue / ram operand)")
        if x.shape[-2] % gr or x.shape[-1] % ff:
            raise SimulatorError(f"op {op.name!r}: {name} does not split into grid rows {gr} x fracture {ff}")
    sp = sparse_in.reshape(sparse_in.shape[-3:])
    en = enc.reshape(enc.shape[-3:])
    act_t, k_rows, cols = act.shape[-3:]
    if k_rows % TILE:
        raise SimulatorError(f"op {op.name!r}: input 1 has {k_rows} rows per t-slice, not whole {TILE}-row tiles")
    k_tiles = act_t * (k_rows // TILE)
    lead = act.shape[:-3]
    act_tiles = act.reshape(lead + (k_tiles, TILE, cols))
    out_cols_per_group = cols // ff
    integer = int_math(op)
    n_rows = t * gr * rows_core  # output tile rows over all t-slices and grid rows: b * gr*rows_core + row

    # decode and validate every (grid row, fracture group); collect their tiles into one block
    tile_blocks: list[np.ndarray] = []
    n_tiles = 0
    groups: list[list[tuple[np.ndarray, np.ndarray, np.ndarray]]] = [[] for _ in range(ff)]
    for r in range(gr):
        for f in range(ff):
            rows = slice(r * sp.shape[-2] // gr, (r + 1) * sp.shape[-2] // gr)
            sp_block = sp[0, rows, f * sp.shape[-1] // ff:(f + 1) * sp.shape[-1] // ff]
            en_block = en[:, r * en.shape[-2] // gr:(r + 1) * en.shape[-2] // gr,
                          f * en.shape[-1] // ff:(f + 1) * en.shape[-1] // ff]
            where = f"op {op.name!r} encoding (grid row {r}, fracture {f})"
            entries = _decode_cached(np.ascontiguousarray(en_block, dtype=np.float64).tobytes(),
                                     tuple(sorted(params.items())) + (where,))
            n_sparse = sp_block.shape[-1] // TILE
            if len(entries) == 0:
                continue
            tiles = np.ascontiguousarray(
                sp_block[:TILE, :n_sparse * TILE].reshape(TILE, n_sparse, TILE).transpose(1, 0, 2), dtype=np.float32)
            flat_row, act_rt, tile_idx, extra = _merge_entries(entries, tiles, rows_core=rows_core, k_tiles=k_tiles,
                                                               where=where)
            b, out_rt = flat_row // rows_core, flat_row % rows_core
            groups[f].append((b * (gr * rows_core) + r * rows_core + out_rt, act_rt, tile_idx + n_tiles))
            tile_blocks += [tiles, extra]
            n_tiles += len(tiles) + len(extra)
    all_tiles = np.concatenate(tile_blocks) if tile_blocks else np.zeros((0, TILE, TILE), dtype=np.float32)

    # the fidelity model truncates elementwise: slice the tiles and input 1 once, gather from the slices
    pairs = [(torch.from_numpy(np.ascontiguousarray(lhs)), torch.from_numpy(np.ascontiguousarray(rhs)))
             for lhs, rhs in fidelity_pairs(all_tiles, act_tiles, op.math_fidelity, integer)]
    dtype = pairs[0][1].dtype
    itemsize = pairs[0][1].element_size()
    axis = len(lead)
    out = np.zeros(lead + (t, gr * rows_core * TILE, cols), dtype=np.float64 if integer else np.float32)
    for f in range(ff):
        cslice = slice(f * out_cols_per_group, (f + 1) * out_cols_per_group)
        part = torch.zeros(lead + (n_rows, TILE, out_cols_per_group), dtype=dtype)
        if groups[f]:
            out_idx, act_idx, tile_idx = (torch.from_numpy(np.concatenate(a)) for a in zip(*groups[f]))
            rhs_f = [rhs[..., cslice] for _, rhs in pairs]
            per_entry = max(1, int(np.prod(lead, dtype=np.int64)) * TILE * out_cols_per_group * itemsize)
            chunk = max(1, _CHUNK_BYTES // per_entry)
            for c0 in range(0, len(out_idx), chunk):
                sel = slice(c0, c0 + chunk)
                prod = None
                for (lhs, _), rhs in zip(pairs, rhs_f):
                    term = torch.matmul(lhs.index_select(0, tile_idx[sel]), rhs.index_select(axis, act_idx[sel]))
                    prod = term if prod is None else prod + term
                part.index_add_(axis, out_idx[sel], prod)
        out[..., cslice] = part.numpy().reshape(lead + (t, gr * rows_core * TILE, out_cols_per_group))
    out = quantize(out, op.effective_acc_df)
    if has_bias:
        out = quantize(out + ins[3], op.effective_acc_df)
    return out


def fracture_factor(op: Op) -> int:
    """Column groups an identity matmul's encoding is split into (`fracture_factor`, default 1)."""
    ff = op.attrs.fracture_factor
    return 1 if ff is None else ff


def random_operands(op: Op, sparse_shape: tuple[int, int, int], encoding_shape: tuple[int, int, int],
                    act_shape: tuple[int, int, int], rng: np.random.Generator, density: float = 0.3,
                    ) -> tuple[np.ndarray, np.ndarray, dict]:
    """Random valid (input 0, input 2) arrays of the given (t, R, C) element shapes for an identity matmul,
    plus the chosen {(grid_row, t, out_row, in1_row): tile} pattern (for references). Input-1 shape after TMs.
    """
    params = encoding_params(op)
    gr, gc = op.grid_size
    ff = fracture_factor(op)
    if ff != 1:
        raise SimulatorError(f"op {op.name!r}: random stimulus supports fracture_factor 1 only")
    n_sparse = sparse_shape[-1] // TILE
    max_tiles = min(n_sparse, 1 << params["ptr_bits"])
    rows_core = op.mblock[0] * op.ublock[0]
    k_tiles = act_shape[0] * act_shape[1] // TILE
    sparse = np.zeros(sparse_shape, dtype=np.float32)
    encoding = np.zeros(encoding_shape, dtype=np.float64)
    pattern: dict = {}
    rows_per_core_sparse = sparse_shape[1] // gr
    rows_per_core_enc = encoding_shape[1] // gr
    for r in range(gr):
        tiles = rng.uniform(-1, 1, (max_tiles, TILE, TILE)).astype(np.float32)
        for s in range(max_tiles):
            sparse[0, r * rows_per_core_sparse:r * rows_per_core_sparse + TILE, s * TILE:(s + 1) * TILE] = tiles[s]
        entries = {}
        for b in range(op.t):
            for out_rt in range(rows_core):
                for k in range(k_tiles):
                    if rng.random() < density:
                        entries[(b, out_rt, k)] = int(rng.integers(0, max_tiles))
        words_capacity = encoding_shape[0] * rows_per_core_enc * encoding_shape[2]
        while True:
            words = encode(entries, t=op.t, outer_r=op.mblock[0], inner_r=op.ublock[0], u_kt=params["u_kt"],
                           ptr_bits=params["ptr_bits"], ublock_bits=params["ublock_bits"])
            if len(words) <= words_capacity or not entries:
                break
            entries.pop(next(iter(entries)))  # too dense for the encoding queue: drop tiles
        if len(words) > words_capacity:
            raise SimulatorError(f"op {op.name!r}: the encoding queue is too small for any pattern")
        block = np.zeros(words_capacity, dtype=np.float64)
        block[:len(words)] = words
        encoding[:, r * rows_per_core_enc:(r + 1) * rows_per_core_enc, :] = block.reshape(
            encoding_shape[0], rows_per_core_enc, encoding_shape[2])
        for key, s in entries.items():
            pattern[(r,) + key] = tiles[s]
    return sparse, encoding, pattern


def dense_reference(pattern: dict, op: Op, act: np.ndarray) -> np.ndarray:
    """The product the random pattern encodes, in float64 (for tests): act is (t_act, K, C) elements."""
    gr = op.grid_size[0]
    rows_core = op.mblock[0] * op.ublock[0]
    act_t, k_rows, cols = act.shape
    flat = act.reshape(act_t * k_rows, cols).astype(np.float64)
    out = np.zeros((op.t, gr * rows_core * TILE, cols))
    for (r, b, out_rt, k), tile in pattern.items():
        row0 = (r * rows_core + out_rt) * TILE
        out[b, row0:row0 + TILE] += tile.astype(np.float64) @ flat[k * TILE:(k + 1) * TILE]
    return out

