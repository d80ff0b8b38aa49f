"""Analytic timing estimate of a netlist (no numerics): kernel cycles, bandwidth limits, epochs and switches.

Model (details and numbers in docs/simulator.md):
- per op and input: limiter = max(kernel cycles, per-core input bytes / source bandwidth, per-core output
  bytes / sink bandwidth); prologue inputs and epilogue outputs move once per epoch, not per input;
- per epoch (one execute of a graph): fill (longest op chain of one input) + (input_count - 1) * slowest op's
  limiter + prologue load + epilogue write-back;
- per program: epochs in program order (loops unrolled with their counts), plus the device's epoch switch cost
  whenever the executed graph changes.
"""
from __future__ import annotations

import collections
import dataclasses
import math
from typing import Any, Mapping

from pybuda.arch.cycles import kernel_cycles
from pybuda.arch.tms import tm_shape
from pybuda.device import DeviceSpec
from pybuda.netlist import Graph, Netlist, Op

from .errors import SimulatorError
from .executor import topo_order
from .kernels.common import inner_steps
from .loading import load_netlist, program_of, select_device
from .program import ProgramRunner, QueueSetting, param_names

LIMITERS = ("kernel", "noc_in", "dram_in", "pcie_in", "dram_out", "pcie_out")
MATMUL_TILE_CYCLES = {"grayskull": 32, "wormhole_b0": 16}  # ideal cycles per 32x32x32 tile MAC and fidelity phase


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


@dataclasses.dataclass
class EpochPerf:
    """One graph (temporal epoch) and how often the program executes it."""

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
    def __init__(self) -> None:
        self.stack = [_Trace()]
        self.settings: dict[str, Mapping[str, QueueSetting]] = {}
        self.order: list[str] = []

    def execute(self, graph: str, settings: Mapping[str, QueueSetting]) -> None:
        if graph not in self.settings:
            self.settings[graph] = settings
            self.order.append(graph)
        self.stack[-1].add(graph)

    def variable_changed(self, name: str, value: int) -> None:
        pass

    def allocate(self, queues: list[str], allocate: bool) -> None:
        pass

    def begin_repeat(self) -> None:
        self.stack.append(_Trace())

    def end_repeat(self, n: int) -> None:
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
    listener = _TraceListener()
    runner = ProgramRunner(prog, listener, params=params, default_param=1, loop_shortcut=True)
    runner.run()
    trace = listener.stack[0]
    epochs: list[EpochPerf] = []
    for index, graph in enumerate(listener.order):
        if graph not in nl.graphs:
            raise SimulatorError(f"execute: no graph {graph!r}; graphs: {', '.join(nl.graphs)}")
        epochs.append(_epoch_perf(nl, nl.graphs[graph], listener.settings[graph], arch, spec, index,
                                  trace.counts[graph]))
    total = sum(e.epoch_cycles * e.executions for e in epochs) + trace.switches * spec.epoch_switch_cycles
    total_cycles = int(math.ceil(total))
    samples = 0
    if trace.first is not None:
        first = nl.graphs[trace.first]
        samples = first.effective_input_count * first.replicas * trace.counts[trace.first]
    seconds = total_cycles / spec.clock_hz
    declared = set(param_names(prog))
    return PerfReport(
        device=spec.name, arch=arch, clock_hz=spec.clock_hz, program=name,
        params={k: v for k, v in runner.vars.items() if k in declared},
        samples=samples, total_cycles=total_cycles, seconds=seconds,
        samples_per_second=samples / seconds if seconds > 0 else 0.0, epoch_switches=trace.switches,
        epoch_switch_cycles=spec.epoch_switch_cycles, epochs=epochs, ops=[o for e in epochs for o in e.ops])


def _post_tm_tiles(shape: tuple[int, int, int], op: Op, k: int) -> tuple[int, int, int]:
    """Producer (t, rt, ct) after the edge's unpad, TMs and pad; TMs that do not apply leave the shape unchanged."""
    if k in op.input_unpad:
        unpad = op.input_unpad[k]
        rt, ct = unpad.rt or 0, unpad.ct or 0
        shape = (shape[0], max(1, shape[1] - rt), max(1, shape[2] - ct))
    for tm in op.tms(k):
        if tm[0] == "pad":
            shape = (shape[0], shape[1] + tm[1], shape[2] + tm[2])
            continue
        try:
            shape = tm_shape(shape, tm)
        except (ValueError, KeyError, IndexError):
            pass
    if k in op.input_pad:
        pad = op.input_pad[k]
        shape = (shape[0], shape[1] + (pad.rt or 0), shape[2] + (pad.ct or 0))
    return shape


def _tile_dim_after(tile_dim: tuple[int, int], tms: list) -> tuple[int, int]:
    if sum(1 for tm in tms if tm[0] == "transpose") % 2:
        return tile_dim[1], tile_dim[0]
    return tile_dim


