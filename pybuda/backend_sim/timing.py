"""Performance estimate of a netlist (no numerics): an adapter from the netlist's ops, queues and program to the
one backend model (`pybuda.arch.perf`: limiter cycles, epoch cost, program cost), plus what reports print.

Per op and input, the transfers are what the netlist says: op inputs of the same graph over the NoC, queue inputs
from DRAM or the host (prologued queues once per epoch), writes to the queues the op feeds (epilogue queues once
per epoch). The program is run (loops unrolled with their counts, `param`s default 1) to find how often each graph
executes and how often the executed graph changes. On wormhole, consecutive executes (in one instruction list)
of graphs on disjoint chips run as one temporal epoch (`pybuda.arch.perf.temporal_epochs`), timed as one epoch
of all their ops. Details and numbers in docs/simulator.md.
"""
from __future__ import annotations

import collections
import dataclasses
from typing import Any, Mapping

from pybuda.arch.cycles import fused_op_cycles, ideal_math_cycles, kernel_cycles
from pybuda.arch.movement import prologue_bytes
from pybuda.arch.operands import input_buffer_inputs, output_buffer_inputs, output_granules, tiles_read_per_core
from pybuda.arch.perf import LIMITERS, EpochTiming, OpLoad, Transfer, epoch_timing, program_cycles, temporal_epochs
from pybuda.arch.tms import TMError, tm_shape
from pybuda.dataformat import MathFidelity
from pybuda.device import DeviceSpec
from pybuda.netlist import model as nm
from pybuda.netlist.movement import moving_op

from .errors import SimulatorError
from .loading import load_netlist, program_of, select_device
from .program import ProgramRunner, QueueSetting, param_names
from .sparse_figures import sparse_geometry

__all__ = ["estimate", "PerfReport", "EpochPerf", "OpPerf", "TensorInfo", "LIMITERS"]


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """An op operand or result for reports: (t, R, C) in elements (after the edge's TMs), format, memory."""

    name: str
    shape: tuple[int, int, int]
    df: str
    memory: str  # "L1" (op to op), "DRAM", "HOST", "DRAM_PROLOGUE", "HOST_PROLOGUE"; outputs may join with "+"


@dataclasses.dataclass
class OpPerf:
    """One op's per-core, per-input timing (plus what reports print about it)."""

    name: str
    type: str
    graph: str
    epoch: int
    grid: tuple[int, int]
    cores: int
    kernel_cycles: int
    bw_cycles: float
    limiter_cycles: float
    limiter: str
    terms: dict[str, float]
    prologue_bytes_per_core: int = 0
    epilogue_bytes_per_core: int = 0
    math_utilization: float | None = None
    device: int = 0
    input_count: int = 1
    math_fidelity: str = ""
    t: int = 1
    mblock: tuple[int, int] = (1, 1)
    ublock: tuple[int, int] = (1, 1)
    m_k: int = 1
    u_kt: int = 1
    inputs: list[TensorInfo] = dataclasses.field(default_factory=list)
    output: TensorInfo | None = None
    attributes: dict = dataclasses.field(default_factory=dict)
    fork: str = ""          # the fork whose fork-join stalls this op (limiter "fork_join")
    link: str = ""          # the busiest NoC link or NIU of its pipes (limiter "noc_link")
    link_ends: tuple = ()   # its (from, to) worker cores (row, col), None where it is not at a worker core


@dataclasses.dataclass
class EpochPerf:
    """One temporal epoch (a graph, or graphs on different chips that run together: `graph` joins their names
    with "+") and how often the program executes it."""

    index: int
    graph: str
    input_count: int
    executions: int
    cores: int
    pipeline_cycles: float
    fill_cycles: float
    prologue_cycles: float
    epilogue_cycles: float
    epoch_cycles: float
    slowest_op: str
    limiter: str
    math_utilization: float
    ops: list[OpPerf]
    device: int = 0
    matmul_cores: int = 0
    samples_per_second: float = 0.0  # this epoch alone: input_count per epoch_cycles at the device clock


