"""What the HTML report shows, gathered from a compiled model or from netlist files alone: the model summary
(stages and their times, host and device ops), each stage's graph, and per netlist the placement of every epoch
with each op's model and cycles, the epoch timings and the balancer's plan against its lower bound."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from ..backend_sim import estimate
from ..backend_sim.report import limiter_text
from ..backend_sim.timing import EpochPerf, OpPerf, PerfReport
from ..device import get_device
from ..ir import Graph
from ..netlist import Netlist, load
from ..runtime.tti import netlist_sources


@dataclasses.dataclass(frozen=True)
class GraphNode:
    """One node of a stage's graph: its kind (op type for an op), shape, format, operands and the first stage
    that has it."""

    name: str
    kind: str
    shape: tuple
    df: str
    inputs: tuple[str, ...]
    origin: str
    is_op: bool


@dataclasses.dataclass(frozen=True)
class StageView:
    name: str
    seconds: float | None
    nodes: tuple[GraphNode, ...]


@dataclasses.dataclass(frozen=True)
class OpView:
    """One placed op: where it sits (row, column, rows, columns of the grid), its op model and its cycles."""

    name: str
    type: str
    row: int
    col: int
    rows: int
    cols: int
    model: str
    out_df: str
    fidelity: str
    kernel_cycles: int
    limiter_cycles: float
    limiter: str
    cores: int


@dataclasses.dataclass(frozen=True)
class LinkView:
    """The NoC link or NIU that limits an epoch's slowest op: its name and its ends on the core grid ((row, col),
    None where an end is not a worker core: a DRAM or PCIe node, or the other side of an NIU)."""

    label: str
    src: tuple | None
    dst: tuple | None


@dataclasses.dataclass(frozen=True)
class EpochView:
    """One epoch: its cycles split as the backend model adds them up (the epoch switch before it; fill, the
    first input through the pipeline; pipeline, the slowest op per input for each further input; parameter reload,
    the prologue; epilogue writes), its slowest op and its placed ops."""

    index: int
    graph: str
    inputs: int
    cores: int
    switch: float
    fill: float
    pipeline: float
    reload: float
    epilogue: float
    total: float
    slowest_op: str
    math_utilization: float
    ops: tuple[OpView, ...]
    link: LinkView | None = None     # the busiest link, when it limits the slowest op (drawn on the grid)


@dataclasses.dataclass(frozen=True)
class PartView:
    """One netlist: its device, grid and program estimate."""

    name: str
    device: str
    grid: tuple[int, int]
    program: str
    samples_per_second: float
    total_cycles: int
    epochs: tuple[EpochView, ...]


@dataclasses.dataclass(frozen=True)
class PlanView:
    """The balancer's plan of a netlist against the lower bounds of its cycles."""

    policy: str
    estimated_cycles: int
    bounds: dict[str, float]
    lower_bound_cycles: int
    ratio: float


@dataclasses.dataclass(frozen=True)
class ReportData:
    title: str
    summary: tuple[tuple[str, str], ...]
    stages: tuple[StageView, ...]
    host_ops: tuple[str, ...]
    parts: tuple[PartView, ...]
    plans: tuple[PlanView | str, ...]   # per part: its plan, or why there is none


def _op_view(op: Any, perf: OpPerf) -> OpView:
    rows, cols = op.grid_size
    if op.grid_transpose:
        rows, cols = cols, rows
    row, col = op.grid_loc if op.grid_loc is not None else (0, 0)
    model = (f"grid {op.grid_size[0]}x{op.grid_size[1]}{' transposed' if op.grid_transpose else ''}, t {op.t}, "
             f"mblock {op.mblock[0]}x{op.mblock[1]}, ublock {op.ublock[0]}x{op.ublock[1]}"
             + (f", m_k {perf.m_k}, u_kt {perf.u_kt}" if op.type == "matmul" else ""))
    return OpView(op.name, op.type, row, col, rows, cols, model, str(op.out_df.value), str(op.math_fidelity.value),
                  int(perf.kernel_cycles), float(perf.limiter_cycles), limiter_text(perf), perf.cores)


def _epoch_view(netlist: Netlist, epoch: EpochPerf, switch: float) -> EpochView:
    ops = tuple(_op_view(netlist.graphs[o.graph].ops[o.name], o) for o in epoch.ops)
    pipeline = epoch.pipeline_cycles * max(epoch.input_count - 1, 0)
    slow = next((o for o in epoch.ops if o.name == epoch.slowest_op), None)
    link = LinkView(slow.link, *slow.link_ends) if slow is not None and slow.limiter == "noc_link" and \
        slow.link_ends else None
    return EpochView(epoch.index, epoch.graph, epoch.input_count, epoch.cores, switch, epoch.fill_cycles, pipeline,
                     epoch.prologue_cycles, epoch.epilogue_cycles, epoch.epoch_cycles + switch, epoch.slowest_op,
                     epoch.math_utilization, ops, link)