def _input_info(nl: Netlist, op: Op, k: int, flag) -> TensorInfo:
    src = op.inputs[k]
    if src in nl.queues:
        q = nl.queues[src]
        producer, tile_dim = q.shape, q.effective_tile_dim
        memory = "HOST" if q.loc == "host" else "DRAM"
        if flag(src, "prologue"):
            memory += "_PROLOGUE"
    else:
        src_op = nl.producer(src)
        producer, tile_dim, memory = src_op.shape, src_op.effective_tile_dim, "L1"
    t, rt, ct = _post_tm_tiles(producer, op, k)
    h, w = _tile_dim_after(tile_dim, op.tms(k))
    df = op.in_df[k].value if k < len(op.in_df) else op.out_df.value
    return TensorInfo(name=src, shape=(t, rt * h, ct * w), df=df, memory=memory)


def _output_info(nl: Netlist, op: Op, queues: list[str], read_by_ops: bool) -> TensorInfo:
    kinds = []
    if read_by_ops:
        kinds.append("L1")
    for qn in queues:
        kind = "HOST" if nl.queues[qn].loc == "host" else "DRAM"
        if kind not in kinds:
            kinds.append(kind)
    t, rt, ct = op.shape
    h, w = op.effective_tile_dim
    return TensorInfo(name=",".join(queues) if queues else op.name, shape=(t, rt * h, ct * w),
                      df=op.out_df.value, memory="+".join(kinds) or "L1")


def _per_core_tiles(op: Op, k: int, shape: tuple[int, int, int]) -> float:
    """Tiles one core of `op` reads from input `k` per input: matmul rows/columns strips (identity matmul: its
    grid row's sparse tiles and encoding, all activations of its columns), else an even split."""
    total = shape[0] * shape[1] * shape[2]
    gr, gc = op.grid_size
    if op.type == "matmul" and op.attrs.identity:
        # sparse tiles and encoding: one block per grid row; activations: all of K for the core's columns
        return total / gc if k == 1 else total / gr
    if op.type == "matmul":
        if k == 0:
            return total / gr
        if k == 1:
            return total / gc
    return total / op.cores