@dataclasses.dataclass
class PerfReport:
    """Result of `estimate`. samples = input_count of the first executed graph x its executions (x replicas)."""

    device: str
    arch: str
    clock_hz: float
    program: str
    params: dict[str, int]
    samples: int
    total_cycles: int
    seconds: float
    samples_per_second: float
    epoch_switches: int
    epoch_switch_cycles: int
    epochs: list[EpochPerf]
    ops: list[OpPerf]

    def to_text(self, top_ops: int = 10) -> str:
        """Perf-analyzer-style summary: totals, one row per epoch, the slowest ops (see report.summary_text)."""
        from .report import summary_text
        return summary_text(self, top_ops=top_ops)

    summary = to_text

    def csv_rows(self) -> list[dict]:
        """One dict per op with the per-op CSV columns (see report.CSV_COLUMNS)."""
        from .report import csv_rows
        return csv_rows(self)

    def to_csv(self, path: str) -> None:
        """Write the per-op CSV report (columns modelled on the device profiler's ops report)."""
        from .report import write_csv
        write_csv(self, path)

    def to_rich(self, top_ops: int = 10):
        """The summary as rich renderables (a Group of tables), for `rich.print`."""
        from .report import rich_summary
        return rich_summary(self, top_ops=top_ops)


class _Trace:
    """Executions per graph, first/last graph and graph changes of a run of the program (composable)."""

    def __init__(self) -> None:
        self.counts: collections.Counter = collections.Counter()
        self.first: str | None = None
        self.last: str | None = None
        self.switches = 0

    def add(self, graph: str) -> None:
        if self.last is not None and self.last != graph:
            self.switches += 1
        self.first = self.first or graph
        self.last = graph
        self.counts[graph] += 1

    def extend(self, other: "_Trace") -> None:
        if other.first is None:
            return
        if self.last is not None and self.last != other.first:
            self.switches += 1
        self.first = self.first or other.first
        self.last = other.last
        self.switches += other.switches
        self.counts.update(other.counts)

    def repeated(self, n: int) -> "_Trace":
        out = _Trace()
        out.first, out.last = self.first, self.last
        out.counts = collections.Counter({g: c * n for g, c in self.counts.items()})
        out.switches = n * self.switches + (n - 1) * int(self.first is not None and self.last != self.first)
        return out


class _TraceListener:
    """Records the temporal epochs a program run executes: each a tuple of graph names (`temporal_epochs` over
    the consecutive executes of one instruction list), in the trace by the joined name."""

    def __init__(self, nl: nm.Netlist, arch: str) -> None:
        self.nl, self.arch = nl, arch
        self.stack = [_Trace()]
        self.settings: dict[str, Mapping[str, QueueSetting]] = {}
        self.order: list[tuple[str, ...]] = []
        self.pending: list[str] = []

    def execute(self, graph: str, settings: Mapping[str, QueueSetting]) -> None:
        if graph not in self.nl.graphs:
            raise SimulatorError(f"execute: no graph {graph!r}; graphs: {', '.join(self.nl.graphs)}")
        self.settings.setdefault(graph, settings)
        self.pending.append(graph)
        groups = temporal_epochs(self.arch, [frozenset(self.nl.graphs[g].devices) for g in self.pending])
        if len(groups) > 1:
            self._flush(self.pending[:-1])
            self.pending = [graph]

    def _flush(self, graphs: list[str]) -> None:
        if graphs:
            unit = tuple(graphs)
            if unit not in self.order:
                self.order.append(unit)
            self.stack[-1].add("+".join(unit))

    def finish(self) -> None:
        self._flush(self.pending)
        self.pending = []

    def variable_changed(self, name: str, value: int) -> None:
        pass

    def allocate(self, queues: list[str], allocate: bool) -> None:
        pass

    def begin_repeat(self) -> None:
        self.finish()
        self.stack.append(_Trace())

    def end_repeat(self, n: int) -> None:
        self.finish()
        body = self.stack.pop()
        self.stack[-1].extend(body.repeated(n))


