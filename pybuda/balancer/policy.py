"""Balancing: choose one op model per op, the epochs and the core locations, with the policy `balancer_policy`
names: "default" or "CP-SAT" (`planner.py`: the segment split, CP-SAT per epoch, never worse than the greedy
plan, with lower bounds), "Greedy" or the legacy "NLP" (`greedy.py`: a searched common cycle target, first-fit
placement), "SingleOpPerEpoch" (the greedy plan with every op in an epoch of its own). The legal names are
`pybuda.config.BALANCER_POLICIES` (the config refuses the other legacy ones when it is made). Every policy keeps
each core's stream resources within the device's limits, or names the one it cannot (`Placement.check_streams`)."""
from __future__ import annotations

import dataclasses

from ..config import BALANCER_POLICY_ALIASES
from ..device import DeviceSpec
from ..ir import Graph
from .candidates import CandidateTable
from .greedy import greedy_plan
from .plan import Constraints, Placement, queued_edges
from .plan_cost import IoLinks, PlanCoster
from .planner import cpsat_plan, greedy_bounds
from .schedule import epoch_type_breaks, op_schedule


def balance_and_place(graph: Graph, device: DeviceSpec, config, microbatch: int) -> Placement:
    """Choose op models, epochs and placement for every op of the Buda graph."""
    policy = BALANCER_POLICY_ALIASES.get(config.balancer_policy, config.balancer_policy)   # legal: config checked
    schedule = op_schedule(graph, config.scheduler_constraints)
    constraints = Constraints.from_config(config, schedule, device)
    constraints = dataclasses.replace(constraints, breaks=constraints.breaks | epoch_type_breaks(graph, schedule))
    coster = PlanCoster(graph, device, IoLinks.from_config(config), microbatch,
                        queued_edges(graph, config.insert_queues), constraints.chips)
    table = CandidateTable(graph, device, config, coster, constraints.grids)
    candidates = {name: table(name) for name in schedule}
    if policy == "CP-SAT":
        return cpsat_plan(graph, device, schedule, candidates, coster, constraints, microbatch).check_streams()
    if policy == "SingleOpPerEpoch":
        constraints = dataclasses.replace(constraints, breaks=frozenset(schedule))
    plan = greedy_plan(graph, device, schedule, candidates, coster, constraints)
    plan.bounds = greedy_bounds(schedule, candidates, coster, constraints, microbatch)
    return plan.check_streams()
