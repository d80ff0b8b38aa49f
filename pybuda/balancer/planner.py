"""The CP-SAT policy (the default `balancer_policy`): epochs from the segment split, each epoch's candidates and
core locations, the result checked against the greedy plan, lower bounds computed from the same candidates.

1. The schedule's cheapest split into contiguous epochs (`segments.SegmentTable.split`), twice (`SPLITS`): the
   ops' cores counted along chains of producer and consumer at streamings each can read (the choice read back
   along the chains), and each op at its own fewest-core candidate within its epoch's pipeline cycles; and a
   third time along chains with an epoch also starting wherever the lower bound's own split, before its fill is
   tightened, starts one (its epochs are where a relaxation puts them, a different start the split's estimate
   would not pick), its ops not held to the context they join their epoch in (`cuttable`: the first two are,
   and keep grids small; the third reaches paces only ops read on chip reach). Each split
   is planned (steps 2 and 3; the third in a forked process beside the first's finish and the second) and the
   cheapest plan kept.
2. Each epoch: the split's candidates made compatible along the epoch's edges (in schedule order, an op whose
   candidate cannot read its producers' chosen streamings in the epoch takes the fewest-core one that can; where
   none can, a producer whose candidate a stream overuse left no reader candidate to pair with moves to one that
   has, else its streamed producers move to unstreamed candidates, and failing that the epoch ends before that
   op; it also ends before an op a fork-join stall would make STALL times slower than the epoch's slowest
   unstalled op, also after fork-join buffering and again under the final choice), shrunk until they pack, then
   packed first-fit (`placer.pack_epoch`); an epoch whose fewest cores do not pack is split in two. An epoch
   whose pipeline could come down towards the relaxation's bound is a CP-SAT model (`epoch_solver.solve_epoch`:
   candidates, orientations and locations with NoOverlap2D, streaming compatibility, DRAM bandwidth, the user's
   starts and transposes) warm-started with that plan; then its slowest op, while that lowers the pipeline, takes
   its fewest-core faster candidate that its neighbours can read and that fits the cores the others leave
   (`_grown`: the solver's deterministic time limit can leave that undone on an epoch of many ops). An epoch
   whose plan overuses a core's stream resources
   (`PlanCoster.overuse`: fan-out, multicast, extra, DRAM streams, phases) is planned again without the pair of
   producer and consumer candidates whose pipes use most of it (or, for a queue's, the op's candidate), until
   none is overused. An epoch that packs more than SPLIT times slower than
   the split counted on is also planned as two halves, kept when cheaper. Epochs whose ops, contexts and
   overrides are alike (a transformer's layers) are solved once.
3. Each plan gets its queues, their DRAM placement, ops moved off congested NoC links (`link_relief.py`) and its
   exact cost (`plan.finish`). Where the cheaper one
   still has a fork-join stall that sets an epoch's pace, its split is planned again with an epoch ending at each
   such fork, and kept when cheaper (`_cut_forks`). The cheapest chain of the plans' epochs that meet end to
   start, each at its exact cost in its plan, is finished too and kept when cheaper (`_spliced`). The greedy
   policy's plan (`greedy.py`, computed in a forked
   process meanwhile, `background.Background`) is finished too, and the cheapest one is kept: the default policy
   is never worse than the greedy. A plan within the cores' stream limits beats one beyond them.
4. Lower bounds (`plan.Bounds`): the work over all cores and the slowest op at their best, the cheapest split's
   own bound with its fill tightened (`SegmentTable.split(bound=True)`) and, for this split, the epochs' pipeline
   bounds (the solver's where it ran).
"""
from __future__ import annotations

import collections
import dataclasses
import math
from pathlib import Path
from typing import Callable, NamedTuple

from ..arch.movement import LIMIT_OF
from ..device import DeviceSpec
from ..files import safe_file_stem
from ..ir import Graph
from .background import Background
from .candidates import Candidate, op_signature
from .epoch_solver import EpochOp, EpochSolution, solve_epoch
from .fork_join import buffer_fork_joins, pace
from .greedy import greedy_plan
from .op_model import BalancerError
from .plan import Bounds, Constraints, Placement, finish, prologue_choice
from .placer import PlacedOp, pack_epoch, place_beside
from .plan_cost import PlanCoster
from .segments import SegmentTable, Split
from .streaming import edge_problem

IMPROVE = 1.02     # an epoch whose packed plan could gain more than 2 % towards its pipeline bound goes to the solver
STALL = 2.0        # an op a fork-join stall makes this much slower than the epoch's unstalled pipeline starts a new one
#                    (measured on the published rows: 1.5 cut ResNet-50 e150's third stage into four epochs, 1.36x of
#                    its bound against 1.31x at 2.0; 3.0 keeps stalls that cost more than the cuts, 1.55x)
SPLIT = 1.25       # an epoch that packs this much slower than its split's pipeline is also tried as two halves
SPLITS = (True, False)   # the splits planned: ops' cores along streaming chains, and each op at its own fewest
FORK_CUT_ROUNDS = 2      # re-plannings with epochs cut after the forks of fork-join stalls (`_cut_forks`)
SPLICE_GAIN = 0.005      # a chain of the plans' epochs is finished when it gains more than this (`_spliced`)
BY_READER = frozenset({"producer_phases"})   # producer-core resources set by how the consumer in the epoch reads
READER_TRIES = 3         # reader candidates a producer candidate's phase overuse is paired with before it is ruled out
RECENT_EPOCH_MODELS = 4  # `_EpochSolver._epoch_models` results kept (each holds a model per op of the schedule)