def estimate(netlist: Any, device: str | None = None, *, program: str | None = None,
             params: Mapping[str, Any] | None = None) -> PerfReport:
    """Estimate a netlist's run time and throughput without computing values.

    device: device name ("e150", "n150", ...); default the netlist's arch on e150 (grayskull, 1.2 GHz) or n150
    (wormhole_b0, 1.0 GHz). program: default the first. params: program parameters; missing ones count as 1.
    """
    nl = load_netlist(netlist)
    arch, spec = select_device(nl, device)
    prog = program_of(nl, program)
    name = prog.name
    listener = _TraceListener(nl, arch)
    runner = ProgramRunner(prog, listener, params=params, default_param=1, loop_shortcut=True)
    runner.run()
    listener.finish()
    trace = listener.stack[0]
    epochs = [_epoch_perf(nl, [nl.graphs[g] for g in unit], listener.settings, arch, spec, index,
                          trace.counts["+".join(unit)]) for index, unit in enumerate(listener.order)]
    total_cycles = program_cycles(spec, ((e.epoch_cycles, e.executions) for e in epochs), trace.switches)
    samples = 0
    if trace.first is not None:
        first = nl.graphs[trace.first.split("+")[0]]
        samples = (first.input_count or 1) * len(first.devices) * trace.counts[trace.first]
    seconds = total_cycles / spec.clock_hz
    return PerfReport(
        device=spec.name, arch=arch, clock_hz=spec.clock_hz, program=name,
        params={k: v for k, v in runner.vars.items() if k in set(param_names(prog))},
        samples=samples, total_cycles=total_cycles, seconds=seconds,
        samples_per_second=samples / seconds if seconds > 0 else 0.0, epoch_switches=trace.switches,
        epoch_switch_cycles=spec.epoch_switch_cycles, epochs=epochs, ops=[o for e in epochs for o in e.ops])


def _edge_tiles(producer: tuple, op: nm.Op, k: int) -> tuple[int, int, int]:
    """(t, rt, ct) op input `k` reads: the producer's shape after the edge's unpad, TMs and pad; a TM that does
    not apply (the validator reports it) leaves the shape unchanged."""
    t, rt, ct = producer
    unpad, pad = op.input_unpad.get(k), op.input_pad.get(k)
    if unpad is not None:
        rt, ct = max(1, rt - (unpad.rt or 0)), max(1, ct - (unpad.ct or 0))
    shape = (t, rt, ct)
    for tm in op.tms(k):
        try:
            shape = tm_shape(shape, tm)
        except TMError:
            pass
    if pad is not None:
        shape = (shape[0], shape[1] + (pad.rt or 0), shape[2] + (pad.ct or 0))
    return shape


def _producer(nl: nm.Netlist, op: nm.Op, k: int) -> nm.Queue | nm.Op:
    producer = nl.producer(op.inputs[k])
    if producer is None:
        raise SimulatorError(f"op {op.name!r}: input {k} {op.inputs[k]!r} is neither a queue nor an op")
    return producer


def _tile_dim_after(tile_dim: tuple[int, int], tms: list) -> tuple[int, int]:
    if sum(1 for tm in tms if tm[0] == "transpose") % 2:
        return tile_dim[1], tile_dim[0]
    return tile_dim


def _in_df(op: nm.Op, k: int):
    return op.in_df[k] if k < len(op.in_df) else op.out_df


def _input_info(nl: nm.Netlist, op: nm.Op, k: int, prologue: bool) -> TensorInfo:
    src = op.inputs[k]
    producer = _producer(nl, op, k)
    if isinstance(producer, nm.Queue):
        memory = ("HOST" if producer.loc == "host" else "DRAM") + ("_PROLOGUE" if prologue else "")
    else:
        memory = "L1"
    t, rt, ct = _edge_tiles(producer.shape, op, k)
    h, w = _tile_dim_after(producer.effective_tile_dim, op.tms(k))
    return TensorInfo(name=src, shape=(t, rt * h, ct * w), df=_in_df(op, k).value, memory=memory)


def _output_info(nl: nm.Netlist, op: nm.Op, queues: list[str], read_by_ops: bool) -> TensorInfo:
    kinds = ["L1"] if read_by_ops else []
    for qn in queues:
        kind = "HOST" if nl.queues[qn].loc == "host" else "DRAM"
        if kind not in kinds:
            kinds.append(kind)
    t, rt, ct = op.shape
    h, w = op.effective_tile_dim
    return TensorInfo(name=",".join(queues) if queues else op.name, shape=(t, rt * h, ct * w),
                      df=op.out_df.value, memory="+".join(kinds) or "L1")


