"""Inspection of a netlist: whole-netlist and per-epoch summaries, and a drawing of each epoch's core grid."""
from __future__ import annotations

import string
from collections import Counter
from dataclasses import dataclass, field

from ..device import arch_spec
from .model import SUPPORTED_ARCHS, Netlist, Op, Queue
from .sizes import queue_buffer_bytes


@dataclass
class TensorInfo:
    """One op output or queue: its shape in tiles (t, rt, ct) and in elements (t, rows, cols)."""

    name: str
    kind: str            # "op" or the queue type ("queue" / "ram")
    shape_tiles: tuple
    shape_elements: tuple
    df: str
    tile_dim: tuple

    @property
    def tiles(self) -> int:
        t, r, c = self.shape_tiles
        return t * r * c

    @property
    def elements(self) -> int:
        t, r, c = self.shape_elements
        return t * r * c


@dataclass
class QueueInfo(TensorInfo):
    entries: int = 0
    loc: str = "dram"
    bytes: int = 0                # all buffers, all entries, one device
    role: str = ""                # input, output, parameter, e2e, ...
    producer: str = ""
    consumers: list = field(default_factory=list)


@dataclass
class EpochSummary:
    """One graph (= one epoch on its device) in execution order."""

    index: int
    graph: str
    target_device: object
    input_count: int | None
    ops: int
    ops_by_type: dict
    cores: int
    grid: tuple                  # (rows, cols) of the arch's worker grid
    data_formats: dict           # out_df -> ops
    math_fidelities: dict
    input_queues: list           # queues read by the epoch
    output_queues: list          # queues written by the epoch
    e2e_in: list                 # queues written by another epoch and read here
    e2e_out: list                # queues written here and read by another epoch
    tensors: list                # TensorInfo of every op output

    @property
    def utilization(self) -> float:
        total = self.grid[0] * self.grid[1]
        return self.cores / total if total else 0.0


@dataclass
class NetlistSummary:
    source: str | None
    archs: list
    arch: str
    graphs: int
    programs: list
    ops: int
    queues: int
    fused_ops: int
    ops_by_type: dict
    cores_per_epoch: list
    data_formats: dict           # df -> count over op outputs and queues
    math_fidelities: dict
    dram_bytes_per_channel: dict  # (device, channel) -> bytes of queue buffers
    host_bytes: int
    e2e_queues: list             # QueueInfo of queues between epochs
    queue_infos: list            # QueueInfo of every queue
    epochs: list                 # EpochSummary

    @property
    def dram_bytes(self) -> int:
        return sum(self.dram_bytes_per_channel.values())


def _elements(shape: tuple, tile_dim: tuple) -> tuple:
    t, r, c = shape
    return (t, r * tile_dim[0], c * tile_dim[1])


def _op_tensor(op: Op) -> TensorInfo:
    td = op.effective_tile_dim
    return TensorInfo(op.name, "op", op.shape, _elements(op.shape, td), op.out_df.value, td)


def _roles(n: Netlist, q: Queue, consumers: list, graph_of: dict) -> str:
    if n.queue_groups.get(q.name):
        return n.queue_groups[q.name]
    if q.fed_by_op:
        prod_graph = graph_of.get(q.input)
        if any(graph_of.get(c) != prod_graph for c in consumers):
            return "epoch_to_epoch"
        return "output" if not consumers else "buffer"
    if q.type == "ram":
        return "parameter"
    return "input"


def _queue_infos(n: Netlist) -> list:
    graph_of = {name: op.graph for name, op in n.ops.items()}
    consumers: dict = {}
    for g in n.graphs.values():
        for op in g.ops.values():
            for src in op.inputs:
                consumers.setdefault(src, []).append(op.name)
    untilizers = {name for name, op in n.ops.items() if op.untilize_output}
    out = []
    for name, q in n.queues.items():
        td = q.effective_tile_dim
        cons = consumers.get(name, [])
        buffers = len(q.allocations) or q.grid_size[0] * q.grid_size[1]
        nbytes = buffers * queue_buffer_bytes(q, tilized=q.input not in untilizers)
        out.append(QueueInfo(name, q.type, q.shape, _elements(q.shape, td), q.df.value, td, entries=q.entries,
                             loc=q.loc, bytes=nbytes, role=_roles(n, q, cons, graph_of),
                             producer=q.input, consumers=cons))
    return out


def _grid(n: Netlist, arch: str | None) -> tuple:
    arch = arch or n.arch
    if arch in SUPPORTED_ARCHS:
        spec = arch_spec(arch)
        return (spec.grid_rows, spec.grid_cols)
    return (10, 12)