def part_view(name: str, netlist: Netlist, report: PerfReport) -> PartView:
    """The placement and timing of one netlist from its estimate."""
    spec = get_device(report.device)
    switch = report.epoch_switch_cycles
    epochs = tuple(_epoch_view(netlist, e, switch if k else 0) for k, e in enumerate(report.epochs))
    return PartView(name, report.device, (spec.grid_rows, spec.grid_cols), report.program,
                    report.samples_per_second, report.total_cycles, epochs)


def plan_view(placement: Any) -> PlanView | str:
    """The plan against its bounds (or why there is none)."""
    if placement is None or placement.bounds is None:
        return "the balancer gave no bounds for this plan"
    b = placement.bounds
    bounds = {"work": b.work, "critical op": b.op, "schedule segments": b.segments}
    if b.solver is not None:
        bounds["CP-SAT (its split)"] = b.solver
    return PlanView(placement.policy, placement.estimated_cycles, bounds, placement.lower_bound_cycles,
                    placement.bound_ratio)


def stage_views(graphs: dict[str, Graph], times: dict[str, float]) -> tuple[StageView, ...]:
    """Every stage that ran, in order, with its time and the graph it left (none for the stages after the last
    graph: balance, netlist), every node with the first stage that has it."""
    origin: dict[str, str] = {}
    views = []
    for stage in list(times) + [g for g in graphs if g not in times]:
        graph, nodes = graphs.get(stage), []
        for name in graph.topo_order() if graph is not None else ():
            node = graph.node(name)
            origin.setdefault(name, stage)
            nodes.append(GraphNode(name, node.op_type or node.kind, tuple(node.shape), str(node.df.value),
                                   tuple(o.src for o in graph.operands(name)), origin[name], node.kind == "op"))
        views.append(StageView(stage, times.get(stage), tuple(nodes)))
    return tuple(views)


def from_compiled(compiled: Any) -> ReportData:
    """The report of a compiled model (pybuda.compile's result)."""
    perf = compiled.perf
    names = [Path(p).name for p in compiled.netlist_paths]
    if compiled.training is not None:   # one netlist, its programs run_fwd, run_bwd and run_opt (if on the device)
        parts = tuple(part_view(f"{names[0]}: {r.program}", compiled.netlists[0], r) for r in perf.parts)
        plans = (plan_view(compiled.placement),) + ("the plan of the netlist's programs is with run_fwd's",) * \
            (len(parts) - 1)
    else:
        parts = tuple(part_view(n, nl, r) for n, nl, r in zip(names, compiled.netlists, perf.parts))
        plans = tuple(plan_view(p) for p in compiled.placements)
    summary = (("model", compiled.name), ("device", compiled.device), ("microbatch", str(compiled.microbatch)),
               ("compile", f"{sum(compiled.stage_times.values()):.2f} s in {len(compiled.stage_times)} stages"),
               ("ops on the host", str(len(compiled.host_ops))),
               ("device ops", str(sum(len(e.ops) for p in parts for e in p.epochs))),
               ("estimate", f"{perf.samples_per_second:,.1f} samples/s ({perf.total_cycles:,} cycles)"))
    return ReportData(f"pybuda report: {compiled.name}", summary, stage_views(compiled.graphs, compiled.stage_times),
                      tuple(compiled.host_ops), parts, plans)


def from_netlists(title: str, named: list[tuple[str, Netlist]], device: str | None = None) -> ReportData:
    """The report of netlists alone (no stages or plan: those live in the compiler)."""
    reports = [estimate(n, device) for _, n in named]
    parts = tuple(part_view(name, n, r) for (name, n), r in zip(named, reports))
    summary = (("netlists", ", ".join(name for name, _ in named)), ("device", reports[0].device),
               ("estimate", "; ".join(f"{p.name}: {p.samples_per_second:,.1f} samples/s" for p in parts)))
    no_plan = "a netlist file alone does not carry the balancer's bounds (report a compiled model for them)"
    return ReportData(f"pybuda report: {title}", summary, (), (), parts, tuple(no_plan for _ in parts))


def from_file(path: str | Path, device: str | None = None) -> ReportData:
    """The report of a netlist YAML file or a TTI image (its netlists)."""
    return from_netlists(Path(path).name, [(label, load(src)) for label, src in netlist_sources(path)], device)