def _channels(q: nm.Queue, spec: DeviceSpec) -> tuple[int, ...]:
    """DRAM channel of each buffer of a DRAM queue, as `DeviceSpec.system_channel` ids (none for a host queue)."""
    return tuple(spec.system_channel(q.devices[0], ch) for ch, _ in q.allocations) if q.loc == "dram" else ()


def _remote(q: nm.Queue, graph: nm.Graph, spec: DeviceSpec) -> bool:
    """Whether the graph's chip reaches the queue over the chip-to-chip ethernet: a DRAM queue of another chip, a
    host queue from a chip without the PCIe link."""
    return graph.devices[0] != (spec.mmio_chip if q.loc == "host" else q.devices[0])


def _op_load(nl: nm.Netlist, graph: nm.Graph, op: nm.Op, arch: str, flag, written: dict, writer_of: dict,
             spec: DeviceSpec) -> OpLoad:
    """What one netlist op asks of the hardware per input (the one backend model's OpLoad; its pipes from
    `pybuda.netlist.movement`)."""
    fused = nl.fused_op_of(op) if op.type == "fused_op" else None
    geom = sparse_geometry(op) if fused is None else nl.geometry_of(op)
    fidelity = op.math_fidelity or MathFidelity.HiFi4
    kernel = (fused_op_cycles(arch, fused.steps(op), op.out_df, fidelity) if fused is not None
              else kernel_cycles(arch, geom, op.out_df, fidelity))
    moving = moving_op(nl, graph, op, geom, spec, lambda queue: flag(queue, "prologue"), written.get(op.name, []))
    reads, preds, in_buffers = [], [], []
    min_tiles = op.input_buf_min_size_tiles or ()
    for k, src in enumerate(op.inputs):
        q = nl.queues.get(src)
        producer = _producer(nl, op, k)
        shape = _edge_tiles(producer.shape, op, k)
        nbytes = tiles_read_per_core(geom, k, shape) * _in_df(op, k).tile_bytes
        if q is None:
            if src in graph.ops:
                preds.append(src)
                in_buffers.append(input_buffer_inputs(geom, k, shape, _in_df(op, k).tile_bytes,
                                                      min_tiles[k] if k < len(min_tiles) else 0))
        elif q.loc == "host":
            t, rt, ct = q.shape
            reads.append(Transfer(nbytes, "pcie", once=flag(src, "prologue"), source=src,
                                  source_bytes=t * rt * ct * q.df.tile_bytes, remote=_remote(q, graph, spec)))
        else:
            once = flag(src, "prologue")
            reads.append(Transfer(prologue_bytes(geom, k, moving.inputs[k], nbytes) if once else nbytes, "dram",
                                  once=once, channels=_channels(q, spec), remote=_remote(q, graph, spec)))
            if writer_of.get(src, op.name) != op.name and not q.is_ram:   # a ram is read before it is written back
                preds.append(writer_of[src])
                in_buffers.append(float(q.entries))
    writes = [Transfer(geom.tiles_per_core * nl.queues[qn].df.tile_bytes,
                       "pcie" if nl.queues[qn].loc == "host" else "dram", once=flag(qn, "epilogue"),
                       channels=_channels(nl.queues[qn], spec), remote=_remote(nl.queues[qn], graph, spec))
              for qn in written.get(op.name, [])]
    return OpLoad(op.name, geom.cores, kernel, tuple(reads), tuple(writes), tuple(preds),
                  out_buffer=output_buffer_inputs(geom, op.buf_size_mb), in_buffers=tuple(in_buffers),
                  granules=output_granules(geom), moving=moving)