def epoch_summaries(netlist: Netlist, arch: str | None = None) -> list:
    """One EpochSummary per graph, in execution order (graphs never executed last, in file order)."""
    n = netlist
    grid = _grid(n, arch)
    writer_graph = {}
    for qname, q in n.queues.items():
        if q.fed_by_op:
            for g in n.graphs.values():
                if q.input in g.ops:
                    writer_graph[qname] = g.name
    readers: dict = {}
    for g in n.graphs.values():
        for op in g.ops.values():
            for src in op.inputs:
                if src in n.queues:
                    readers.setdefault(src, set()).add(g.name)
    out = []
    for i, gname in enumerate(n.epoch_order()):
        g = n.graphs[gname]
        ops = list(g.ops.values())
        cores = sum(o.grid_size[0] * o.grid_size[1] for o in ops if o.is_tensix)
        reads = sorted({s for o in ops for s in o.inputs if s in n.queues})
        writes = sorted(q for q, wg in writer_graph.items() if wg == gname)
        out.append(EpochSummary(
            index=i, graph=gname, target_device=g.target_device, input_count=g.input_count, ops=len(ops),
            ops_by_type=dict(Counter(o.type for o in ops).most_common()), cores=cores, grid=grid,
            data_formats=dict(Counter(o.out_df.value for o in ops).most_common()),
            math_fidelities=dict(Counter(o.math_fidelity.value for o in ops).most_common()),
            input_queues=reads, output_queues=writes,
            e2e_in=[q for q in reads if writer_graph.get(q) not in (None, gname)],
            e2e_out=[q for q in writes if readers.get(q, set()) - {gname}],
            tensors=[_op_tensor(o) for o in ops]))
    return out


def summary(netlist: Netlist, arch: str | None = None) -> NetlistSummary:
    """The whole netlist at a glance (see NetlistSummary)."""
    n = netlist
    epochs = epoch_summaries(n, arch)
    infos = _queue_infos(n)
    dram: dict = {}
    host = 0
    for info, q in zip(infos, n.queues.values()):
        per_buffer = info.bytes // max(1, len(q.allocations))
        for dev in q.devices:
            if q.loc == "dram":
                for ch, _ in q.allocations:
                    dram[(dev, ch)] = dram.get((dev, ch), 0) + per_buffer
            else:
                host += info.bytes
    dfs = Counter(op.out_df.value for op in n.ops.values())
    dfs.update(q.df.value for q in n.queues.values())
    return NetlistSummary(
        source=n.source, archs=n.archs, arch=arch or n.arch, graphs=len(n.graphs),
        programs=[p.name for p in n.programs], ops=sum(len(g.ops) for g in n.graphs.values()), queues=len(n.queues),
        fused_ops=len(n.fused_ops or {}), ops_by_type=dict(Counter(o.type for o in n.ops.values()).most_common()),
        cores_per_epoch=[e.cores for e in epochs], data_formats=dict(dfs.most_common()),
        math_fidelities=dict(Counter(o.math_fidelity.value for o in n.ops.values()).most_common()),
        dram_bytes_per_channel=dict(sorted(dram.items())), host_bytes=host,
        e2e_queues=[i for i in infos if i.role == "epoch_to_epoch"], queue_infos=infos, epochs=epochs)


_TAGS = string.ascii_uppercase + string.ascii_lowercase + string.digits


def op_tags(ops: list) -> dict:
    """A short distinct tag per op name: A..Z a..z 0..9, then two letters."""
    tags = {}
    for i, op in enumerate(ops):
        if i < len(_TAGS):
            tags[op] = _TAGS[i]
        else:
            j = i - len(_TAGS)
            tags[op] = _TAGS[j // len(_TAGS) % len(_TAGS)] + _TAGS[j % len(_TAGS)]
    return tags


def grid_cells(netlist: Netlist, graph: str, arch: str | None = None) -> tuple:
    """(rows x cols matrix of op names or None, tags by op name) for one graph; out-of-grid cores are dropped."""
    rows, cols = _grid(netlist, arch)
    cells = [[None] * cols for _ in range(rows)]
    g = netlist.graphs[graph]
    placed = [op for op in g.ops.values() if op.is_tensix and op.grid_loc is not None]
    tags = op_tags([op.name for op in placed])
    for op in placed:
        r0, c0 = op.grid_loc
        h, w = op.footprint
        for r in range(max(r0, 0), min(r0 + h, rows)):
            for c in range(max(c0, 0), min(c0 + w, cols)):
                cells[r][c] = op.name if cells[r][c] is None else cells[r][c] + "|" + op.name
    return cells, tags


def draw_grid(netlist: Netlist, graph: str, arch: str | None = None) -> str:
    """The epoch's worker grid as text: one cell per core labelled with its op's tag ('.' = idle, '#' = two ops),
    followed by a legend `tag  op  type  grid_size @ grid_loc`."""
    cells, tags = grid_cells(netlist, graph, arch)
    width = max([len(t) for t in tags.values()] + [1])
    cols = len(cells[0]) if cells else 0
    head = "    " + " ".join(f"{c:>{width}}" for c in range(cols))
    lines = [head]
    for r, row in enumerate(cells):
        out = []
        for cell in row:
            if cell is None:
                out.append(".".rjust(width))
            elif "|" in cell:
                out.append("#".rjust(width))
            else:
                out.append(tags[cell].rjust(width))
        lines.append(f"{r:>3} " + " ".join(out))
    g = netlist.graphs[graph]
    for name, tag in tags.items():
        op = g.ops[name]
        lines.append(f"  {tag:<{width}}  {name}  ({op.type}, {op.grid_size[0]}x{op.grid_size[1]}"
                     f"{' transposed' if op.grid_transpose else ''} @ {list(op.grid_loc)})")
    return "\n".join(lines)
