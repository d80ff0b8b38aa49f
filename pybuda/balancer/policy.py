"""Balancing policy: pick one op model per op and cut epochs.

The policy searches a common cycle target T (as the legacy NLP/Ribbon policies do, but searched rather than
fixed): for each candidate T every op takes the model with the fewest cores whose score is <= T (or its best
model), the placer packs the ops, and the plan is costed by the one backend model exactly as the simulator will
cost the netlist written from it (`plan_cost.PlanCoster`). Two scores rank an op's models: its cost per input
alone in an epoch of the microbatch (limiter cycles with its prologue amortised) and its kernel cycles; the
plan with the least cost over both target searches wins. Overrides (grid size, start, transpose, epoch breaks)
are constraints of every candidate plan."""
from __future__ import annotations

import dataclasses

from ..arch.perf import EpochTiming
from ..device import DeviceSpec
from ..ir import Graph
from .op_model import BalancerError, OpModel, legal_op_models, op_dims
from .placer import PlacedOp, place
from .streaming import edge_problem, op_streams, stream_override_error
from .plan_cost import IoLinks, PlanCoster

MAX_TARGETS = 48


@dataclasses.dataclass
class Placement:
    """The balancer's result: per op its model and location, per queue whether it is a prologue, and the
    plan's estimated cycles (one run of the program: every epoch once) with each epoch's timing."""

    models: dict[str, OpModel]
    placed: dict[str, PlacedOp]
    prologue: dict[str, bool]
    epochs: int
    estimated_cycles: int
    epoch_timings: tuple[EpochTiming, ...] = ()


def _overrides(config, schedule: list[str]) -> tuple[dict, dict, set, set]:
    grid_overrides = {op: tuple(o.grid_shape) for op, o in config.balancer_op_overrides.items()
                      if getattr(o, "grid_shape", None)}
    starts, transposed = {}, set()
    for op, o in config.placer_op_overrides:
        if getattr(o, "start", None) is not None:
            starts[op] = tuple(o.start)
        if getattr(o, "transpose_op", False):
            transposed.add(op)
    order = {op: i for i, op in enumerate(schedule)}
    breaks = set()
    for entry in config.op_names_to_epoch_break:
        names = [entry] if isinstance(entry, str) else list(entry)
        present = [n for n in names if n in order]
        if present:
            breaks.add(min(present, key=order.get))
    return grid_overrides, starts, transposed, breaks


def _models_for(graph: Graph, name: str, device: DeviceSpec, grid_override: tuple | None, config) -> list[OpModel]:
    dims = op_dims(graph, name)
    models = legal_op_models(graph, name, device,
                             lambda gr, gc: op_streams(graph, name, config, gr, gc, dims["rt"], dims["ct"]))
    shape = getattr(config.balancer_op_overrides.get(name), "t_stream_shape", None)
    if not models and shape is not None and shape != (1, 1):
        grids = [m.grid for m in legal_op_models(graph, name, device)]
        raise stream_override_error(name, shape, dims["rt"], dims["ct"], grids)
    if not models:
        raise BalancerError(f"op {name!r} ({graph.node(name).op_type}): no legal op model fits the "
                            f"{device.l1_usable} B of usable L1 on {device.name} (output {dims['t']}x{dims['rt']}x"
                            f"{dims['ct']} tiles)")
    if grid_override is None:
        return models
    chosen = [m for m in models if m.grid == grid_override]
    if not chosen:
        legal = sorted({m.grid for m in models})
        raise BalancerError(
            f"override_op_size({name!r}, {grid_override}): no legal op model with grid {grid_override}; the op's "
            f"output is {dims['rt']}x{dims['ct']} tiles (a grid must divide it and fit the {device.grid_rows}x"
            f"{device.grid_cols} cores of {device.name}); legal grids: {', '.join(f'{r}x{c}' for r, c in legal)}")
    return chosen


def _targets(scores: list[float]) -> list[float]:
    targets = sorted(set(scores))
    if len(targets) > MAX_TARGETS:
        step = (len(targets) - 1) / (MAX_TARGETS - 1)
        targets = sorted({targets[round(i * step)] for i in range(MAX_TARGETS)})
    return targets