def cpsat_plan(graph: Graph, device: DeviceSpec, schedule: list[str], candidates: dict[str, list[Candidate]],
               coster: PlanCoster, constraints: Constraints, microbatch: int) -> Placement:
    """The CP-SAT policy's plan (module docstring), with its bounds."""
    table = SegmentTable(schedule, candidates, coster, device, microbatch, constraints.breaks, constraints.overridden)
    solver = _EpochSolver(graph, device, table, candidates, constraints)
    # the greedy plan and the split's own bound are computed meanwhile in forked processes (deterministic both);
    # the bound's is forked after the first split, whose per-op context costs it then shares
    with Background(lambda: greedy_plan(graph, device, schedule, candidates, coster, constraints)) as greedy:
        first_split = table.split(bound=False, chains=SPLITS[0])
        with Background(lambda: (table.split(bound=True, tighten=False), table.split(bound=True))) as segments_bound:
            first = _split_plan(table, solver, first_split, candidates, constraints)
            loose_split, bound_split = segments_bound.result()
        # a third split along chains, cut where the bound's own split (before its fill is tightened) starts an
        # epoch, planned in a forked process beside the first plan's finish and the second (deterministic: it
        # starts from the state the first plan's epochs left; without fork, after the second)
        cuts = frozenset(segment.first for segment in loose_split.segments[1:])
        with Background(lambda: _planned(graph, coster, solver, True, cuts, cuttable=False),
                        shares_state=True) as along_bound:
            plans = [_finished(graph, coster, solver, first, SPLITS[0], frozenset(), True),
                     *(_planned(graph, coster, solver, chains, frozenset()) for chains in SPLITS[1:]),
                     along_bound.result()]
        plan = min(plans, key=lambda p: _rank(p.placement))
        plan = _cut_forks(graph, coster, solver, plan)
        spliced = _spliced(graph, coster, solver, [*plans, plan])
        if spliced is not None and _rank(spliced.placement) < _rank(plan.placement):
            plan = spliced
        other = greedy.result()
        best = min((plan.placement, other), key=_rank)
        best.bounds = bounds(table, candidates, schedule, constraints.chips, plan.split_bound, bound_split)
    return best


@dataclasses.dataclass(frozen=True)
class Cut:
    """Where to cut an epoch that is not planned whole: before its op at offset `before` (> 0), or in the middle
    (None)."""

    before: int | None = None

    def last_of_first_part(self, first: int, last: int) -> int:
        """The schedule position of the first part's last op."""
        return first + self.before - 1 if self.before else (first + last) // 2


def _rank(placement: Placement) -> tuple[bool, int]:
    """Plans in order of preference: within the cores' stream limits first, then the cheapest."""
    return placement.overuse is not None, placement.estimated_cycles


class _Epoch(NamedTuple):
    """An epoch being planned (`_EpochSolver._epoch_data`): its schedule positions and ops, per op and candidate
    its cycles and DRAM cycles in the epoch's context, its edges (producer, consumer, compatible), the lower bound
    of its pipeline, per op the user's start and orientation."""

    first: int
    last: int
    names: list
    cycles: list
    dram: list
    edges: list
    lower: float
    starts: list
    forced: list


class _Plan(NamedTuple):
    """A finished plan of the segment split (`chains`: which of SPLITS, `cuts`: the planner's own epoch starts),
    its epochs' solver bound, and per epoch (first, last) its index, its solver bound and its ops' models before
    `finish` (`_spliced` reuses them)."""

    placement: Placement
    split_bound: float
    chains: bool
    cuts: frozenset
    cuttable: bool
    epochs: dict


def _planned(graph: Graph, coster: PlanCoster, solver: _EpochSolver, chains: bool, cuts: frozenset,
             split: Split | None = None, cuttable: bool = True) -> _Plan:
    """The split's plan (steps 2 and 3 of the module docstring), epochs also starting at `cuts` (`split`: that
    split, already made)."""
    table = solver.table
    if split is None:
        split = table.split(bound=False, chains=chains, cuts=cuts, cuttable=cuttable)
    return _finished(graph, coster, solver, _split_plan(table, solver, split, solver.candidates, solver.constraints),
                     chains, cuts, cuttable)


def _finished(graph: Graph, coster: PlanCoster, solver: _EpochSolver, planned: tuple, chains: bool, cuts: frozenset,
              cuttable: bool) -> _Plan:
    """The plan of a split's planned epochs (`_split_plan`'s result), finished (`plan.finish`)."""
    models, placed, split_bound, epochs = planned
    placement = finish(graph, coster, solver.table.schedule, models, placed, "CP-SAT", solver.constraints)
    return _Plan(placement, split_bound, chains, cuts, cuttable, epochs)


