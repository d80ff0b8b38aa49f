"""Legal op models of a Buda op: grid shape, t, ublock/mblock, m_k/u_kt, L1 use and estimated cycles.

Rules (netlist-format.md §3.2, §3.3, §3.8): the grid divides the output tile rows/columns and fits the
device; the ublock divides the per-core block and fits the dest register (8 tiles, 4 with 32-bit
accumulation); matmul never splits K across cores (K = m_k * u_kt); the op's L1 buffers fit the usable L1.
Cycles come from the backend's published per-op formulas (`pybuda.backend_sim.op_cycles`)."""
from __future__ import annotations

import dataclasses
import functools

from ..backend_sim.op_cycles import kernel_cycles
from ..dataformat import DataFormat
from ..device import DeviceSpec
from ..ir import Graph


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
    intermed = node.tags.get("intermed_df", node.df)
    if node.op_type == "matmul" and intermed != node.df:
        total += mblock_tiles * DataFormat.parse(intermed).tile_bytes
    for port, operand in enumerate(graph.operands(name)):
        tb = graph.node(operand.src).df.tile_bytes
        if node.op_type == "matmul" and port == 0:
            gran = ublock[0] * u_kt
        elif node.op_type == "matmul" and port == 1:
            gran = mblock[1] * ublock[1] * u_kt
        elif node.op_type == "reduce":
            gran = (ublock[0] if node.attrs["dim"] == "c" else ublock[1]) * u_kt
        else:
            gran = ublock[0] * ublock[1]
        total += input_buffer_tiles(gran, tb) * tb
    return total


def legal_op_models(graph: Graph, name: str, device: DeviceSpec) -> list[OpModel]:
    """Every legal (grid, blocking, u_kt) of op `name` on `device`, with L1 and kernel cycles."""
    node = graph.node(name)
    dims = op_dims(graph, name)
    t, rt, ct, k = dims["t"], dims["rt"], dims["ct"], dims["k"]
    acc = DataFormat.parse(node.tags.get("acc_df", DataFormat.Float16_b))
    dest = device.dest_tiles_32b if acc in (DataFormat.Float32, DataFormat.Int32) else device.dest_tiles_16b
    fidelity = node.tags.get("math_fidelity")
    models = []
    for gr in divisors(rt):
        if gr > device.grid_rows or (node.op_type == "reduce" and node.attrs["dim"] == "r" and gr != 1):
            continue
        for gc in divisors(ct):
            if gc > device.grid_cols or (node.op_type == "reduce" and node.attrs["dim"] == "c" and gc != 1):
                continue
            ublock = best_ublock(rt // gr, ct // gc, dest)
            mblock = (rt // gr // ublock[0], ct // gc // ublock[1])
            ukts = divisors(k)[::-1] if node.op_type in ("matmul", "reduce") else (1,)
            for u_kt in ukts:
                l1 = _l1_bytes(graph, name, (gr, gc), t, mblock, ublock, u_kt)
                if l1 > device.l1_usable:
                    continue
                m_k = k // u_kt if node.op_type in ("matmul", "reduce") else 1
                cycles = kernel_cycles(device.arch, node.op_type, t=t, mblock=mblock, ublock=ublock,
                                       out_df=node.df, math_fidelity=fidelity, m_k=m_k, u_kt=u_kt,
                                       attributes=node.attrs)
                models.append(OpModel((gr, gc), t, mblock, ublock, m_k, u_kt, l1, int(cycles)))
                break  # the largest u_kt that fits is the fastest; smaller ones only cost more
    return models
