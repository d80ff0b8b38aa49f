"""The queues a placed plan needs (pybuda-balancer.md §4.6) and their layout: graph inputs, parameters, constants,
sparse-matmul operands, outputs and epoch-to-epoch queues, each with its grid of DRAM buffers, blocking, entries,
lifetime (in epochs) and the ops that read it. The DRAM placement (`dram.py`), the plan's cost and the netlist
writer all read this one plan.

Training: a parameter, optimizer state or gradient accumulator that an op writes back (loopback) is a ram with its
writer's blocking; an epoch-to-epoch queue read by epochs of another type (forward activations the backward
epochs read) is static, since its writer and readers run in different programs.

Layout: a queue the host writes (graph input, parameter, constant) is split into as many buffers as the device has
DRAM channels where its tiles allow (`host_queue_grid`; a parameter or constant its only reader prologues takes
that reader's grid instead, `op_model.raw_prologue_grid`, so that a prologue the backend keeps raw leaves each
core its share), so its readers' traffic spreads over the channels (the
legacy compiler gave a parameter its smallest reader's grid: often one buffer, one channel, for a weight that every
core streams). So is an epoch-to-epoch queue whose writer has fewer cores than the device has channels
(`e2e_queue_blocking`; the backend's pipes reblock an op's output into a queue of another grid with the same
(t, RT, CT), netlist-format.md §3.2), unless its t slices over the buffers would cost a reader more than a core's
stream phases: the legacy compiler gave it the writer's grid, so a one-core writer's queue sat in one
channel and its writes and every later reader's reads contended there. Any other queue an op
writes has the op's blocking (one buffer per core); a sparse matmul's operands one buffer per grid row of the op.
Lifetime: inputs, parameters, constants, sparse operands and outputs live for the whole program (static); an
epoch-to-epoch queue from its writer's epoch to its last reader's epoch (dynamic: the program allocates it before
the writer's epoch and frees it after the last reader's).
"""
from __future__ import annotations

import dataclasses
import functools

from ..dataformat import DataFormat
from ..device import DeviceSpec
from ..ir import Graph, epoch_types, loopback_writers
from ..netlist.sizes import QUEUE_HEADER_BYTES
from ..passes.loopback import PAGES
from .chips import home_chip
from .op_model import (SPARSE_QUEUES, BalancerError, OpModel, best_ublock, divisors, e2e_queue, raw_prologue_grid,
                       sparse_queue_operands, sparse_tiles_df, tiles_of)

GROUPS = {"input": "input", "parameter": "parameter", "constant": "constant", "sparse": "constant",
          "output": "output", "e2e": "epoch_to_epoch", "optimizer_parameter": "optimizer_parameter",
          "optimizer_state": "optimizer_state", "parameter_residual": "optimizer_state",
          "gradient_accumulator": "grad_accumulator", "loss_gradient": "loss", "state": "parameter"}


@dataclasses.dataclass(frozen=True)
class QueuePlan:
    """One queue of the plan: its kind (input, parameter, constant, sparse, output, e2e), writer ("HOST" or an
    op) and the writer's epoch (-1 for the host), type, entries, blocking, format, location (dram / host),
    lifetime (first and last epoch; None: static), the ops that read it and the chip whose DRAM holds it
    (`chips.py`)."""

    name: str
    kind: str
    writer: str
    type: str
    entries: int
    grid: tuple
    t: int
    mblock: tuple
    ublock: tuple
    df: DataFormat
    loc: str
    lifetime: tuple | None = None
    readers: tuple = ()
    writer_epoch: int = -1
    chip: int = 0
    alias: str | None = None      # a second view of that ram's DRAM (a paged state's writer view)

    @property
    def buffers(self) -> int:
        return self.grid[0] * self.grid[1]

    @property
    def buffer_bytes(self) -> int:
        tiles = self.t * self.mblock[0] * self.mblock[1] * self.ublock[0] * self.ublock[1]
        return self.entries * tiles * self.df.tile_bytes + QUEUE_HEADER_BYTES

    @property
    def blocking(self) -> dict:
        return {"grid_size": tuple(self.grid), "t": self.t, "mblock": tuple(self.mblock), "ublock": tuple(self.ublock)}

    @property
    def group(self) -> str:
        """The netlist's queue group (input, parameter, constant, output, epoch_to_epoch)."""
        return GROUPS[self.kind]