def balance_and_place(graph: Graph, device: DeviceSpec, config, microbatch: int) -> Placement:
    """Choose op models and placement for every op of the Buda graph."""
    schedule = [n for n in graph.topo_order() if graph.node(n).kind == "op"]
    grid_overrides, starts, transposed, breaks = _overrides(config, schedule)
    coster = PlanCoster(graph, device, IoLinks.from_config(config), microbatch)
    models = {name: _models_for(graph, name, device, grid_overrides.get(name), config) for name in schedule}
    producers = {name: [(k, o.src) for k, o in enumerate(graph.operands(name)) if graph.node(o.src).kind == "op"]
                 for name in schedule}
    consumable = _consumable(graph, schedule, models)
    params = {name: [o.src for o in graph.operands(name) if graph.node(o.src).kind in ("parameter", "constant")]
              for name in schedule}

    def plan(chosen: dict[str, OpModel], cuts: frozenset) -> Placement:
        placed = place(schedule, {n: chosen[n].grid for n in schedule}, device, starts=starts,
                       transposed=transposed, breaks=breaks | cuts)
        prologue: dict[str, bool] = {}
        for name in schedule:
            for queue in params[name]:
                prologue[queue] = prologue.get(queue, True) and queue in chosen[name].prologue
            prologue.update({q: True for q in chosen[name].prologue if q not in graph})
        cost = coster.cost(schedule, chosen, {n: p.epoch for n, p in placed.items()}, prologue)
        return Placement(models=chosen, placed=placed, prologue=prologue, epochs=len(cost.epochs),
                         estimated_cycles=cost.cycles, epoch_timings=cost.epochs)

    plans: dict[tuple, Placement] = {}
    for score in (coster.standalone, lambda name, m: float(m.cycles)):
        candidates = {name: sorted(((score(name, m), m) for m in consumable[name]),
                                   key=lambda e: (e[1].cores, e[0], e[1].grid, e[1].t_stream)) for name in schedule}
        for target in _targets([e[0] for entries in candidates.values() for e in entries]):
            chosen, cuts = _choose(graph, schedule, candidates, producers, target)
            key = (tuple(chosen[n] for n in schedule), cuts)
            if key not in plans:
                plans[key] = plan(chosen, cuts)
    return min(plans.values(), key=lambda p: p.estimated_cycles)


def _consumable(graph: Graph, schedule: list[str], models: dict[str, list[OpModel]]) -> dict[str, list[OpModel]]:
    """Per op the models whose streaming every op reading it can take in the same epoch with one of its own
    consumable models (decided from the last op back; an unstreamed model is always consumable: slicing an
    unstreamed producer is legal in any epoch); all its models for an op that has only streamed ones."""
    kept: dict[str, list[OpModel]] = {}
    for name in reversed(schedule):
        users = [(u, k) for u, k in graph.users(name) if graph.node(u).kind == "op"]
        streams = {u: {m.t_stream for m in kept[u]} for u, _ in users}
        kept[name] = [m for m in models[name] if not m.t_stream or all(
            any(edge_problem(graph, u, k, m.t_stream, s) is None for s in streams[u]) for u, k in users)] \
            or models[name]   # only streamed models (an override, or L1): a DRAM queue will carry its edges
    return kept


def _choose(graph: Graph, schedule: list[str], candidates: dict, producers: dict,
            target: float) -> tuple[dict[str, OpModel], frozenset]:
    """Per op (in schedule order) the model with the fewest cores whose score is <= target (else its best), among
    those its producers' chosen streamings let it read in the same epoch; an op with no such model takes its best
    and starts a new epoch (`cuts`), so a DRAM queue carries the edge."""
    chosen: dict[str, OpModel] = {}
    cuts = set()
    for name in schedule:
        fits = [e for e in candidates[name] if e[0] <= target]
        ranked = fits + sorted((e for e in candidates[name] if e[0] > target), key=lambda e: (e[0], e[1].cores))
        ok = next((m for _, m in ranked if all(edge_problem(graph, name, k, chosen[p].t_stream, m.t_stream) is None
                                              for k, p in producers[name])), None)
        if ok is None:
            ok = ranked[0][1]
            cuts.add(name)
        chosen[name] = ok
    return chosen, frozenset(cuts)