def _epoch_perf(nl: nm.Netlist, graphs: list[nm.Graph], settings: Mapping[str, Mapping[str, QueueSetting]],
                arch: str, spec: DeviceSpec, index: int, executions: int) -> EpochPerf:
    """The timing of one temporal epoch: `graphs` run together (one, or several on different chips)."""
    name = "+".join(g.name for g in graphs)
    ops = [op for g in graphs for op in g.ops.values()]
    graph_of = {op.name: g for g in graphs for op in g.ops.values()}
    input_count = max(g.input_count or 1 for g in graphs)
    written: dict[str, list[str]] = collections.defaultdict(list)
    for qname, q in nl.queues.items():
        if q.input in graph_of:
            written[q.input].append(qname)
    writer_of = {qname: q.input for qname, q in nl.queues.items() if q.input in graph_of}

    def flags(graph: nm.Graph):
        def flag(queue: str, field: str) -> bool:
            s = settings[graph.name].get(queue)
            return s is not None and s.flag(field)
        return flag

    flag_of = {g.name: flags(g) for g in graphs}
    loads = [_op_load(nl, graph_of[op.name], op, arch, flag_of[graph_of[op.name].name], written, writer_of, spec)
             for op in ops]
    timing: EpochTiming = epoch_timing(spec, loads, input_count)
    device, replicas = graphs[0].devices[0], len(graphs[0].devices)
    chips = len({d for g in graphs for d in g.devices})
    if not ops:
        return EpochPerf(index=index, graph=name, input_count=input_count, executions=executions, cores=0,
                         pipeline_cycles=0.0, fill_cycles=0.0, prologue_cycles=0.0, epilogue_cycles=0.0,
                         epoch_cycles=0.0, slowest_op="", limiter="", math_utilization=0.0, ops=[], device=device)
    read_in_graph = {src for op in ops for src in op.inputs if src in graph_of[op.name].ops}
    perfs = []
    util_sum = 0.0
    for op, t in zip(ops, timing.ops):
        util = None
        if op.type == "matmul" and not op.attrs.identity:
            ideal = ideal_math_cycles(arch, op.geometry, op.math_fidelity or MathFidelity.HiFi4)
            util = min(1.0, ideal / timing.pipeline_cycles) if timing.pipeline_cycles > 0 else 0.0
            util_sum += util * op.geometry.cores
        flag = flag_of[graph_of[op.name].name]
        perfs.append(OpPerf(
            name=op.name, type=op.type, graph=graph_of[op.name].name, epoch=index, grid=tuple(op.grid_size),
            cores=op.geometry.cores, kernel_cycles=t.kernel_cycles, bw_cycles=t.bw_cycles,
            limiter_cycles=t.limiter_cycles, limiter=t.limiter, terms=t.terms,
            prologue_bytes_per_core=t.prologue_bytes, epilogue_bytes_per_core=t.epilogue_bytes,
            math_utilization=util, device=graph_of[op.name].devices[0], input_count=input_count,
            math_fidelity=(op.math_fidelity or MathFidelity.HiFi4).value, t=op.t, mblock=tuple(op.mblock),
            ublock=tuple(op.ublock), m_k=op.geometry.m_k, u_kt=op.geometry.u_kt,
            inputs=[_input_info(nl, op, k, flag(src, "prologue")) for k, src in enumerate(op.inputs)],
            output=_output_info(nl, op, written.get(op.name, []), op.name in read_in_graph),
            attributes=dict(op.attrs.items()), fork=t.fork, link=t.link,
            link_ends=t.link_ends))
    epoch_cycles = timing.epoch_cycles
    return EpochPerf(
        index=index, graph=name, input_count=input_count, executions=executions,
        cores=sum(p.cores for p in perfs), pipeline_cycles=timing.pipeline_cycles, fill_cycles=timing.fill_cycles,
        prologue_cycles=timing.prologue_cycles, epilogue_cycles=timing.epilogue_cycles, epoch_cycles=epoch_cycles,
        slowest_op=timing.slowest.name, limiter=timing.slowest.limiter,
        math_utilization=util_sum / (spec.cores * chips),
        ops=perfs, device=device, matmul_cores=sum(p.cores for p in perfs if p.type in ("matmul", "depthwise")),
        samples_per_second=input_count * replicas * spec.clock_hz / epoch_cycles if epoch_cycles else 0.0)