def _spliced(graph: Graph, coster: PlanCoster, solver: _EpochSolver, plans: list[_Plan]) -> _Plan | None:
    """The cheapest chain of the plans' epochs, finished: an epoch's solution depends only on its first and last
    op (`_EpochSolver._key`), so epochs of different plans that meet end to start chain into a plan, each costed
    as in its own plan (`EpochTiming.epoch_cycles`). None where that chain's epochs all come from one plan, it is
    no cheaper than the cheapest plan by SPLICE_GAIN, or the plans run epochs on several chips."""
    table = solver.table
    if any(solver.constraints.chips.values()) or any(len(group) != 1 for p in plans for group in p.placement.temporal):
        return None
    offered: dict[tuple[int, int], tuple[float, _Plan]] = {}
    for plan in plans:
        for (first, last), (epoch, _, _) in plan.epochs.items():
            cycles = plan.placement.timing_of(epoch).epoch_cycles
            if cycles < offered.get((first, last), (math.inf, None))[0]:
                offered[first, last] = (cycles, plan)
    by_first = collections.defaultdict(list)
    for first, last in offered:
        by_first[first].append(last)
    n, switch = len(table.schedule), table.device.epoch_switch_cycles
    best, back = [0.0] + [math.inf] * n, [0] * (n + 1)
    for first in range(n):
        paid = best[first] + (switch if first and first not in table.program_start else 0)
        for last in by_first[first]:
            if paid + offered[first, last][0] < best[last + 1]:
                best[last + 1], back[last + 1] = paid + offered[first, last][0], first
    cheapest = min(p.placement.estimated_cycles for p in plans)
    if best[n] >= cheapest * (1 - SPLICE_GAIN):
        return None
    chain, end = [], n
    while end:
        chain.append((back[end], end - 1))
        end = back[end]
    chain.reverse()
    if len({id(offered[epoch][1]) for epoch in chain}) == 1:
        return None
    models, placed, epochs = {}, {}, {}
    for index, (first, last) in enumerate(chain):     # the ops where the source's finish left them
        source = offered[first, last][1]
        _, bound, ops = source.epochs[first, last]
        for name, model in ops.items():
            models[name] = model
            placed[name] = dataclasses.replace(source.placement.placed[name], epoch=index)
        epochs[first, last] = (index, bound, ops)
    split_bound = sum(bound for _, bound, _ in epochs.values()) + \
        switch * sum(first not in table.program_start for first, _ in chain[1:])
    placement = finish(graph, coster, table.schedule, models, placed, "CP-SAT", solver.constraints)
    return _Plan(placement, split_bound, True, frozenset(first for first, _ in chain[1:]), False, epochs)


def _cut_forks(graph: Graph, coster: PlanCoster, solver: _EpochSolver, plan: _Plan) -> _Plan:
    """`plan`, or the split planned again with an epoch starting right after each fork whose fork-join still
    slows its epoch after buffering (`_stalled_forks`) when that is cheaper, repeated while it gains (at most
    FORK_CUT_ROUNDS times). The cut makes the fork the last op of its epoch: the join, in a later epoch, reads the
    short path from a DRAM queue that holds the whole microbatch (the legacy fork-join pass's buffering queue)."""
    for _ in range(FORK_CUT_ROUNDS):
        cuts = plan.cuts | _stalled_forks(solver.table, plan.placement)
        if cuts == plan.cuts:
            break
        tried = _planned(graph, coster, solver, plan.chains, cuts, cuttable=plan.cuttable)
        if _rank(tried.placement) >= _rank(plan.placement):
            break
        plan = tried
    return plan


def _stalled_forks(table: SegmentTable, placement: Placement) -> frozenset:
    """The schedule positions right after the fork of each join whose fork-join stall sets its epoch's pipeline
    (slower than the epoch's slowest op without stalls, `fork_join.pace`)."""
    cuts = set()
    for timing in placement.epoch_timings:
        limit = pace(timing)
        for op in timing.ops:
            if op.limiter == "fork_join" and op.limiter_cycles > limit:
                cuts.add(table.position[op.fork] + 1)
    return frozenset(c for c in cuts if c < len(table.schedule))


def _split_plan(table: SegmentTable, solver: _EpochSolver, split: Split, candidates: dict[str, list[Candidate]],
                constraints: Constraints) -> tuple[dict, dict, float, dict]:
    """The models and locations of each epoch of `split` (`_EpochSolver.solve`), the epochs' solver bounds
    (each chip's sum, the largest), and per epoch (first, last): (its index, its solver bound over its inputs,
    {op: model})."""
    schedule, device = table.schedule, table.device
    models, placed, split_bound, epochs = {}, {}, {}, {}
    for segment in split.segments:
        for first, last, solution in solver.solve(segment.first, segment.last, segment.choice):
            ops = {}
            for offset, name in enumerate(schedule[first:last + 1]):
                models[name] = candidates[name][solution.choice[offset]].model
                placed[name] = PlacedOp(len(epochs), solution.locations[offset], solution.transposed[offset])
                ops[name] = models[name]
            chip = constraints.chips.get(schedule[first], 0)
            switch = chip in split_bound and first not in table.program_start
            split_bound[chip] = split_bound.get(chip, 0.0) + table.inputs[first] * solution.bound + (
                device.epoch_switch_cycles if switch else 0)
            epochs[first, last] = (len(epochs), table.inputs[first] * solution.bound, ops)
    return models, placed, max(split_bound.values(), default=0.0), epochs