def _epoch_perf(nl: Netlist, graph: Graph, settings: Mapping[str, QueueSetting], arch: str, spec: DeviceSpec,
                index: int, executions: int) -> EpochPerf:
    ops = list(graph.ops.values())
    writers: dict[str, list[str]] = collections.defaultdict(list)
    for qname, q in nl.queues.items():
        if q.input in graph.ops:
            writers[q.input].append(qname)

    def flag(queue: str, field: str) -> bool:
        s = settings.get(queue)
        return s is not None and s.flag(field)

    # cores contending for DRAM / PCIe in this epoch
    readers = collections.Counter()
    writers_count = collections.Counter()
    for op in ops:
        kinds = set()
        for src in op.inputs:
            if src in nl.queues:
                q = nl.queues[src]
                kinds.add(("prologue_" if flag(src, "prologue") else "") + ("pcie" if q.loc == "host" else "dram"))
        for kind in kinds:
            readers[kind] += op.cores
        out_kinds = {("epilogue_" if flag(qn, "epilogue") else "") + ("pcie" if nl.queues[qn].loc == "host" else "dram")
                     for qn in writers.get(op.name, [])}
        for kind in out_kinds:
            writers_count[kind] += op.cores

    channels = spec.dram_channels

    def dram_bw(cores: int) -> float:
        return spec.dram_bw_bytes_per_cycle / max(2, math.ceil(cores / channels))

    def pcie_bw(cores: int) -> float:
        return spec.pcie_bw_bytes_per_cycle / max(1, cores)

    bw_in = {"dram": dram_bw(readers["dram"]), "pcie": pcie_bw(readers["pcie"]),
             "prologue_dram": dram_bw(readers["prologue_dram"]), "prologue_pcie": pcie_bw(readers["prologue_pcie"])}
    bw_out = {"dram": dram_bw(writers_count["dram"]), "pcie": pcie_bw(writers_count["pcie"]),
              "epilogue_dram": dram_bw(writers_count["epilogue_dram"]),
              "epilogue_pcie": pcie_bw(writers_count["epilogue_pcie"])}

    perfs: dict[str, OpPerf] = {}
    prologue_cycles = 0.0
    epilogue_cycles = 0.0
    read_in_graph = {src for op in ops for src in op.inputs if src in graph.ops}
    for op in ops:
        attrs = dict(op.attrs.items())
        m_k, u_kt = inner_steps(op)
        kernel = kernel_cycles(arch, op.type, t=op.t, mblock=op.mblock, ublock=op.ublock, out_df=op.out_df,
                               math_fidelity=op.math_fidelity, m_k=m_k, u_kt=u_kt, attributes=attrs)
        terms: dict[str, float] = {"kernel": float(kernel)}
        prologue_time = 0.0
        prologue_bytes = 0
        for k, src in enumerate(op.inputs):
            producer = nl.producer(src).shape
            tiles = _per_core_tiles(op, k, _post_tm_tiles(producer, op, k))
            df = op.in_df[k] if k < len(op.in_df) else op.out_df
            nbytes = tiles * df.tile_bytes
            if src in nl.queues:
                loc = "pcie" if nl.queues[src].loc == "host" else "dram"
                if flag(src, "prologue"):
                    prologue_bytes += int(nbytes)
                    prologue_time += nbytes / bw_in["prologue_" + loc]
                    continue
                term, cycles = f"{loc}_in", nbytes / bw_in[loc]
            else:
                term, cycles = "noc_in", nbytes / spec.noc_bw_bytes_per_cycle
            terms[term] = max(terms.get(term, 0.0), cycles)
        epilogue_time = 0.0
        epilogue_bytes = 0
        for qname in writers.get(op.name, []):
            q = nl.queues[qname]
            loc = "pcie" if q.loc == "host" else "dram"
            nbytes = op.tiles_per_core * q.df.tile_bytes
            if flag(qname, "epilogue"):
                epilogue_bytes += nbytes
                epilogue_time += nbytes / bw_out["epilogue_" + loc]
                continue
            term = f"{loc}_out"
            terms[term] = max(terms.get(term, 0.0), nbytes / bw_out[loc])
        limiter = max(LIMITERS, key=lambda name: (terms.get(name, -1.0), -LIMITERS.index(name)))
        bw = max((v for key, v in terms.items() if key != "kernel"), default=0.0)
        perfs[op.name] = OpPerf(
            name=op.name, type=op.type, graph=graph.name, epoch=index, grid=op.grid_size, cores=op.cores,
            kernel_cycles=kernel, bw_cycles=bw, limiter_cycles=terms[limiter], limiter=limiter, terms=terms,
            prologue_bytes_per_core=prologue_bytes, epilogue_bytes_per_core=epilogue_bytes,
            device=graph.devices[0], input_count=graph.effective_input_count, math_fidelity=op.math_fidelity.value,
            t=op.t, mblock=op.mblock, ublock=op.ublock, m_k=m_k, u_kt=u_kt,
            inputs=[_input_info(nl, op, k, flag) for k in range(len(op.inputs))],
            output=_output_info(nl, op, writers.get(op.name, []), op.name in read_in_graph),
            attributes=attrs)
        prologue_cycles = max(prologue_cycles, prologue_time)
        epilogue_cycles = max(epilogue_cycles, epilogue_time)

    if not perfs:
        return EpochPerf(index=index, graph=graph.name, input_count=graph.effective_input_count,
                         executions=executions, cores=0, pipeline_cycles=0.0, fill_cycles=0.0, prologue_cycles=0.0,
                         epilogue_cycles=0.0, epoch_cycles=0.0, slowest_op="", limiter="", math_utilization=0.0,
                         ops=[])
    slowest = max(perfs.values(), key=lambda p: p.limiter_cycles)
    pipeline = slowest.limiter_cycles
    fill = _longest_chain(nl, graph, perfs)
    util_sum = 0.0
    for op in ops:
        if op.type != "matmul" or op.attrs.identity:
            continue
        z = (1 if op.attrs.z is None else op.attrs.z) if op.attrs.accumulate else 1
        m_k, u_kt = inner_steps(op)
        tile_macs = op.t * z * op.mblock[0] * op.ublock[0] * op.mblock[1] * op.ublock[1] * m_k * u_kt
        ideal = tile_macs * op.math_fidelity.phases * MATMUL_TILE_CYCLES[arch]
        util = min(1.0, ideal / pipeline) if pipeline > 0 else 0.0
        perfs[op.name].math_utilization = util
        util_sum += util * op.cores
    epoch_cycles = fill + (graph.effective_input_count - 1) * pipeline + prologue_cycles + epilogue_cycles
    return EpochPerf(
        index=index, graph=graph.name, input_count=graph.effective_input_count, executions=executions,
        cores=sum(op.cores for op in ops), pipeline_cycles=pipeline, fill_cycles=fill,
        prologue_cycles=prologue_cycles, epilogue_cycles=epilogue_cycles, epoch_cycles=epoch_cycles,
        slowest_op=slowest.name, limiter=slowest.limiter, math_utilization=util_sum / spec.cores,
        ops=list(perfs.values()), device=graph.devices[0],
        matmul_cores=sum(op.cores for op in ops if op.type in ("matmul", "depthwise")),
        samples_per_second=(graph.effective_input_count * graph.replicas * spec.clock_hz / epoch_cycles
                            if epoch_cycles else 0.0))


def _longest_chain(nl: Netlist, graph: Graph, perfs: Mapping[str, OpPerf]) -> float:
    """Largest sum of per-input limiter cycles along a dependency chain of the graph's ops."""
    try:
        order = topo_order(graph, nl)
    except SimulatorError:
        return max(p.limiter_cycles for p in perfs.values())
    writer_of = {name: q.input for name, q in nl.queues.items() if q.input in graph.ops}
    best: dict[str, float] = {}
    for op in order:
        preds = [src for src in op.inputs if src in graph.ops]
        preds += [writer_of[src] for src in op.inputs if src in writer_of and writer_of[src] != op.name]
        best[op.name] = perfs[op.name].limiter_cycles + max((best[p] for p in preds if p in best), default=0.0)
    return max(best.values())
