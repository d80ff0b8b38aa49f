"""Legal op models of a Buda op: grid shape, t, ublock/mblock, m_k/u_kt, L1 use and kernel cycles, and what the
netlist will say of the op under a model (its attributes and its inputs).

Rules (netlist-format.md §3.2, §3.3, §3.8): the grid divides the output tile rows/columns and fits the device;
the ublock divides the per-core block and fits the dest register (8 tiles, 4 with 32-bit accumulation); matmul
never splits K across cores (K = m_k * u_kt); the op's L1 buffers fit the usable L1. Kernel cycles, operand
rules and L1 footprint come from the one backend model (`pybuda.arch`)."""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Callable

import numpy as np

from ..arch.cycles import FusedStep, fused_op_cycles, kernel_cycles
from ..arch.fused import SubBlock, input_roles, intermediate_tiles
from ..arch.l1 import InputBuffer, footprint, overlay_extra_bytes
from ..arch.movement import kernel_input_buffer_tiles, post_tm_fits
from ..arch.operands import OpGeometry, inner_dim, prologue_tiles_per_core, tiles_read_per_core
from ..arch.optypes import OWN_ORDER_OPS
from ..arch.streaming import edge_tms, replay_factor
from ..arch.tilemap import broadcast_period
from ..dataformat import DataFormat, MathFidelity
from ..device import DeviceSpec
from ..passes.loopback import PAGES
from ..errors import UserInputError
from ..ir import Graph
from ..netlist.model import Attributes
from ..ops.fused import DEST, FusedGroup, SubOp
from ..sparse import (TILE, CoreFigures, SparseMatrix, SparseOperands, busiest_core_figures, encoding_fits,
                      sparse_operands)
from ..sparse.encoding import U16_PER_TILE, tile_table

BUF_SIZE_MB = 2   # output buffer of every op: two mblocks (double buffering), as the netlist writes it
SPARSE_QUEUES = ("sparse_tiles", "encoding")  # identity-matmul inputs 0 and 2: queues "<op>.<suffix>"


def e2e_queue(op: str) -> str:
    """The epoch-to-epoch DRAM queue an op writes when an op of a later epoch reads it."""
    return f"e2e_{op}_0"


class BalancerError(UserInputError):
    """No legal op model (or an override that cannot be honoured); the message names the op."""


@dataclasses.dataclass(frozen=True)
class OpModel:
    """One way to run an op: what the netlist writes for it and what it costs.

    prologue: the parameter/constant operands one core can hold whole in L1 besides its buffers (loaded once
    per epoch instead of streamed per input); a sparse matmul's sparse tiles and encoding always are.
    t_stream: `pybuda.arch.streaming.Stream`; t, mblock and ublock are those of the streamed op."""

    grid: tuple                 # (rows, cols) of cores
    t: int
    mblock: tuple               # (m, n) ublocks per core per t-slice
    ublock: tuple               # (rt, ct) tiles
    m_k: int = 1
    u_kt: int = 1
    l1_bytes: int = 0
    cycles: int = 0             # kernel cycles of one core for one input (sample)
    prologue: frozenset = frozenset()
    t_stream: tuple = ()        # ("r" | "c", factor): the output streamed in factor slices (t = z * factor)
    input_buf_min: tuple = ()   # input_buf_min_size_tiles per netlist input (): the backend sizes every buffer
    buf_size_mb: int = BUF_SIZE_MB   # output buffer in mblocks (`internal_override_output_buffer_multiplier`)
    overlay_size: int = 0       # the netlist's overlay_size (0: the default blob); its L1 is in l1_bytes

    @property
    def cores(self) -> int:
        return self.grid[0] * self.grid[1]


@dataclasses.dataclass(frozen=True)
class ModelRequest:
    """What the user's overrides ask of an op's models: a fixed u_kt (`override_u_kt`), input buffers of
    `multiplier` x the tiles one core reads of that input per t slice (`override_input_buffer_multiplier`,
    {netlist input index: multiplier}), parameters and constants kept in DRAM (`override_dram_parameters`
    True; False is the default: held in L1 where they fit) and an output buffer of `output_buffer_multiplier` x
    the double-buffered two mblocks (`internal_override_output_buffer_multiplier`); and what the config allows:
    smaller u_kt values where they hold more parameters in L1 (`enable_enumerate_u_kt`), a single-buffered output
    where no double-buffered model fits a grid (`enable_single_buffer_fallback`)."""

    u_kt: int | None = None
    buffer_multipliers: tuple = ()      # ((input index, multiplier), ...)
    dram_parameters: bool = False
    output_buffer_multiplier: int = 1
    enumerate_u_kt: bool = True
    single_buffer_fallback: bool = False


