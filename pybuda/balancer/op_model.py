"""Legal op models of a Buda op: grid shape, t, ublock/mblock, m_k/u_kt, L1 use and estimated cycles.

Rules (netlist-format.md §3.2, §3.3, §3.8): the grid divides the output tile rows/columns and fits the
device; the ublock divides the per-core block and fits the dest register (8 tiles, 4 with 32-bit
accumulation); matmul never splits K across cores (K = m_k * u_kt); the op's L1 buffers fit the usable L1.
Cycles come from the backend's published per-op formulas (`pybuda.arch.cycles`)."""
from __future__ import annotations

import dataclasses
import functools

import numpy as np

from ..arch.cycles import kernel_cycles
from ..dataformat import DataFormat
from ..device import DeviceSpec
from ..ir import Graph
from ..sparse import SparseMatrix, encoding_fits, unique_tiles


class BalancerError(ValueError):
    """No legal op model (or an override that cannot be honoured); the message names the op."""


@dataclasses.dataclass(frozen=True)
class OpModel:
    """One way to run an op: what the netlist writes for it and what it costs."""

    grid: tuple                 # (rows, cols) of cores
    t: int
    mblock: tuple               # (m, n) ublocks per core per t-slice
    ublock: tuple               # (rt, ct) tiles
    m_k: int = 1
    u_kt: int = 1
    l1_bytes: int = 0
    cycles: int = 0             # kernel cycles of one core for one input (sample)

    @property
    def cores(self) -> int:
        return self.grid[0] * self.grid[1]


@functools.lru_cache(maxsize=None)
def divisors(n: int) -> tuple:
    return tuple(d for d in range(1, n + 1) if n % d == 0)


def best_ublock(block_rt: int, block_ct: int, dest_tiles: int) -> tuple:
    """Largest ublock dividing the per-core block within the dest limit; ties go to the wider one."""
    best = (1, 1)
    for ur in divisors(block_rt):
        for uc in divisors(block_ct):
            if ur * uc <= dest_tiles and (ur * uc, uc) > (best[0] * best[1], best[1]):
                best = (ur, uc)
    return best


