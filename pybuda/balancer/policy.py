"""Balancing: choose one op model per op, the epochs and the core locations, with the policy `balancer_policy`
names: "default" or "CP-SAT" (`planner.py`: the segment split, CP-SAT per epoch, never worse than the greedy
plan, with lower bounds), "Greedy" or the legacy "NLP" (`greedy.py`: a searched common cycle target, first-fit
placement), "SingleOpPerEpoch" (the greedy plan with every op in an epoch of its own). The legal names are
`pybuda.config.BALANCER_POLICIES` (the config refuses the other legacy ones when it is made). Every policy keeps
each core's stream resources within the device's limits (a finished plan that overuses one is made again, up to
`REPLANS` times, without the overusing op's model), or names the one it cannot (`Placement.check_streams`)."""
from __future__ import annotations

import dataclasses

from ..config import BALANCER_POLICY_ALIASES
from ..device import DeviceSpec
from ..ir import Graph
from .candidates import Candidate, CandidateTable
from .greedy import greedy_plan
from .op_model import OpModel
from .plan import Constraints, Placement, queued_edges
from .plan_cost import IoLinks, PlanCoster
from .planner import cpsat_plan, greedy_bounds
from .schedule import epoch_type_breaks, op_schedule, subgraphs

REPLANS = 4    # plans made again without an overusing op's model before the overuse is reported


def balance_and_place(graph: Graph, device: DeviceSpec, config, microbatch: int) -> Placement:
    """Choose op models, epochs and placement for every op of the Buda graph."""
    policy = BALANCER_POLICY_ALIASES.get(config.balancer_policy, config.balancer_policy)   # legal: config checked
    schedule = op_schedule(graph, config.scheduler_constraints, config.scheduler_policy)
    parts = subgraphs(graph, schedule) if config.compile_subgraphs else {}
    schedule = sorted(schedule, key=lambda n: parts.get(n, 0))    # stable: each subgraph's ops together
    starts = {b for a, b in zip(schedule, schedule[1:]) if parts.get(a) != parts.get(b)}   # each starts an epoch
    constraints = Constraints.from_config(config, schedule, device)
    constraints = dataclasses.replace(constraints, breaks=constraints.breaks | epoch_type_breaks(graph, schedule)
                                      | starts)
    coster = PlanCoster(graph, device, IoLinks.from_config(config), microbatch,
                        queued_edges(graph, config.insert_queues), constraints.chips, config.enable_forked_dram_inputs)
    table = CandidateTable(graph, device, config, coster, constraints.grids)
    candidates = {name: table(name) for name in schedule}
    if policy == "SingleOpPerEpoch":
        constraints = dataclasses.replace(constraints, breaks=frozenset(schedule))

    def plan(candidates: dict[str, list[Candidate]], constraints: Constraints) -> Placement:
        if policy == "CP-SAT":
            return cpsat_plan(graph, device, schedule, candidates, coster, constraints, microbatch)
        placement = greedy_plan(graph, device, schedule, candidates, coster, constraints)
        placement.bounds = greedy_bounds(schedule, candidates, coster, constraints, microbatch)
        return placement

    placement = plan(candidates, constraints)
    for _ in range(REPLANS):
        # an overuse only the finished plan shows (an epoch is planned with the ops of other epochs at their first
        # candidates, so a small reader of a wide writer's queue in an earlier epoch is found here): the plan is
        # made again without the overusing op's chosen model
        if placement.overuse is None:
            break
        op = placement.overuse.op
        kept = [c for c in candidates[op] if not _same_model(c.model, placement.models[op])]
        if not kept or len(kept) == len(candidates[op]):
            break
        candidates = {**candidates, op: kept}      # its own candidates now: no longer shared by its signature
        constraints = dataclasses.replace(constraints, overridden=constraints.overridden | {op})
        placement = plan(candidates, constraints)
    placement.subgraphs = parts
    return placement.check_streams()


def _same_model(a: OpModel, b: OpModel) -> bool:
    """Whether two op models are one candidate (the finished plan's may have a bigger overlay or input buffers)."""
    return (a.grid, a.t_stream, a.mblock, a.ublock, a.u_kt) == (b.grid, b.t_stream, b.mblock, b.ublock, b.u_kt)