@dataclasses.dataclass(frozen=True)
class NetlistInput:
    """One input of an op as the netlist lists it: the graph node (or sparse queue) it reads, what kind of
    producer that is (op, input, parameter, constant, sparse), the producer's (t, rt, ct) tiles, those the op
    reads after the edge's TMs, their format and the TMs."""

    src: str
    kind: str
    src_tiles: tuple
    tiles: tuple
    df: DataFormat
    tms: tuple = ()


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


def tiles_of(shape: tuple) -> tuple:
    """(t, rt, ct) of a device shape (1, z, R, C)."""
    return shape[-3], shape[-2] // 32, shape[-1] // 32


def buda_op_type(op_type: str) -> str:
    """The netlist op type of a Buda graph op (a sparse matmul is the backend's identity matmul)."""
    return "matmul" if op_type == "sparse_matmul" else op_type


def _inner_dim(graph: Graph, name: str) -> tuple[int, int] | None:
    """(graph operand, axis) carrying the op's inner dimension K (`pybuda.arch.operands.inner_dim`)."""
    node = graph.node(name)
    sparse = node.op_type == "sparse_matmul"
    spec = inner_dim(buda_op_type(node.op_type), identity=sparse, dim=node.attrs.get("dim"))
    if spec is None:
        return None
    index, axis = spec
    return (index - 1 if sparse else index), axis     # a sparse matmul's graph operand 0 is netlist input 1


def op_dims(graph: Graph, name: str) -> dict:
    """Tile geometry an op's models are built from: output (t, rt, ct) and the inner dim K (1 if none)."""
    t, rt, ct = tiles_of(graph.node(name).shape)
    dims = {"t": t, "rt": rt, "ct": ct, "k": 1}
    inner = _inner_dim(graph, name)
    if inner is not None:
        dims["k"] = tiles_of(graph.operand_shape(graph.operands(name)[inner[0]]))[inner[1]]
    return dims


# --- sparse matmuls --------------------------------------------------------------------------------------------