def input_buffer_tiles(granularity: int, tile_bytes: int) -> int:
    """Backend input buffer sizing (§3.8): >= ~32 KB latency hiding (power-of-two tiles) and >= 2 granules."""
    latency = 1
    while latency * tile_bytes < 32 * 1024:
        latency *= 2
    tiles = max(latency, 2 * granularity)
    return -(-tiles // (2 * granularity)) * 2 * granularity


def _tiles(shape: tuple) -> tuple:
    """(t, rt, ct) of a device shape (1, z, R, C)."""
    return shape[-3], shape[-2] // 32, shape[-1] // 32


def op_dims(graph: Graph, name: str) -> dict:
    """Tile geometry an op's models are built from: output (t, rt, ct) and the inner dim K for matmul/reduce."""
    node = graph.node(name)
    t, rt, ct = _tiles(node.shape)
    dims = {"t": t, "rt": rt, "ct": ct, "k": 1}
    if node.op_type == "matmul":
        dims["k"] = _tiles(graph.operand_shape(graph.operands(name)[0]))[2]
    elif node.op_type == "sparse_matmul":
        dims["k"] = _tiles(graph.operand_shape(graph.operands(name)[0]))[1]
    elif node.op_type == "reduce":
        _, in_rt, in_ct = _tiles(graph.operand_shape(graph.operands(name)[0]))
        dims["k"] = in_ct if node.attrs["dim"] == "c" else in_rt
    return dims


def _l1_bytes(graph: Graph, name: str, grid, t, mblock, ublock, u_kt) -> int:
    """Streaming L1 footprint per core: output double buffer plus one input buffer per operand."""
    node = graph.node(name)
    out_tb = node.df.tile_bytes
    mblock_tiles = mblock[0] * mblock[1] * ublock[0] * ublock[1]
    total = 2 * mblock_tiles * out_tb
    intermed = node.intermed_df or node.df
    if node.op_type == "matmul" and intermed != node.df:
        total += mblock_tiles * DataFormat.parse(intermed).tile_bytes
    if node.op_type == "sparse_matmul":
        stats = sparse_stats(node.attrs["sparse"], grid[0], t)
        index_tiles = -(-(3 * min(stats.nz_per_core, 1 + stats.k_tiles // u_kt) + 2 * stats.nz_per_core)
                        // (2 * 1024))
        total += stats.unique_tiles * sparse_tiles_df(node.attrs["sparse"]).tile_bytes
        total += index_tiles * DataFormat.RawUInt32.tile_bytes
    for port, operand in enumerate(graph.operands(name)):
        tb = graph.node(operand.src).df.tile_bytes
        if node.op_type == "sparse_matmul":
            gran = mblock[1] * ublock[1] * u_kt
        elif node.op_type == "matmul" and port == 0:
            gran = ublock[0] * u_kt
        elif node.op_type == "matmul" and port == 1:
            gran = mblock[1] * ublock[1] * u_kt
        elif node.op_type == "reduce":
            gran = (ublock[0] if node.attrs["dim"] == "c" else ublock[1]) * u_kt
        else:
            gran = ublock[0] * ublock[1]
        total += input_buffer_tiles(gran, tb) * tb
    return total


def buda_op_type(op_type: str) -> str:
    """The netlist op type of a Buda graph op (a sparse matmul is the backend's identity matmul)."""
    return "matmul" if op_type == "sparse_matmul" else op_type


@dataclasses.dataclass(frozen=True)
class SparseStats:
    """What the balancer needs of a sparse matmul's matrix on a number of grid rows."""

    unique_tiles: int       # distinct non-zero tiles of the whole matrix (>= those of any grid row)
    nz_per_core: int        # the most non-zero tiles in one grid row's block
    k_tiles: int


@functools.lru_cache(maxsize=256)
def _tile_counts(matrix: SparseMatrix) -> tuple[np.ndarray, int]:
    _, _, contents = matrix.tiles()
    unique = len(unique_tiles(contents)[0]) if len(contents) else 1
    return np.concatenate([[0], np.cumsum(matrix.tile_rows())]), unique


def sparse_stats(matrix: SparseMatrix, grid_rows: int, t: int = 1) -> SparseStats:
    """Tile statistics of a sparse matmul whose output is split into t slices over grid_rows rows of cores."""
    prefix, unique = _tile_counts(matrix)
    counts = np.diff(prefix)
    per_core = counts.reshape(t, grid_rows, -1).sum(axis=(0, 2)) if counts.size else np.zeros(1, np.int64)
    return SparseStats(unique, int(per_core.max()), matrix.shape[1] // 32)


def sparse_tiles_df(matrix: SparseMatrix) -> DataFormat:
    """Format of a sparse matmul's tiles: Bfp2_b holds 0/+-1 pickers exactly, anything else Float16_b."""
    return DataFormat.Bfp2_b if np.all(np.abs(matrix.values) == 1) else DataFormat.Float16_b


def legal_op_models(graph: Graph, name: str, device: DeviceSpec) -> list[OpModel]:
    """Every legal (grid, blocking, u_kt) of op `name` on `device`, with L1 and kernel cycles."""
    node = graph.node(name)
    dims = op_dims(graph, name)
    t, rt, ct, k = dims["t"], dims["rt"], dims["ct"], dims["k"]
    acc = DataFormat.parse(node.acc_df or DataFormat.Float16_b)
    dest = device.dest_tiles_32b if acc in (DataFormat.Float32, DataFormat.Int32) else device.dest_tiles_16b
    fidelity = node.math_fidelity
    models = []
    for gr in divisors(rt):
        if gr > device.grid_rows or (node.op_type == "reduce" and node.attrs["dim"] == "r" and gr != 1):
            continue
        for gc in divisors(ct):
            if gc > device.grid_cols or (node.op_type == "reduce" and node.attrs["dim"] == "c" and gc != 1):
                continue
            ublock = best_ublock(rt // gr, ct // gc, dest)
            mblock = (rt // gr // ublock[0], ct // gc // ublock[1])
            inner = node.op_type in ("matmul", "sparse_matmul", "reduce")
            ukts = divisors(k)[::-1] if inner else (1,)
            for u_kt in ukts:
                attrs = node.attrs
                if node.op_type == "sparse_matmul":
                    stats = sparse_stats(node.attrs["sparse"], gr, t)
                    if not encoding_fits(stats.unique_tiles, mblock[0], ublock[0], u_kt):
                        continue
                    attrs = {"identity": True, "sparse_indices": stats.nz_per_core}
                l1 = _l1_bytes(graph, name, (gr, gc), t, mblock, ublock, u_kt)
                if l1 > device.l1_usable:
                    continue
                m_k = k // u_kt if inner else 1
                cycles = kernel_cycles(device.arch, buda_op_type(node.op_type), t=t, mblock=mblock, ublock=ublock,
                                       out_df=node.df, math_fidelity=fidelity, m_k=m_k, u_kt=u_kt,
                                       attributes=attrs)
                models.append(OpModel((gr, gc), t, mblock, ublock, m_k, u_kt, l1, int(cycles)))
                break  # the largest u_kt that fits is the fastest; smaller ones only cost more
    return models