def _spread_grid(rt: int, ct: int, device: DeviceSpec) -> tuple:
    """The grid of buffers for `rt` x `ct` tiles: the most buffers up to the device's DRAM channels (the fewest
    beyond that, then the most columns) that divide the tile rows and columns and fit the core grid."""
    grids = [(r, c) for r in divisors(rt) if r <= device.grid_rows for c in divisors(ct) if c <= device.grid_cols]
    return min(grids, key=lambda g: (-min(g[0] * g[1], device.dram_channels), g[0] * g[1], -g[1]))


@functools.lru_cache(maxsize=None)
def host_queue_grid(shape: tuple, device: DeviceSpec) -> tuple:
    """The grid of a host-written queue of a (1, z, R, C) tensor (`_spread_grid` of its tiles)."""
    _, rt, ct = tiles_of(shape)
    return _spread_grid(rt, ct, device)


@functools.lru_cache(maxsize=None)
def e2e_queue_blocking(model: OpModel, device: DeviceSpec) -> tuple:
    """(grid, mblock, ublock) of the epoch-to-epoch queue an op writes under `model` (its t is the op's): the
    op's own blocking when it has at least as many cores as the device has DRAM channels, else its output tiles
    spread like a host queue's (`_spread_grid`), unless the spread could cost a reader more than a core's
    stream phases: a reader that stacks the t slices again changes buffers up to t times per buffer (a 1-core
    head t-streamed in 510 slices of 4 tiles, spread over 4 buffers, reads as 2,040 phases)."""
    if model.cores >= device.dram_channels:
        return model.grid, model.mblock, model.ublock
    rt, ct = (g * m * u for g, m, u in zip(model.grid, model.mblock, model.ublock))
    grid = _spread_grid(rt, ct, device)
    if model.t * grid[0] * grid[1] > device.phase_budget():
        return model.grid, model.mblock, model.ublock
    return grid, *_blocks(rt, ct, grid)


def e2e_queue_buffers(model: OpModel, device: DeviceSpec) -> int:
    """How many DRAM buffers the epoch-to-epoch queue an op writes under `model` has (`e2e_queue_blocking`)."""
    grid = e2e_queue_blocking(model, device)[0]
    return grid[0] * grid[1]


def _blocking_on(shape: tuple, grid: tuple) -> tuple:
    """(t, mblock, ublock) of a (1, z, R, C) tensor split over `grid` buffers."""
    t, rt, ct = tiles_of(shape)
    return t, *_blocks(rt, ct, grid)


def page_writes(graph: Graph) -> dict[str, str]:
    """The writer view of each paged state (`passes/loopback.py`), by state: the queue its loopback output names."""
    return {out.loopback: out.name for out in graph.outputs()
            if out.loopback is not None and graph.node(out.loopback).attrs.get(PAGES)}


def _paged_views(graph: Graph, node, queue: QueuePlan, m: OpModel, epoch_of: dict[str, int],
                 microbatch: int) -> dict:
    """A paged state's two views of one DRAM buffer, both laid out as its writer's output: the readers' (the
    host loads it; an entry per sample, its pages as t) and the writer's (`alias` of it; one page per entry, the
    entry the program's write index picks, sample b's at b * pages past it)."""
    pages = node.attrs[PAGES]
    view = page_writes(graph)[node.name]
    writer = graph.output_source(view)
    if m.t != 1:
        raise BalancerError(f"paged state {node.name!r}: its writer {writer!r} streams its page in {m.t} t-slices; "
                            "a page is written as one entry (t 1)")
    reader = dataclasses.replace(queue, entries=microbatch, grid=m.grid, t=pages, mblock=m.mblock, ublock=m.ublock)
    return {node.name: reader,
            view: dataclasses.replace(reader, name=view, writer=writer, entries=pages * microbatch, t=1, readers=(),
                                      writer_epoch=epoch_of[writer], alias=node.name)}