def _sparse_bounds(matrix: SparseMatrix, grid_rows: int, t: int) -> tuple[int, int]:
    """(distinct non-zero tiles of the whole matrix: a bound on any grid row's, the most non-zero tiles of one
    grid row's blocks) of a sparse matmul split into t slices over grid_rows rows of cores."""
    table = tile_table(matrix)
    counts = np.bincount(table.rows, minlength=-(-matrix.shape[0] // TILE))
    per_core = counts.reshape(t, grid_rows, -1).sum(axis=(0, 2)) if counts.size else np.zeros(1, np.int64)
    return max(1, len(table.distinct)), int(per_core.max())


def sparse_tiles_df(matrix: SparseMatrix) -> DataFormat:
    """Format of a sparse matmul's tiles: Bfp2_b holds 0/+-1 pickers exactly, anything else Float16_b."""
    return DataFormat.Bfp2_b if np.all(np.abs(matrix.values) == 1) else DataFormat.Float16_b


@functools.lru_cache(maxsize=1024)
def sparse_core_figures(matrix: SparseMatrix, grid_rows: int, t: int, mblock_m: int, ublock_rt: int,
                        u_kt: int) -> CoreFigures:
    """The busiest core's non-zero tiles, ublocks and strips of a sparse matmul under a blocking (what its
    encoding will hold; cheap, no encoding built)."""
    table = tile_table(matrix)
    return busiest_core_figures(table.rows, table.cols, k_tiles=matrix.shape[1] // TILE, u_kt=u_kt,
                                grid_rows=grid_rows, mblock_m=mblock_m, ublock_rt=ublock_rt)


def sparse_queue_operands(graph: Graph, name: str, model: OpModel) -> SparseOperands:
    """The encoded sparse tiles and encoding of a sparse matmul under `model` (cached)."""
    return sparse_operands(graph.node(name).attrs["sparse"], model.grid[0], model.mblock[0], model.ublock[0],
                           model.u_kt, model.t)


@dataclasses.dataclass(frozen=True)
class SparseFigures:
    """Sizes of a sparse matmul's identity-matmul operands under one model: exact (from its encoding) or bounds
    that need no encoding (for enumerating models)."""

    num_sparse_tiles: int
    num_index_tiles: int
    nz_tiles_per_core: int
    encoding: SparseOperands | None = None


def sparse_figures(graph: Graph, name: str, model: OpModel, exact: bool = True) -> SparseFigures:
    """Sparse tiles per grid row, encoding tiles per grid row and non-zero tiles of the busiest core."""
    if exact:
        enc = sparse_queue_operands(graph, name, model)
        return SparseFigures(enc.num_sparse_tiles, enc.num_index_tiles, enc.nz_tiles_per_core, enc)
    unique, nz = _sparse_bounds(graph.node(name).attrs["sparse"], model.grid[0], model.t)
    strips = min(nz, 1 + model.m_k)
    index_tiles = -(-(3 * strips + 2 * nz) // U16_PER_TILE)
    return SparseFigures(unique, max(1, index_tiles), nz)


# --- what the netlist says of an op -----------------------------------------------------------------------------

def op_attributes(graph: Graph, name: str, model: OpModel, exact: bool = True) -> Attributes | None:
    """The netlist attributes of op `name` under `model`: the lowered op's own, m_k/u_kt of matmul and reduce,
    input 0 buffered per ublock (min_buffer_input 0) for dense matmuls, and the identity-matmul encoding figures
    for sparse matmuls (queue sizes bounded unless `exact`; the busiest core's non-zero tiles, ublocks and
    strips, which the cycle model reads, always exact)."""
    node = graph.node(name)
    if node.op_type == "sparse_matmul":
        fig = sparse_figures(graph, name, model, exact)
        core = sparse_core_figures(node.attrs["sparse"], model.grid[0], model.t, model.mblock[0], model.ublock[0],
                                   model.u_kt)
        enc = fig.encoding
        return Attributes(identity=True, m_k=model.m_k, u_kt=model.u_kt, num_sparse_tiles=fig.num_sparse_tiles,
                          num_index_tiles=fig.num_index_tiles,
                          sparse_tile_ptr_bits=enc.sparse_tile_ptr_bits if enc else None,
                          sparse_ublock_idx_bits=enc.sparse_ublock_idx_bits if enc else None,
                          indices_len=core.nz_tiles, sparse_nz_ublocks=core.nz_ublocks,
                          sparse_nz_strips=core.nz_strips, act_t=1 if model.t > 1 else None)
    out = {k: v for k, v in node.attrs.items() if k != "fused"}
    if _inner_dim(graph, name) is not None:
        out.update(m_k=model.m_k, u_kt=model.u_kt)
    if node.op_type == "matmul":
        out["min_buffer_input"] = 0
    if "relu_threshold" in out:
        out["relu_threshold"] = float(out["relu_threshold"])
    broadcast = kernel_broadcast(graph, name, model)
    if broadcast:
        out["kernel_broadcast"] = broadcast
    return Attributes(**out) if out else None


def kernel_broadcast(graph: Graph, name: str, model: OpModel) -> dict[int, int]:
    """{input index: tiles} of op `name`'s parameter and constant inputs that the kernel reads as a kernel
    broadcast under `model` (data-movement.md §2.6): inputs an eltwise op (or only eltwise sub-ops of a fused op)
    reads through a broadcast, whose tiles repeat on every core with a period shorter than its stream
    (`pybuda.arch.tilemap.broadcast_period`): the core receives that period's tiles once and reuses them, where
    it would otherwise stream every repeat."""
    node = graph.node(name)
    if buda_op_type(node.op_type) not in OWN_ORDER_OPS and node.op_type != "fused_op":
        return {}
    eltwise = _eltwise_inputs(node.attrs["fused"]) if node.op_type == "fused_op" else None
    out = {}
    for index, operand in enumerate(graph.operands(name)):
        if graph.node(operand.src).kind not in ("parameter", "constant") or (eltwise is not None and
                                                                         index not in eltwise):
            continue
        tiles = broadcast_period(tiles_of(graph.node(operand.src).shape), _netlist_tms(graph, name, model, index),
                                 None, None, tuple(model.grid), model.t, tuple(model.mblock), tuple(model.ublock))
        if tiles:
            out[index] = tiles
    return out


def _eltwise_inputs(group: FusedGroup) -> frozenset[int]:
    """The inputs of a fused op that only eltwise sub-ops read (each in the op's blocking)."""
    readers: dict[int, set] = {}
    for sub in group.sub_ops:
        for ref in sub.inputs:
            if ref.kind == "input":
                readers.setdefault(ref.index, set()).add(sub.op_type)
    return frozenset(i for i, types in readers.items() if types <= OWN_ORDER_OPS)


def _netlist_tms(graph: Graph, name: str, model: OpModel, index: int) -> tuple:
    """The TMs the netlist carries on operand `index` (a parameter or constant: never streamed) of op `name`
    under `model`: the operand's own where the graph is already streamed (its t is the op's), else with the op's
    slicing (`pybuda.arch.streaming.edge_tms`)."""
    operand = graph.operands(name)[index]
    if tiles_of(graph.operand_shape(operand))[0] == model.t or not model.t_stream:
        return tuple(operand.tms)
    return edge_tms((), operand.tms, model.t_stream, buda_op_type(graph.node(name).op_type), index)


def geometry(graph: Graph, name: str, model: OpModel, attrs: Attributes | None = None) -> OpGeometry:
    """The op under `model` as the backend model sees it (with its exact netlist attributes unless given; a fused
    op with its inputs' roles)."""
    node = graph.node(name)
    if attrs is None:
        attrs = op_attributes(graph, name, model)
    roles = fused_roles(node.attrs["fused"]) if node.op_type == "fused_op" else ()
    return OpGeometry(buda_op_type(node.op_type), tuple(model.grid), model.t, tuple(model.mblock),
                      tuple(model.ublock), attrs if attrs is not None else Attributes(), roles)


# --- fused ops --------------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class SubOpLayout:
    """A fused op's sub-op under one op model: its blocking and its netlist attributes (approximate mode is the
    fused op's)."""

    sub: SubOp
    schedule: int
    mblock: tuple
    ublock: tuple
    attrs: Attributes


def dest_tiles(device: DeviceSpec, acc_df: DataFormat | None) -> int:
    """Tiles the dest register holds for one ublock with accumulation format `acc_df`."""
    return device.dest_tiles(DataFormat.parse(acc_df) if acc_df is not None else None)


def fused_roles(group: FusedGroup) -> tuple:
    """How a fused op's inputs split over its cores (`pybuda.arch.fused.input_roles`)."""
    return input_roles((ref.index, s.op_type, pos) for s in group.sub_ops for pos, ref in enumerate(s.inputs)
                       if ref.kind == "input")


def fused_layout(graph: Graph, name: str, model: OpModel) -> tuple[SubOpLayout, ...]:
    """Every sub-op of fused op `name` under `model`: the fusion stage fuses ops of one shape, so each sub-op
    takes the op's blocking."""
    out = []
    for k, schedule in enumerate(graph.node(name).attrs["fused"].schedules):
        for sub in schedule:
            attrs = {key: v for key, v in sub.attributes.items() if key != "approximate_mode"}
            if "relu_threshold" in attrs:
                attrs["relu_threshold"] = float(attrs["relu_threshold"])
            out.append(SubOpLayout(sub, k, tuple(model.mblock), tuple(model.ublock), Attributes(**attrs)))
    return tuple(out)


def fused_steps(layout: tuple[SubOpLayout, ...], model: OpModel, approximate: bool | None) -> tuple:
    """The sub-ops as the cycle model costs them (`pybuda.arch.cycles.fused_op_cycles`), as the simulator builds
    them from the netlist (`pybuda.netlist.FusedOp.steps`)."""
    return tuple(FusedStep(OpGeometry(s.sub.op_type, tuple(model.grid), model.t, tuple(s.mblock), tuple(s.ublock),
                                      dataclasses.replace(s.attrs, approximate_mode=approximate)),
                           reads_dest=DEST in s.sub.inputs, writes_dest=s.sub.output == DEST)
                 for s in layout)


def fused_intermediate_tiles(layout: tuple[SubOpLayout, ...]) -> int:
    """L1 tiles of a fused op's intermediate buffers (`pybuda.arch.fused.intermediate_tiles`)."""
    return intermediate_tiles([SubBlock(s.schedule, s.sub.op_type, tuple(r.netlist_name for r in s.sub.inputs),
                                        s.sub.output.netlist_name, tuple(s.mblock), tuple(s.ublock)) for s in layout])


def op_kernel_cycles(graph: Graph, name: str, model: OpModel, geom: OpGeometry, device: DeviceSpec) -> int:
    """Kernel cycles of one core for one input of op `name` under `model` (a fused op: its sub-ops')."""
    node = graph.node(name)
    fidelity = node.math_fidelity or MathFidelity.HiFi4
    if node.op_type == "fused_op":
        layout = fused_layout(graph, name, model)
        return fused_op_cycles(device.arch, fused_steps(layout, model, geom.attrs.approximate_mode), node.df,
                               fidelity)
    return int(kernel_cycles(device.arch, geom, node.df, fidelity))


def operand_inputs(graph: Graph, name: str) -> list[NetlistInput]:
    """The op's graph operands as netlist inputs (what does not depend on the op model)."""
    inputs = []
    for operand in graph.operands(name):
        src = graph.node(operand.src)
        inputs.append(NetlistInput(src.name, src.kind, tiles_of(src.shape), tiles_of(graph.operand_shape(operand)),
                                   src.df, tuple(operand.tms)))
    return inputs


def netlist_inputs(graph: Graph, name: str, model: OpModel, exact: bool = True,
                   operands: list[NetlistInput] | None = None) -> list[NetlistInput]:
    """The op's netlist inputs in order: its operands (`operand_inputs`, computed unless given), or for a sparse
    matmul [sparse tiles, activations, encoding] (the identity matmul's operand order; queue widths bounds unless
    `exact`)."""
    inputs = operand_inputs(graph, name) if operands is None else operands
    node = graph.node(name)
    if node.op_type != "sparse_matmul":
        return inputs
    fig = sparse_figures(graph, name, model, exact)
    sparse_q, encoding_q = (f"{name}.{kind}" for kind in SPARSE_QUEUES)
    sparse_tiles, index_tiles = (1, model.grid[0], fig.num_sparse_tiles), (1, model.grid[0], fig.num_index_tiles)
    return [NetlistInput(sparse_q, "sparse", sparse_tiles, sparse_tiles, sparse_tiles_df(node.attrs["sparse"])),
            inputs[0],
            NetlistInput(encoding_q, "sparse", index_tiles, index_tiles, DataFormat.RawUInt32)]


def operand_port(graph: Graph, name: str, index: int) -> int | None:
    """The graph operand port of op `name`'s netlist input `index` (None for a sparse matmul's own queues)."""
    if graph.node(name).op_type != "sparse_matmul":
        return index
    return 0 if index == 1 else None


def input_names(graph: Graph, name: str) -> list[str]:
    """The names of the op's netlist inputs in order (`netlist_inputs` without their shapes)."""
    srcs = [o.src for o in graph.operands(name)]
    if graph.node(name).op_type != "sparse_matmul":
        return srcs
    return [f"{name}.{SPARSE_QUEUES[0]}", srcs[0], f"{name}.{SPARSE_QUEUES[1]}"]


# --- enumeration ------------------------------------------------------------------------------------------------

def _buffer_bytes(graph: Graph, name: str, geom: OpGeometry, inputs: list[NetlistInput], fused_tiles: int,
                  min_tiles: tuple, buf_size_mb: int) -> int:
    """L1 bytes of one core's buffers (`pybuda.arch.l1.footprint`): sparse queues held whole (the identity matmul
    reads them in place), every other input through a backend-sized buffer of at least `min_tiles[k]` tiles (a
    transformed prologue's buffer holds its whole post-TM data)."""
    node = graph.node(name)
    intermed = node.intermed_df or node.df
    buffers = [InputBuffer(i.df.tile_bytes, in_place_tiles=prologue_tiles_per_core(geom, k, i.src_tiles)
                           if i.kind == "sparse" else 0, min_size_tiles=min_tiles[k] if k < len(min_tiles) else 0)
               for k, i in enumerate(inputs)]
    return sum(footprint(geom, buffers, out_tile_bytes=node.df.tile_bytes, intermed_tile_bytes=intermed.tile_bytes,
                         intermed_separate=intermed != node.df, buf_size_mb=buf_size_mb,
                         fused_intermed_tiles=fused_tiles).values())


def read_tiles(graph: Graph, name: str, model: OpModel, index: int, tiles: tuple) -> tuple:
    """(t, rt, ct) op `name` reads of netlist input `index` (operand `tiles`) per input: the operand's, times the
    replays of a streamed matmul (`pybuda.arch.streaming.replay_factor`); the slicing of a streamed op keeps the
    total."""
    op_type = graph.node(name).op_type
    replay = replay_factor(model.t_stream, buda_op_type(op_type), index, op_type == "sparse_matmul")
    return (tiles[0] * replay, tiles[1], tiles[2])


def raw_prologue_grid(graph: Graph, param: str, model: OpModel) -> tuple | None:
    """The grid of DRAM buffers a parameter or constant read by one op only (under `model`) gets when that op
    prologues it: the op's own grid where it divides the tensor's tiles, so that when the backend keeps the
    prologue raw (§2.6: buffer (r, c) copied into core (r, c)) each core holds its share; None otherwise (read by
    several ops, or not divisible: the queue keeps its host layout)."""
    if len({u for u, _ in graph.users(param) if graph.node(u).kind == "op"}) != 1:
        return None
    _, rt, ct = tiles_of(graph.node(param).shape)
    return tuple(model.grid) if rt % model.grid[0] == 0 and ct % model.grid[1] == 0 else None


def _prologue_choice(graph: Graph, name: str, model: OpModel, geom: OpGeometry, inputs: list[NetlistInput],
                     l1_usable: int, fused_tiles: int, min_tiles: tuple,
                     dram_parameters: bool) -> tuple[int, frozenset, tuple] | None:
    """(L1 bytes, prologued inputs, input_buf_min_size_tiles) of one core, or None if the op does not fit
    (`_buffer_bytes`). Parameters and constants are prologued, cheapest first, while L1 allows: transformed
    (`pybuda.arch.movement.post_tm_fits`: the kernel input buffer holds the post-TM tiles one core reads, raised
    with input_buf_min_size_tiles where it does not already), else raw where the op is the tensor's only reader
    and its grid lays it out (`raw_prologue_grid`: each core holds its share, re-streamed through the edge's pipes
    every input), else streamed from DRAM every input (none prologued if `dram_parameters`, nor a paged state,
    which its writer changes in DRAM); sparse operands always are (read in place)."""
    mins = list(min_tiles) if min_tiles else [0] * len(inputs)
    total = _buffer_bytes(graph, name, geom, inputs, fused_tiles, tuple(mins), model.buf_size_mb)
    if total > l1_usable:
        return None
    prologue = {i.src for i in inputs if i.kind == "sparse"}
    options = []
    for k, i in enumerate(inputs):
        if i.kind not in ("parameter", "constant") or dram_parameters or graph.node(i.src).attrs.get(PAGES):
            continue
        tb = i.df.tile_bytes
        need = geom.attrs.kernel_broadcast_tiles(k) or \
            math.ceil(tiles_read_per_core(geom, k, read_tiles(graph, name, model, k, i.tiles)))
        raw = math.prod(i.src_tiles) // model.cores * tb if raw_prologue_grid(graph, i.src, model) else 0
        if post_tm_fits(geom, k, need, tb, mins[k]):
            options.append((0, k, mins[k], raw))
        else:
            extra = (kernel_input_buffer_tiles(geom, k, tb, need) - kernel_input_buffer_tiles(geom, k, tb, mins[k]))
            options.append((extra * tb, k, need, raw))
    for extra, k, minimum, raw in sorted(options):
        if total + extra <= l1_usable:
            total += extra
            prologue.add(inputs[k].src)
            mins[k] = minimum
        elif raw and total + raw <= l1_usable:
            total += raw
            prologue.add(inputs[k].src)
    return total, frozenset(prologue), tuple(mins) if any(mins) else ()


def _l1_context(graph: Graph, name: str, model: OpModel,
                operands: list[NetlistInput] | None = None) -> tuple[OpGeometry, list[NetlistInput], int]:
    """What the L1 footprint of op `name` under `model` is computed from: its geometry and netlist inputs (queue
    sizes bounded, as the enumeration has them; `operands`: its `operand_inputs` if known) and a fused op's
    intermediate tiles."""
    geom = geometry(graph, name, model, op_attributes(graph, name, model, exact=False))
    inputs = netlist_inputs(graph, name, model, exact=False, operands=operands)
    fused = fused_intermediate_tiles(fused_layout(graph, name, model)) \
        if graph.node(name).op_type == "fused_op" else 0
    return geom, inputs, fused


def with_input_buffers(graph: Graph, name: str, model: OpModel, device: DeviceSpec,
                       min_tiles: tuple) -> OpModel | None:
    """`model` with input_buf_min_size_tiles `min_tiles` (one per netlist input, 0: the backend's size) and its L1
    recounted, its prologued inputs kept; None if that does not fit the usable L1."""
    geom, inputs, fused = _l1_context(graph, name, model)
    total = _buffer_bytes(graph, name, geom, inputs, fused, min_tiles, model.buf_size_mb) + \
        overlay_extra_bytes(model.overlay_size)
    if total > device.l1_usable:
        return None
    return dataclasses.replace(model, input_buf_min=tuple(min_tiles) if any(min_tiles) else (), l1_bytes=total)


def overlay_fits(model: OpModel, device: DeviceSpec, overlay_size: int) -> bool:
    """Whether `model`'s L1 has room for an overlay blob of `overlay_size` bytes."""
    extra = overlay_extra_bytes(overlay_size) - overlay_extra_bytes(model.overlay_size)
    return model.l1_bytes + extra <= device.l1_usable


def with_overlay(model: OpModel, device: DeviceSpec, overlay_size: int) -> OpModel | None:
    """`model` with an overlay blob of `overlay_size` bytes and its L1 counted; None if that does not fit the
    usable L1."""
    if not overlay_fits(model, device, overlay_size):
        return None
    extra = overlay_extra_bytes(overlay_size) - overlay_extra_bytes(model.overlay_size)
    return dataclasses.replace(model, overlay_size=overlay_size, l1_bytes=model.l1_bytes + extra)


def legal_op_models(graph: Graph, name: str, device: DeviceSpec,
                    streams: Callable[[int, int], list] | None = None,
                    request: ModelRequest = ModelRequest()) -> list[OpModel]:
    """Every legal (grid, t-streaming, blocking, u_kt) of op `name` on `device`, with L1, prologue choices and
    kernel cycles, as the user's overrides `request` them. `streams(grid_rows, grid_cols)` gives the streamings
    to try on a grid (default: none)."""
    node = graph.node(name)
    dims = op_dims(graph, name)
    rt, ct = dims["rt"], dims["ct"]
    dest = dest_tiles(device, node.acc_df)
    inner = _inner_dim(graph, name)
    split = inner[1] if inner is not None and node.op_type == "reduce" else None   # K is never split over cores
    operands = operand_inputs(graph, name)
    models = []
    for gr in divisors(rt):
        if gr > device.grid_rows or (split == 1 and gr != 1):
            continue
        for gc in divisors(ct):
            if gc > device.grid_cols or (split == 2 and gc != 1):
                continue
            for stream in (streams(gr, gc) if streams else [()]):
                models += _models_on_grid(graph, name, device, (gr, gc), stream, dims, dest, inner, operands,
                                          request)
    return models


def _models_on_grid(graph: Graph, name: str, device: DeviceSpec, grid: tuple, stream: tuple, dims: dict, dest: int,
                    inner: tuple | None, operands: list[NetlistInput], request: ModelRequest) -> list[OpModel]:
    """The legal models of op `name` on one grid with one streaming: the largest ublock and then the largest u_kt
    that fit L1 (the fastest; a smaller ublock is tried as the legacy balancer does, halving the dest tiles), with
    the smaller u_kt values that hold more parameters in L1 (`request.enumerate_u_kt`); double-buffered output, or
    single-buffered where nothing else fits and the request allows it; or none."""
    t, rt, ct = dims["t"], dims["rt"], dims["ct"]
    rows, cols = rt // grid[0], ct // grid[1]
    if stream:
        if (rows if stream[0] == "r" else cols) % stream[1]:
            return []
        t *= stream[1]
        rows, cols = (rows // stream[1], cols) if stream[0] == "r" else (rows, cols // stream[1])
    multiplier = request.output_buffer_multiplier
    buffers = [BUF_SIZE_MB * multiplier] + ([1] if request.single_buffer_fallback and multiplier == 1 else [])
    for buf_size_mb in buffers:
        tried, ublock_dest = set(), dest
        while ublock_dest >= 1:
            ublock = best_ublock(rows, cols, ublock_dest)
            if ublock not in tried:
                tried.add(ublock)
                models = _fitting_u_kts(graph, name, device, grid, t, ublock, (rows, cols), stream, dims["k"], inner,
                                        operands, request, buf_size_mb)
                if models:
                    return models
            ublock_dest //= 2
    return []


def _fitting_u_kts(graph: Graph, name: str, device: DeviceSpec, grid: tuple, t: int, ublock: tuple, block: tuple,
                   stream: tuple, k: int, inner: tuple | None, operands: list[NetlistInput],
                   request: ModelRequest, buf_size_mb: int) -> list[OpModel]:
    """The model with the largest u_kt that fits L1 on one grid, streaming and ublock, or the requested one; with
    `request.enumerate_u_kt` also each smaller u_kt whose model holds more of the parameters in L1 than the larger
    ones do (a smaller u_kt costs kernel cycles and frees L1 for prologue); [] if none fits."""
    node = graph.node(name)
    gr, gc = grid
    mblock = (block[0] // ublock[0], block[1] // ublock[1])
    u_kts = divisors(k)[::-1] if inner is not None else (1,)
    if buf_size_mb > 2 and t % (buf_size_mb // 2) and (buf_size_mb // 2) % t:
        return []     # the backend needs buf_size_mb / 2 and t to divide one another
    models: list[OpModel] = []
    for u_kt in (u_kts if request.u_kt is None else [u for u in u_kts if u == request.u_kt]):
        m_k = k // u_kt
        model = OpModel((gr, gc), t, mblock, ublock, m_k, u_kt, t_stream=stream, buf_size_mb=buf_size_mb)
        if node.op_type == "sparse_matmul":
            unique, _ = _sparse_bounds(node.attrs["sparse"], gr, t)
            if not encoding_fits(unique, mblock[0], ublock[0], u_kt):
                continue
        geom, inputs, fused_tiles = _l1_context(graph, name, model, operands)
        fit = _prologue_choice(graph, name, model, geom, inputs, device.l1_usable, fused_tiles,
                               _requested_buffers(geom, inputs, request), request.dram_parameters)
        if fit is None or (models and not fit[1] > models[-1].prologue):
            continue
        cycles = op_kernel_cycles(graph, name, model, geom, device)
        models.append(dataclasses.replace(model, l1_bytes=fit[0], cycles=cycles, prologue=fit[1],
                                          input_buf_min=fit[2]))
        prologuable = {i.src for i in inputs if i.kind in ("parameter", "constant", "sparse")}
        if not request.enumerate_u_kt or request.dram_parameters or fit[1] >= prologuable:
            break
    return models


def _requested_buffers(geom: OpGeometry, inputs: list[NetlistInput], request: ModelRequest) -> tuple:
    """input_buf_min_size_tiles per input that `override_input_buffer_multiplier` asks for: the multiplier times
    the tiles one core reads of that input per t slice (0 where none is asked)."""
    multipliers = dict(request.buffer_multipliers)
    return tuple(math.ceil(multipliers[k] * tiles_read_per_core(geom, k, i.tiles) / geom.t) if k in multipliers
                 else 0 for k, i in enumerate(inputs)) if multipliers else ()
