"""The greedy policy (`balancer_policy="Greedy"`, also the CP-SAT policy's competitor): a common cycle target T
is searched (as the legacy NLP/Ribbon policies do, but searched rather than fixed): for each candidate T every op
takes the candidate with the fewest cores whose stand-alone cycles are <= T (else its fastest), among those its
producers' streamings let it read in the same epoch (a new epoch where none does), the first-fit placer packs the
ops, and the plan is costed (`plan_cost.PlanCoster`, DRAM buffers in their assumed channels); the cheapest plan
whose cores' stream resources stay within the device's limits (`PlanCoster.overuse`) wins and gets its queues,
their DRAM placement and its exact cost (`plan.finish`). Overrides (grid size, start, transpose, epoch breaks) are
constraints of every plan."""
from __future__ import annotations

import math

from ..device import DeviceSpec
from ..ir import Graph
from .candidates import Candidate
from .op_model import OpModel
from .plan import Constraints, Placement, finish, prologue_choice
from .placer import place
from .plan_cost import PlanCoster
from .streaming import edge_problem

MAX_TARGETS = 32


def greedy_plan(graph: Graph, device: DeviceSpec, schedule: list[str], candidates: dict[str, list[Candidate]],
                coster: PlanCoster, constraints: Constraints) -> Placement:
    """The cheapest plan of the target search."""
    producers = {name: [(k, o.src) for k, o in enumerate(graph.operands(name)) if graph.node(o.src).kind == "op"]
                 for name in schedule}
    usable = consumable(graph, schedule, candidates)
    ranked = {name: sorted(usable[name], key=lambda c: (c.cores, c.standalone, c.model.grid, c.model.t_stream))
              for name in schedule}
    seen: set[tuple] = set()
    best = None   # (cycles, chosen, placed) of the cheapest plan within the stream limits; a later one must cost less
    overusing = None  # the first plan that overuses a core's stream resources, if none is within them
    for target in _targets([c.standalone for entries in ranked.values() for c in entries]):
        chosen, cuts = _choose(graph, schedule, ranked, producers, target)
        key = (tuple(chosen[n] for n in schedule), cuts)
        if key in seen:
            continue
        seen.add(key)
        placed = place(schedule, {n: chosen[n].grid for n in schedule}, device, starts=constraints.starts,
                       transposed=constraints.transposed, breaks=constraints.breaks | cuts)
        epoch_of = {n: p.epoch for n, p in placed.items()}
        prologue = prologue_choice(graph, schedule, chosen)
        overuses = coster.overuse(schedule, chosen, epoch_of, prologue) is not None
        if overuses and overusing is not None:     # only the first overusing plan is kept: no need to cost it
            continue
        cost = coster.cost(schedule, chosen, epoch_of, prologue, limit=best[0] - 1 if best else math.inf)
        if cost is None or (best is not None and cost.cycles >= best[0]):
            continue
        if not overuses:
            best = (cost.cycles, chosen, placed)
        else:
            overusing = (cost.cycles, chosen, placed)
    _, chosen, placed = best or overusing     # none within the stream limits: finish names what it overuses
    return finish(graph, coster, schedule, chosen, placed, "Greedy", constraints)


def _targets(scores: list[float]) -> list[float]:
    targets = sorted(set(scores))
    if len(targets) > MAX_TARGETS:
        step = (len(targets) - 1) / (MAX_TARGETS - 1)
        targets = sorted({targets[round(i * step)] for i in range(MAX_TARGETS)})
    return targets


def consumable(graph: Graph, schedule: list[str], candidates: dict[str, list[Candidate]]) -> dict[str, list]:
    """Per op the candidates whose streaming every op reading it can take in the same epoch with one of its own
    consumable candidates (decided from the last op back; an unstreamed one is always consumable: slicing an
    unstreamed producer is legal in any epoch); all its candidates for an op that has only streamed ones."""
    kept: dict[str, list[Candidate]] = {}
    for name in reversed(schedule):
        users = [(u, k) for u, k in graph.users(name) if graph.node(u).kind == "op"]
        streams = {u: {c.model.t_stream for c in kept[u]} for u, _ in users}
        kept[name] = [c for c in candidates[name] if not c.model.t_stream or all(
            any(edge_problem(graph, u, k, c.model.t_stream, s) is None for s in streams[u]) for u, k in users)] \
            or candidates[name]   # only streamed candidates (an override, or L1): a DRAM queue carries its edges
    return kept


def _choose(graph: Graph, schedule: list[str], ranked: dict, producers: dict,
            target: float) -> tuple[dict[str, OpModel], frozenset]:
    """Per op (in schedule order) the fewest-core candidate within `target` (else the fastest) that its producers'
    chosen streamings let it read in the same epoch; an op with none takes the first and starts a new epoch."""
    chosen: dict[str, OpModel] = {}
    cuts = set()
    for name in schedule:
        fits = [c for c in ranked[name] if c.standalone <= target]
        order = fits + sorted((c for c in ranked[name] if c.standalone > target), key=lambda c: (c.standalone, c.cores))
        ok = next((c.model for c in order if all(edge_problem(graph, name, k, chosen[p].t_stream, c.model.t_stream)
                                                 is None for k, p in producers[name])), None)
        if ok is None:
            ok = order[0].model
            cuts.add(name)
        chosen[name] = ok
    return chosen, frozenset(cuts)