def _blocks(rt: int, ct: int, grid: tuple) -> tuple:
    """(mblock, ublock) of `rt` x `ct` tiles split over `grid` buffers."""
    ub = best_ublock(rt // grid[0], ct // grid[1], 8)
    return (rt // grid[0] // ub[0], ct // grid[1] // ub[1]), tuple(ub)


def plan_queues(graph: Graph, models: dict[str, OpModel], epoch_of: dict[str, int], device: DeviceSpec,
                microbatch: int, inputs_on_host: bool, outputs_on_host: bool,
                queued: frozenset = frozenset(), chips: dict[str, int] | None = None) -> dict[str, QueuePlan]:
    """Every queue of the plan by name, in the netlist's order (inputs, parameters and constants, sparse
    operands, outputs, epoch-to-epoch queues: read by later epochs or, `queued` (producer, consumer, port), by a
    consumer of the same epoch); `chips`: each op's chip (all on the PCIe chip when None)."""
    queues = _plan_queues(graph, models, epoch_of, device, microbatch, inputs_on_host, outputs_on_host, queued)
    if not chips:
        return queues

    def chip(q: QueuePlan) -> int:
        return chips[q.writer] if q.writer in chips else home_chip((chips[r] for r in q.readers), device)
    return {name: dataclasses.replace(q, chip=chip(q)) for name, q in queues.items()}


def _plan_queues(graph: Graph, models: dict[str, OpModel], epoch_of: dict[str, int], device: DeviceSpec,
                 microbatch: int, inputs_on_host: bool, outputs_on_host: bool,
                 queued: frozenset) -> dict[str, QueuePlan]:
    readers: dict[str, set] = {}
    for name in models:
        for o in graph.operands(name):
            readers.setdefault(o.src, set()).add(name)
    queues: dict[str, QueuePlan] = {}

    def host_queue(node, kind: str, qtype: str, entries: int, loc: str) -> QueuePlan:
        grid = host_queue_grid(node.shape, device)
        return QueuePlan(node.name, kind, "HOST", qtype, entries, grid, *_blocking_on(node.shape, grid), node.df, loc,
                         readers=tuple(sorted(readers.get(node.name, ()))))

    writers = loopback_writers(graph)
    for node in graph.inputs():
        queues[node.name] = host_queue(node, node.role or "input", "queue", microbatch,
                                       "host" if inputs_on_host else "dram")
    for node in graph.nodes():
        if node.kind not in ("parameter", "constant") or not (graph.users(node.name) or node.name in writers):
            continue
        kind = node.role if node.role not in ("", "trained") else node.kind
        queue = host_queue(node, kind, "ram", 1, "dram")
        reader = next(iter(readers.get(node.name, ())), None)
        grid = raw_prologue_grid(graph, node.name, models[reader]) \
            if reader is not None and node.name in models[reader].prologue else None
        if grid is not None:       # prologued by its only reader: laid out on its grid (kept raw, each core its share)
            queue = dataclasses.replace(queue, grid=grid, **dict(zip(("t", "mblock", "ublock"),
                                                                    _blocking_on(node.shape, grid))))
        if node.name in writers and node.attrs.get(PAGES):
            queues.update(_paged_views(graph, node, queue, models[writers[node.name]], epoch_of, microbatch))
            continue
        if node.name in writers:
            w = writers[node.name]
            m = models[w]
            queue = dataclasses.replace(queue, writer=w, grid=m.grid, t=m.t, mblock=m.mblock, ublock=m.ublock,
                                        writer_epoch=epoch_of[w])
        queues[node.name] = queue
    for name, model in models.items():
        if graph.node(name).op_type != "sparse_matmul":
            continue
        enc = sparse_queue_operands(graph, name, model)
        dfs = (sparse_tiles_df(graph.node(name).attrs["sparse"]), DataFormat.RawUInt32)
        for suffix, values, df in zip(SPARSE_QUEUES, (enc.sparse_tiles, enc.encoding), dfs):
            queue = f"{name}.{suffix}"
            queues[queue] = QueuePlan(queue, "sparse", "HOST", "ram", 1, (model.grid[0], 1), 1,
                                      (1, values.shape[-1] // 32), (1, 1), df, "dram", readers=(name,))
    for out in graph.outputs():
        if out.loopback is not None:
            continue
        src = graph.output_source(out.name)
        m = models[src]
        queues[out.name] = QueuePlan(out.name, "output", src, "queue", microbatch, m.grid, m.t, m.mblock, m.ublock,
                                     graph.node(src).df, "host" if outputs_on_host else "dram",
                                     writer_epoch=epoch_of[src])
    types = epoch_types(graph)
    for name, m in models.items():
        later = sorted({u for u, port in graph.users(name) if graph.node(u).kind == "op"
                        and (epoch_of[u] > epoch_of[name] or (name, u, port) in queued)})
        if later:
            queue = e2e_queue(name)
            lifetime = (epoch_of[name], max(epoch_of[u] for u in later))
            if any(types[u] != types[name] for u in later):
                lifetime = None
            grid, mblock, ublock = e2e_queue_blocking(m, device)
            queues[queue] = QueuePlan(queue, "e2e", name, "queue", microbatch, grid, m.t, mblock, ublock,
                                      graph.node(name).df, "dram", lifetime, tuple(later), epoch_of[name])
    return queues