def greedy_bounds(schedule: list[str], candidates: dict[str, list[Candidate]], coster: PlanCoster,
                  constraints: Constraints, microbatch: int) -> Bounds:
    """The lower bounds of `bounds` for a plan another policy made (no solver bound)."""
    table = SegmentTable(schedule, candidates, coster, coster.device, microbatch, constraints.breaks,
                         constraints.overridden)
    return bounds(table, candidates, schedule, constraints.chips, None, table.split(bound=True))


def bounds(table: SegmentTable, candidates: dict[str, list[Candidate]], schedule: list[str], chips: dict[str, int],
           split: float | None, segments: Split) -> Bounds:
    """The lower bounds of `plan.Bounds` (pybuda-balancer.md §8.6), times each op's inputs (the microbatch; one for
    a training graph's optimizer ops): every op at its most favourable context (the least of its context costs over
    every epoch start and end); `segments`: the cheapest split's bound (`SegmentTable.split(bound=True)`). On a
    multi-chip plan (`chips`) each chip runs its own ops' work and epochs one after the other, while the chips
    may run at once: the work and split bounds are the largest of each chip's."""
    work: dict[int, float] = {}
    slowest = 0.0
    n = len(schedule)
    for i, name in enumerate(schedule):
        cycles = [min(c) for c in zip(*(table.context_cycles(i, start, out) for start in (-1, n)
                                        for out in (False, True)))]
        cores = [c.cores for c in candidates[name]]
        chip = chips.get(name, 0)
        work[chip] = work.get(chip, 0.0) + table.inputs[i] * min(a * c for a, c in zip(cores, cycles))
        slowest = max(slowest, table.inputs[i] * min(cycles))
    by_chip: dict[int, float] = {}
    for segment in segments.segments:
        chip = chips.get(schedule[segment.first], 0)
        switch = chip in by_chip and segment.first not in table.program_start
        by_chip[chip] = by_chip.get(chip, 0.0) + segment.cycles + (table.device.epoch_switch_cycles if switch else 0)
    return Bounds(work=max(work.values(), default=0.0) / table.device.cores, op=slowest,
                  segments=max(by_chip.values(), default=0.0),
                  solver=split)


def _neighbours(edges: list) -> dict[int, list]:
    """Per op of an epoch (its `edges`: producer, consumer, compatible), its neighbours and ok(neighbour's
    candidate, own candidate): whether the two can share the epoch."""
    neighbours: dict[int, list] = {}
    for p, c, compatible in edges:
        neighbours.setdefault(c, []).append((p, compatible))
        neighbours.setdefault(p, []).append((c, lambda theirs, own, f=compatible: f(own, theirs)))
    return neighbours


def _pipeline(cycles: list[list[float]], dram: list[list[float]], choice) -> float:
    """An epoch's pipeline cycles under a choice: its slowest op, or its DRAM bytes over all channels."""
    return max(max(c[k] for c, k in zip(cycles, choice)), sum(d[k] for d, k in zip(dram, choice)))


