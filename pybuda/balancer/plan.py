"""What every balancing policy shares: the `Placement` it returns, the user's placement constraints read from the
config (`Constraints`), and turning a choice of models and locations into a plan with its queues, their DRAM
placement, its exact cost and the first per-core stream resource it overuses, if any (`finish`)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

from ..arch.movement import Overuse
from ..arch.perf import EpochTiming
from ..device import DeviceSpec
from ..ir import Graph
from .chips import chip_assignment, first_of_entries
from .dram import DramPlacement, place_dram
from .fork_join import buffer_fork_joins
from .link_relief import relieve_links
from .op_model import BalancerError, OpModel, with_overlay
from .placer import PlacedOp
from .plan_cost import PlanCoster
from .queues import QueuePlan, plan_queues


@dataclasses.dataclass
class Bounds:
    """Lower bounds of a plan's cycles from the balancer's candidates (pybuda-balancer.md §8.6): the work over
    all cores (`work`), the slowest op at its best (`op`), the cheapest split of the schedule into epochs that fit
    the grid (`segments`), and the CP-SAT solver's own bound on the epochs it solved, for that split
    (`solver`, None when the greedy policy ran)."""

    work: float
    op: float
    segments: float
    solver: float | None = None

    @property
    def best(self) -> float:
        """The largest valid lower bound of any plan (the solver's holds for its split only)."""
        return max(self.work, self.op, self.segments)


@dataclasses.dataclass
class Placement:
    """The balancer's result: per op its model and location, per queue whether it is a prologue, the queues and
    their DRAM placement, the plan's estimated cycles (one run of the program: every epoch once) with each
    temporal epoch's timing and the epochs it runs (`temporal`: one each, but epochs on different chips of a
    multi-chip device run together), the lower bounds it is measured against and the policy that made it."""

    models: dict[str, OpModel]
    placed: dict[str, PlacedOp]
    prologue: dict[str, bool]
    epochs: int
    estimated_cycles: int
    epoch_timings: tuple[EpochTiming, ...] = ()
    queues: dict[str, QueuePlan] = dataclasses.field(default_factory=dict)
    dram: DramPlacement | None = None
    bounds: Bounds | None = None
    policy: str = ""
    queued_edges: frozenset = frozenset()   # (producer, consumer, port) read through a DRAM queue (insert_queues)
    temporal: tuple = ()
    chips: dict = dataclasses.field(default_factory=dict)    # op -> chip (`chips.py`; 0 on a one-chip device)
    overuse: Overuse | None = None   # a per-core stream resource the plan needs beyond the device's limit
    forks: dict = dataclasses.field(default_factory=dict)   # op -> ((queue, reader op), ...): shared DRAM reads
    subgraphs: dict = dataclasses.field(default_factory=dict)   # op -> its program (`compile_subgraphs`; {}: one)

    def check_streams(self) -> "Placement":
        """The placement, or a BalancerError naming the stream resource it overuses."""
        if self.overuse is not None:
            raise BalancerError(f"the {self.policy} plan needs more stream resources than a core has: "
                                f"{self.overuse} (shared/reference/data-movement.md §3); no plan found avoids it: "
                                "override the op's grid (`config.balancer_op_override(op, \"grid_shape\", ...)`) "
                                "or break the epoch before the op (`config.place_on_new_epoch`)")
        return self

    def timing_of(self, epoch: int) -> EpochTiming:
        """The timing of the temporal epoch that runs `epoch`."""
        return self.epoch_timings[next(k for k, group in enumerate(self.temporal) if epoch in group)]

    @property
    def lower_bound_cycles(self) -> int | None:
        """The best lower bound of the plan's cycles (None without bounds)."""
        return int(self.bounds.best) if self.bounds else None

    @property
    def bound_ratio(self) -> float | None:
        """Estimated cycles over the best lower bound (>= 1; 1 is optimal under the cost model)."""
        return self.estimated_cycles / self.bounds.best if self.bounds and self.bounds.best else None


@dataclasses.dataclass(frozen=True)
class Constraints:
    """The user's placement constraints: grid sizes, start cores, transposed ops, epoch breaks (the first op,
    in schedule order, of each `set_epoch_break` entry starts an epoch), the DRAM placement algorithm, the
    queues pinned to a DRAM channel (and the chips named for them), the ops a balancer override names (their
    candidates are their own) and the chip of every op (`chips.chip_assignment`: `set_chip_break` entries start
    a new chip, and an epoch; `override_op_placement(chip_id=)` puts an op's part on that chip), where the
    CP-SAT policy exports its epoch models (`balancer_export_models`) and whether the placer may transpose op
    grids on its own (`enable_auto_transposing_placement`)."""

    grids: dict
    starts: dict
    transposed: frozenset
    breaks: frozenset
    dram_algorithm: str = "ROUND_ROBIN"
    dram_channels: dict = dataclasses.field(default_factory=dict)
    overridden: frozenset = frozenset()
    chips: dict = dataclasses.field(default_factory=dict)
    dram_chips: dict = dataclasses.field(default_factory=dict)
    export_models: Path | None = None    # where the CP-SAT policy writes its epoch models (debugging)
    auto_transpose: bool = True          # the placer may turn ops' grids (`enable_auto_transposing_placement`)

    @classmethod
    def from_config(cls, config, schedule: list[str], device: DeviceSpec) -> "Constraints":
        grids = {op: tuple(o.grid_shape) for op, o in config.balancer_op_overrides.items()
                 if getattr(o, "grid_shape", None)}
        starts, transposed, pinned = {}, set(), {}
        for op, o in config.placer_op_overrides:
            if getattr(o, "start", None) is not None:
                starts[op] = tuple(o.start)
            if getattr(o, "transpose_op", False):
                transposed.add(op)
            if getattr(o, "chip_id", None) is not None:
                pinned[op] = o.chip_id
        chip_breaks = first_of_entries(config.op_names_to_chip_break, schedule)
        chips = chip_assignment(schedule, chip_breaks, device, pinned)
        breaks = {*first_of_entries(config.op_names_to_epoch_break, schedule), *chip_breaks}
        algorithm = getattr(config.dram_placement_algorithm, "value", config.dram_placement_algorithm)
        pinned = {q: o.channel for q, o in config.manual_dram_queue_placement.items() if o.channel is not None}
        pinned_chips = {q: o.chip_id for q, o in config.manual_dram_queue_placement.items() if o.chip_id is not None}
        export = Path(config.balancer_export_models) if config.balancer_export_models else None
        return cls(grids, starts, frozenset(transposed), frozenset(breaks), algorithm, pinned,
                   frozenset(config.balancer_op_overrides), chips, pinned_chips, export,
                   config.enable_auto_transposing_placement)

    def fixed_orientation(self, names) -> frozenset:
        """The ops of `names` whose grid orientation is not the placer's to choose: those the user transposed, or
        all of them when automatic transposing is off."""
        return self.transposed if self.auto_transpose else frozenset(names)


def prologue_choice(graph: Graph, schedule: list[str], models: dict[str, OpModel]) -> dict[str, bool]:
    """Per parameter, constant and sparse queue: prologued (held in L1 for the epoch) when every op reading it
    holds it in its chosen model."""
    prologue: dict[str, bool] = {}
    for name in schedule:
        for o in graph.operands(name):
            if graph.node(o.src).kind in ("parameter", "constant"):
                prologue[o.src] = prologue.get(o.src, True) and o.src in models[name].prologue
        prologue.update({q: True for q in models[name].prologue if q not in graph})
    return prologue


def finish(graph: Graph, coster: PlanCoster, schedule: list[str], models: dict[str, OpModel],
           placed: dict[str, PlacedOp], policy: str, constraints: Constraints) -> Placement:
    """The placement of a choice of models and locations: its queues (`queues.plan_queues`), their DRAM placement
    (`dram.place_dram`), ops moved off congested NoC links (`link_relief.relieve_links`, the queues placed again
    where ops moved) and its exact cost with them (`PlanCoster.cost`); ops that need more stream phases than
    the default overlay blob holds get the extended one where their L1 has room (`PlanCoster.overlays`), then
    joins that fork-join stalls would slow get bigger input buffers (`fork_join.buffer_fork_joins`); the DRAM
    reads its epochs' ops share (`PlanCoster.forks`, with `enable_forked_dram_inputs`)."""
    device = coster.device
    prologue = prologue_choice(graph, schedule, models)
    epoch_of = {n: p.epoch for n, p in placed.items()}
    overlays = coster.overlays(schedule, models, epoch_of, prologue)
    models = {name: with_overlay(m, device, overlays[name]) if name in overlays else m for name, m in models.items()}
    models = buffer_fork_joins(graph, coster, schedule, models, epoch_of, prologue)
    queues = plan_queues(graph, models, epoch_of, device, coster.microbatch, coster.links.inputs == "pcie",
                         coster.links.outputs == "pcie", coster.queued, constraints.chips)
    _check_pinned(constraints.dram_channels, constraints.dram_chips, queues, device)
    _check_host_outputs(queues, device)
    dram = place_dram(queues, device, constraints.dram_algorithm, constraints.dram_channels, _cores(models, placed))
    relieved = relieve_links(coster, schedule, models, placed, prologue, dram, frozenset(constraints.starts),
                             constraints.fixed_orientation(schedule))
    if relieved != placed:      # ops moved off a congested NoC link: their queues placed again for where they are
        placed = relieved
        dram = place_dram(queues, device, constraints.dram_algorithm, constraints.dram_channels,
                          _cores(models, placed))
    # buffered again where the routed links and the DRAM channels (the final cost's) leave a join stalled
    models = buffer_fork_joins(graph, coster, schedule, models, epoch_of, prologue, dram, placed)
    cost = coster.cost(schedule, models, epoch_of, prologue, dram, placed=placed)
    overuse = coster.overuse(schedule, models, epoch_of, prologue, extend=False)
    return Placement(models=models, placed=placed, prologue=prologue, epochs=sum(map(len, cost.temporal)),
                     estimated_cycles=cost.cycles, epoch_timings=cost.epochs, queues=queues, dram=dram, policy=policy,
                     queued_edges=coster.queued, temporal=cost.temporal,
                     chips=dict(constraints.chips), overuse=overuse[0] if overuse else None,
                     forks=coster.forks(schedule, models, epoch_of, prologue, dram, placed))


def _cores(models: dict[str, OpModel], placed: dict[str, PlacedOp]) -> dict[str, list[tuple]]:
    """The cores (row, col) each placed op takes."""
    cores = {}
    for name, p in placed.items():
        rows, cols = models[name].grid[::-1] if p.transpose else models[name].grid
        cores[name] = [(p.loc[0] + r, p.loc[1] + c) for r in range(rows) for c in range(cols)]
    return cores


def queued_edges(graph: Graph, insert_queues: list) -> frozenset:
    """The `insert_queues` entries (producer, consumer, operand port) as edges of the Buda graph; BalancerError for
    one that names no such edge, with the consumer's operands (or the ops) to choose from."""
    edges = set()
    for producer, consumer, port in insert_queues:
        where = f"insert_queues entry ({producer!r}, {consumer!r}, {port})"
        if consumer not in graph or graph.node(consumer).kind != "op":
            raise BalancerError(f"{where}: {consumer!r} is not an op of the graph being balanced")
        operands = [o.src for o in graph.operands(consumer)]
        if not 0 <= port < len(operands) or operands[port] != producer or graph.node(producer).kind != "op":
            reads = ", ".join(f"{k}: {src}" for k, src in enumerate(operands))
            raise BalancerError(f"{where}: op {consumer!r} does not read op {producer!r} at operand {port}; its "
                                f"operands are {reads}")
        edges.add((producer, consumer, port))
    return frozenset(edges)


def _check_pinned(pinned: dict[str, int], pinned_chips: dict[str, int], queues: dict[str, QueuePlan],
                  device) -> None:
    """BalancerError for a `manual_dram_queue_placement` entry naming no DRAM queue of the plan, no channel of
    the device or another chip than the one the queue sits on (`chips.py`)."""
    dram = sorted(q for q, plan in queues.items() if plan.loc == "dram")
    for queue in dict.fromkeys([*pinned, *pinned_chips]):
        if queue not in queues or queues[queue].loc != "dram":
            raise BalancerError(f"override_dram_queue_placement({queue!r}): the plan has no DRAM queue of that name; "
                                f"its DRAM queues: {', '.join(dram[:12])}{' ...' if len(dram) > 12 else ''}")
        chip = pinned_chips.get(queue, queues[queue].chip)
        if chip != queues[queue].chip:
            raise BalancerError(f"override_dram_queue_placement({queue!r}, chip_id={chip}): the queue sits on chip "
                                f"{queues[queue].chip}, the chip of its writer (or of its readers when the host "
                                f"writes it); legal chip_id: {queues[queue].chip} or None")
    for queue, channel in pinned.items():
        if not 0 <= channel < device.dram_channels:
            raise BalancerError(f"override_dram_queue_placement({queue!r}, channel={channel}): {device.name} has "
                                f"DRAM channels 0-{device.dram_channels - 1}")


def _check_host_outputs(queues: dict[str, QueuePlan], device: DeviceSpec) -> None:
    """BalancerError for a queue in host memory written by an op on a chip without the PCIe link (the backend
    writes host queues from that chip only)."""
    for q in queues.values():
        if q.loc == "host" and q.writer != "HOST" and q.chip != device.mmio_chip:
            raise BalancerError(f"op {q.writer!r} writes model output {q.name!r} to the host from chip {q.chip}; "
                                f"only chip {device.mmio_chip} (the PCIe chip) writes to the host: move the chip "
                                f"break before {q.writer!r}, or set output_queues_on_host=False")