class _EpochSolver:
    """Chooses and places each epoch's candidates (module docstring, step 2), once per distinct epoch."""

    def __init__(self, graph: Graph, device: DeviceSpec, table: SegmentTable, candidates: dict[str, list[Candidate]],
                 constraints: Constraints):
        self.graph, self.device, self.table, self.candidates = graph, device, table, candidates
        self.constraints = constraints
        self._solved: dict[tuple, EpochSolution | None] = {}
        self._signatures: dict[str, tuple] = {}
        self._edge_ok: dict[tuple, bool] = {}
        # what a stream overuse ruled out (`_avoid_overuse`): (producer, its candidate, consumer, its candidate)
        # pairs in any epoch, and per epoch (first, last) the (op, candidate)s whose overuse no producer in the
        # epoch shares (what a core's output feeds depends on the epoch's other ops)
        self._forbidden: set[tuple] = set()
        self._banned: dict[tuple[int, int], set[tuple[str, int]]] = {}
        self._paired: dict[tuple[int, int], collections.Counter] = {}   # per epoch, pairs ruled out per producer
        # ops outside an epoch, as its stall check sees them (only their DRAM queues' buffer counts matter there)
        self._outside = {n: candidates[n][0].model for n in table.schedule}
        # the last few `_epoch_models` results: the stall check and the stream check of one choice follow each other
        self._recent: collections.OrderedDict = collections.OrderedDict()
        self._exported = 0      # epoch models written to `constraints.export_models`

    def solve(self, first: int, last: int, hint: tuple) -> list[tuple[int, int, EpochSolution]]:
        """[(first, last, solution)] covering first..last: one epoch, or several where its ops cannot all read
        each other's streamings in one epoch, do not pack, or pack into a slower plan than two halves give."""
        solution = self._solve(first, last, hint)
        if isinstance(solution, EpochSolution):
            whole = [(first, last, solution)]
            if first == last or solution.pipeline <= SPLIT * self._target(first, last, hint):
                return whole
            middle = (first + last) // 2       # it packs only much slower than the split counted on: try halves
            halves = self.solve(first, middle, hint[:middle - first + 1]) + \
                self.solve(middle + 1, last, hint[middle - first + 1:])
            return halves if self._cycles(halves) < self._cycles(whole) else whole
        if first == last:
            name = self.table.schedule[first]
            streams = " and a core's stream resources" if self._banned.get((first, last)) else ""
            raise BalancerError(f"op {name!r} fits no epoch of {self.device.name} alone with its constraints{streams}")
        middle = solution.last_of_first_part(first, last)
        return self.solve(first, middle, hint[:middle - first + 1]) + self.solve(middle + 1, last,
                                                                                 hint[middle - first + 1:])

    def _target(self, first: int, last: int, hint: tuple) -> float:
        """The pipeline cycles the segment split counted on for first..last under `hint`."""
        contexts = [(first + k, first, self.table.last_user[first + k] > last) for k in range(last - first + 1)]
        return _pipeline([self.table.context_cycles(*c) for c in contexts],
                         [self.table.context_dram_cycles(*c) for c in contexts], hint)

    def _cycles(self, epochs: list[tuple[int, int, EpochSolution]]) -> float:
        """Estimated cycles of consecutive epochs: each its pipeline over the microbatch, plus the switches."""
        return sum(self.table.inputs[first] * s.pipeline for first, _, s in epochs) + \
            (len(epochs) - 1) * self.device.epoch_switch_cycles

    def _solve(self, first: int, last: int, hint: tuple) -> EpochSolution | Cut:
        """The epoch's solution, or where to cut it: before the first op that cannot join its producers, or in
        the middle where it does not pack."""
        key = (self._key(first, last), hint)
        if key not in self._solved:
            self._solved[key] = self._plan(first, last, hint)
        return self._solved[key]

    def _plan(self, first: int, last: int, hint: tuple) -> EpochSolution | Cut:
        """The epoch's solution (or where to cut it). A choice that overuses a core's stream resources is made
        again without the pair of candidates (or the candidate) that used most of it: the packed choice before
        the solver runs, the solver's after."""
        epoch = self._epoch_data(first, last)
        solver = True
        while True:
            packed = self._packed(epoch, hint)
            if isinstance(packed, Cut):
                return packed
            solution = self._improved(epoch, *packed, solver=solver)
            if not isinstance(solution, EpochSolution) or not self._avoid_overuse(first, last, solution.choice):
                return solution
            solver = False      # the solver's choice overused: the packed choices only from here (one solve each)

    def _avoid_overuse(self, first: int, last: int, choice: tuple) -> bool:
        """Whether the choice overuses a core's stream resources (`PlanCoster.overuse`); if so, what uses it is
        ruled out: a consumer core's, or a producer core's stream phases (they count the runs of tiles each reader
        takes, `BY_READER`), by the pair of candidates of producer and consumer in the epoch whose pipes use most
        of it (the producer's phases, READER_TRIES times per producer candidate and epoch: then by its
        candidate); any other producer core's (fan-out, DRAM writers) by the op's candidate (another spreads its
        output over more cores); else by the op's candidate."""
        names = self.table.schedule[first:last + 1]
        models, epoch_of, prologue = self._epoch_models(first, last, list(choice))
        found = self.table.coster.overuse(names, models, epoch_of, prologue)
        if found is None:
            return False
        overuse, producer, consumer = found
        at = dict(zip(names, choice))
        paired = self._paired.setdefault((first, last), collections.Counter())
        if producer is not None and (not LIMIT_OF[overuse.resource].producer_side or (
                overuse.resource in BY_READER and paired[producer, at[producer]] < READER_TRIES)):
            self._forbidden.add((producer, at[producer], consumer, at[consumer]))
            paired[producer, at[producer]] += 1
        else:
            self._banned.setdefault((first, last), set()).add((overuse.op, at[overuse.op]))
        return True

    def _epoch_data(self, first: int, last: int) -> _Epoch:
        """What planning epoch first..last reads: its ops' cycles and DRAM cycles per candidate in their contexts,
        its edges, the lower bound of its pipeline, the user's starts and orientations."""
        table = self.table
        names = table.schedule[first:last + 1]
        index = {n: k for k, n in enumerate(names)}
        contexts = [(first + k, first, table.last_user[first + k] > last) for k in range(len(names))]
        cycles = [table.context_cycles(*context) for context in contexts]
        dram = [table.context_dram_cycles(*context) for context in contexts]
        edges = [(index[o.src], k, self._compatible(o.src, name, j))
                 for k, name in enumerate(names) for j, o in enumerate(self.graph.operands(name)) if o.src in index]
        lower = max(max(min(c) for c in cycles), self._area_bound(names, cycles), sum(min(d) for d in dram))
        starts = [self.constraints.starts.get(n) for n in names]
        fixed = self.constraints.fixed_orientation(names)
        forced = [True if n in self.constraints.transposed else
                  None if starts[k] is None and n not in fixed else False for k, n in enumerate(names)]
        return _Epoch(first, last, names, cycles, dram, edges, lower, starts, forced)

    def _packed(self, epoch: _Epoch, hint: tuple) -> tuple[list[int], list | None] | Cut:
        """The hint made compatible, checked for fork-join stalls, shrunk until it packs, and made again while
        the packed choice overuses a core's stream resources: (choice, its packing or None), or a cut."""
        while True:
            banned = self._banned.get((epoch.first, epoch.last), set())
            choice = self._compatible_choice(epoch.names, epoch.cycles, hint, epoch.edges, banned)
            if isinstance(choice, Cut):
                return choice
            stalled = self._stalled_join(epoch.first, epoch.last, choice)
            if stalled is not None:
                return stalled
            choice, packed = self._shrink(epoch.names, epoch.cycles, epoch.dram, choice, epoch.edges, epoch.starts,
                                          epoch.forced, banned)
            if packed is None or not self._avoid_overuse(epoch.first, epoch.last, tuple(choice)):
                return choice, packed

    def _improved(self, epoch: _Epoch, choice: list[int], packed: list | None,
                  solver: bool = True) -> EpochSolution | Cut:
        """The packed choice, or (with `solver`) the CP-SAT model's where the packed pipeline could come down
        towards the bound by more than IMPROVE (or it did not pack) and the solver finds a faster one; a cut where
        neither packs or a fork-join stall slows the result."""
        names, cycles, dram, first, last, lower = epoch.names, epoch.cycles, epoch.dram, epoch.first, epoch.last, \
            epoch.lower
        pipeline = _pipeline(cycles, dram, choice)
        best = None if packed is None else EpochSolution(
            tuple(choice), tuple(t for _, t in packed), tuple(loc for loc, _ in packed), pipeline, lower, False)
        if best is None and first < last:     # not even its fewest cores pack first-fit: cut it, not the solver
            return Cut()
        mb = self.table.inputs[first]   # the solver lowers the pipeline, paid by all inputs but the first
        if best is not None and (not solver or (mb - 1) / mb * (pipeline - lower) <= (IMPROVE - 1) * pipeline):
            return self._checked(first, last, best)
        limit = pipeline if packed is not None else max(max(c) for c in cycles)
        banned = self._banned.get((first, last), set())
        ops = []
        for k, name in enumerate(names):      # candidates no slower than the packed plan (index kept)
            keep = [j for j, c in enumerate(cycles[k]) if c <= limit and (name, j) not in banned] or \
                [j for j in range(len(cycles[k])) if (name, j) not in banned]
            ops.append((keep, EpochOp(name, tuple(self.candidates[name][j].model.grid for j in keep),
                                      tuple(cycles[k][j] for j in keep), epoch.forced[k], epoch.starts[k],
                                      keep.index(choice[k]) if choice[k] in keep else 0,
                                      packed[k] if packed is not None else None, tuple(dram[k][j] for j in keep))))
        remap = [keep for keep, _ in ops]
        sub_edges = [(p, c, lambda a, b, f=f, p=p, c=c: f(remap[p][a], remap[c][b])) for p, c, f in epoch.edges]
        solution = solve_epoch([op for _, op in ops], sub_edges, self.device.grid_rows, self.device.grid_cols, lower,
                               export_to=self._export_path(names[0]))
        if solution is not None:
            solved = tuple(remap[k][j] for k, j in enumerate(solution.choice))
            if best is None or _pipeline(cycles, dram, solved) < pipeline:
                best = EpochSolution(solved, solution.transposed, solution.locations, _pipeline(cycles, dram, solved),
                                     max(lower, solution.bound), solution.optimal)
        return self._checked(first, last, best and self._grown(epoch, best, banned))

    def _grown(self, epoch: _Epoch, solution: EpochSolution, banned: set) -> EpochSolution:
        """The solution with its slowest op, while that lowers the epoch's pipeline, at its fewest-core faster
        candidate (not `banned`) that its neighbours' candidates can read and be read by and that fits where the
        other ops leave room (they stay where they are, an op with a start override too): the solver's
        deterministic time limit can leave such a move undone on an epoch of many ops."""
        names, cycles, dram = epoch.names, epoch.cycles, epoch.dram
        choice, locations, turned = list(solution.choice), list(solution.locations), list(solution.transposed)
        neighbours = _neighbours(epoch.edges)
        pipeline = _pipeline(cycles, dram, choice)
        while True:
            k = max(range(len(names)), key=lambda i: (cycles[i][choice[i]], -i))
            now = cycles[k][choice[k]]
            if now < pipeline or epoch.starts[k] is not None:     # the DRAM bytes or a fixed op set the pace
                break
            cands = self.candidates[names[k]]
            faster = sorted((j for j, c in enumerate(cycles[k]) if c < now and (names[k], j) not in banned
                             and all(ok(choice[n], j) for n, ok in neighbours.get(k, ()))),
                            key=lambda j: (cands[j].cores, cycles[k][j], j))
            others = [(locations[i], self.candidates[names[i]][choice[i]].model.grid, turned[i])
                      for i in range(len(names)) if i != k]
            for j in faster:
                spot = place_beside(others, self.device.grid_rows, self.device.grid_cols, cands[j].model.grid,
                                    epoch.forced[k])
                grown = [*choice[:k], j, *choice[k + 1:]]
                if spot is not None and _pipeline(cycles, dram, grown) < pipeline:
                    choice, pipeline = grown, _pipeline(cycles, dram, grown)
                    locations[k], turned[k] = spot
                    break
            else:
                break
        if choice == list(solution.choice):
            return solution
        return EpochSolution(tuple(choice), tuple(turned), tuple(locations), pipeline, solution.bound, False)

    def _checked(self, first: int, last: int, solution: EpochSolution | None) -> EpochSolution | Cut:
        """The epoch's solution, or where to cut the epoch instead: in the middle when it does not pack; before a
        join that a fork-join stall slows under the solution's choice (`_stalled_join`)."""
        if solution is None:
            return Cut()
        if first == last:
            return solution
        return self._stalled_join(first, last, list(solution.choice)) or solution

    def _export_path(self, first_op: str) -> Path | None:
        """Where the next epoch model is written (`Constraints.export_models`), or None."""
        if self.constraints.export_models is None:
            return None
        self._exported += 1
        return self.constraints.export_models / f"{self._exported - 1:03d}_{safe_file_stem(first_op)}.pb.txt"

    def _shrink(self, names: list[str], cycles: list[list[float]], dram: list[list[float]], choice: list[int],
                edges: list, starts: list, forced: list, banned: set) -> tuple[list[int], list | None]:
        """The choice made to pack: while it does not, the op move to a candidate with fewer cores (still
        compatible with its neighbours' choices, not `banned`) that raises the epoch's pipeline cycles least.
        Returns the choice and its packing (None: no move left)."""
        neighbours = _neighbours(edges)
        choice = list(choice)
        while True:
            grids = [self.candidates[n][k].model.grid for n, k in zip(names, choice)]
            packed = pack_epoch(grids, self.device.grid_rows, self.device.grid_cols, starts, forced)
            if packed is not None:
                return choice, packed
            top = [c[k] for c, k in zip(cycles, choice)]
            total = sum(d[k] for d, k in zip(dram, choice))
            best = None
            for k, name in enumerate(names):
                cands = self.candidates[name]
                others = max(top[:k] + top[k + 1:], default=0.0)
                for j, cand in enumerate(cands):
                    if cand.cores >= cands[choice[k]].cores or (name, j) in banned or \
                            not all(ok(choice[n], j) for n, ok in neighbours.get(k, ())):
                        continue
                    key = (max(others, cycles[k][j], total - dram[k][choice[k]] + dram[k][j]),
                           cand.cores - cands[choice[k]].cores, k, j)
                    best = key if best is None or key < best else best
            if best is None:
                return choice, None
            choice[best[2]] = best[3]

    def _stalled_join(self, first: int, last: int, choice: list[int]) -> Cut | None:
        """A cut before the first op of the epoch that a fork-join stall (`pybuda.arch.perf.fork_join_stalls`)
        makes more than STALL times slower than the epoch's slowest op without stalls, under the choice and
        after fork-join buffering (`fork_join.buffer_fork_joins`) (None: none). Cutting the epoch there puts the
        join's short path through a DRAM queue, which holds the whole microbatch. Producers in earlier epochs are
        costed at their first candidate."""
        names = self.table.schedule[first:last + 1]
        models, epoch_of, prologue = self._epoch_models(first, last, choice)
        timing = self.table.coster.cost(names, models, epoch_of, prologue).epochs[0]
        own = pace(timing)
        for offset, op in enumerate(timing.ops):
            if offset and op.limiter == "fork_join" and op.limiter_cycles > STALL * own:
                return Cut(offset)
        return None

    def _epoch_models(self, first: int, last: int, choice: list[int]) -> tuple[dict, dict, dict]:
        """(models, epoch of each op: -1 before, 0 in, 1 after, prologue choice) of epoch first..last under the
        choice, after fork-join buffering; ops outside it at their first candidate (the result is shared: not to
        be changed)."""
        key = (first, last, tuple(choice))
        if key not in self._recent:
            self._recent[key] = self._buffered_epoch_models(first, last, choice)
            if len(self._recent) > RECENT_EPOCH_MODELS:
                self._recent.popitem(last=False)
        return self._recent[key]

    def _buffered_epoch_models(self, first: int, last: int, choice: list[int]) -> tuple[dict, dict, dict]:
        """`_epoch_models`, computed."""
        schedule = self.table.schedule
        names = schedule[first:last + 1]
        models = {**self._outside, **{n: self.candidates[n][k].model for n, k in zip(names, choice)}}
        epoch_of = {n: -1 if i < first else (0 if i <= last else 1) for i, n in enumerate(schedule)}
        prologue = prologue_choice(self.graph, names, models)
        return buffer_fork_joins(self.graph, self.table.coster, names, models, epoch_of, prologue), epoch_of, prologue

    def _compatible_choice(self, names: list[str], cycles: list[list[float]], hint: tuple,
                           edges: list, banned: set) -> list[int] | Cut:
        """The hint made compatible along the epoch's edges, in schedule order: an op that cannot read its
        producers' chosen streamings takes its fewest-core candidate that can (the fastest one if none is within
        the hint's pipeline); where it has none, a producer whose candidate overuses ruled out with every one
        takes another (`_repartnered`), else its streamed producers take their fewest-core unstreamed candidates
        (an unstreamed output can be read in any streaming), and the walk resumes from the first producer moved;
        `banned` candidates are not taken. Returns a cut before the first op that still has none (in the
        middle if it is the first)."""
        choice = list(hint)
        pipeline = max(c[k] for c, k in zip(cycles, choice))
        preds: dict[int, list] = {}
        for p, c, compatible in edges:
            preds.setdefault(c, []).append((p, compatible))

        def best(k: int, allowed: list[int]) -> int:
            within = [j for j in allowed if cycles[k][j] <= pipeline]
            cands = self.candidates[names[k]]
            return min(within, key=lambda j: (cands[j].cores, cycles[k][j])) if within else \
                min(allowed, key=lambda j: cycles[k][j])

        pinned: set[int] = set()       # ops moved to unstreamed candidates; each moves once, so the walk ends
        dropped: set[tuple[int, int]] = set()   # (op, candidate) that no reader candidate can pair with

        def allowed_of(i: int) -> list[int]:
            return [j for j, c in enumerate(self.candidates[names[i]]) if (i not in pinned or not c.model.t_stream)
                    and (names[i], j) not in banned and (i, j) not in dropped]

        k = 0
        while k < len(names):
            allowed = allowed_of(k)
            ok = [j for j in allowed if all(compatible(choice[p], j) for p, compatible in preds.get(k, ()))]
            if ok:
                if choice[k] not in ok:
                    choice[k] = best(k, ok)
                k += 1
                continue
            moved = self._repartnered(names, k, allowed, preds.get(k, ()), choice, dropped, allowed_of, best)
            for p, _ in [] if moved else preds.get(k, ()):
                producer = self.candidates[names[p]]
                unstreamed = [j for j in allowed_of(p) if not producer[j].model.t_stream]
                if p not in pinned and producer[choice[p]].model.t_stream and unstreamed:
                    choice[p] = best(p, unstreamed)
                    pinned.add(p)
                    moved.append(p)
            if not moved:
                return Cut(k or None)
            k = min(moved)
        return choice

    def _repartnered(self, names: list[str], k: int, allowed: list[int], preds: list, choice: list[int],
                     dropped: set, allowed_of: Callable[[int], list[int]],
                     best: Callable[[int, list[int]], int]) -> list[int]:
        """Op k's producers (in the epoch) whose chosen candidate pairs with none of k's `allowed` candidates
        because a stream overuse ruled out every pair the streamings allow (`_avoid_overuse`): each such candidate
        is `dropped` and the producer takes its best candidate (`best`) of those it may take (`allowed_of`) that
        some allowed candidate of k can read. Returns the producers moved."""
        moved = []
        for p, compatible in preds:
            ruled_out = any((names[p], choice[p], names[k], j) in self._forbidden for j in allowed)
            if not ruled_out or any(compatible(choice[p], j) for j in allowed):
                continue
            dropped.add((p, choice[p]))
            partnered = [i for i in allowed_of(p) if any(compatible(i, j) for j in allowed)]
            if partnered:
                choice[p] = best(p, partnered)
                moved.append(p)
        return moved

    def _area_bound(self, names: list[str], cycles: list[list[float]]) -> float:
        """The least pipeline cycles at which the ops' fewest cores fit the grid (geometry relaxed)."""
        levels = sorted({c for cs in cycles for c in cs})
        lo, hi = 0, len(levels) - 1
        while lo < hi:
            mid = (lo + hi) // 2
            area = sum(min((self.candidates[n][j].cores for j, c in enumerate(cs) if c <= levels[mid]),
                           default=self.device.cores + 1) for n, cs in zip(names, cycles))
            if area <= self.device.cores:
                hi = mid
            else:
                lo = mid + 1
        return levels[lo]

    def _compatible(self, producer: str, consumer: str, index: int) -> Callable[[int, int], bool]:
        """compatible(producer's candidate, consumer's candidate) for operand `index` of `consumer` in one epoch
        (`streaming.edge_problem`, memoised per pair of streamings), unless a stream overuse ruled the pair out."""
        streams_p = [c.model.t_stream for c in self.candidates[producer]]
        streams_c = [c.model.t_stream for c in self.candidates[consumer]]

        def compatible(kp: int, kc: int) -> bool:
            if (producer, kp, consumer, kc) in self._forbidden:
                return False
            key = (consumer, index, streams_p[kp], streams_c[kc])
            if key not in self._edge_ok:
                self._edge_ok[key] = edge_problem(self.graph, consumer, index, *key[2:]) is None
            return self._edge_ok[key]
        return compatible

    def _key(self, first: int, last: int) -> tuple:
        """What an epoch's solution depends on: its ops' signatures (and names where an override names them),
        edges inside it, producers outside it, outputs read later."""
        schedule = self.table.schedule
        parts = []
        for i in range(first, last + 1):
            name = schedule[i]
            if name not in self._signatures:
                named = name in self.constraints.starts or name in self.constraints.transposed or \
                    name in self.constraints.overridden
                self._signatures[name] = (op_signature(self.graph, name), name if named else None)
            inside = tuple(p - first for p in self.table.producers[i] if p >= first)
            outside = tuple(p < first for p in self.table.producers[i])
            parts.append((self._signatures[name], inside, outside, self.table.last_user[i] > last))
        return tuple(parts)
