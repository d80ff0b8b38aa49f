"""One epoch as a CP-SAT model (pybuda-balancer.md §8.2-8.4; `ortools.sat`): which candidate each op of the epoch
takes, transposed or not, and where its grid sits on the core grid.

Variables: a literal per (op, candidate, orientation), exactly one per op; each op's top-left core (row, col) and
its footprint's height and width, tied to the chosen literal; the epoch's pipeline cycles P. Constraints: the
footprints inside the grid and `NoOverlap2D`; P at least every op's limiter cycles in the epoch's context (from
`PlanCoster.context_cost`); producer/consumer compatibility of streamed models on every edge inside the epoch (a
clause per producer candidate: it implies one of the consumer candidates that can read it in the epoch); P at
least the epoch's DRAM bytes per input over the bandwidth of all channels; user
start and transpose overrides fixed; P at least a given lower bound (the segment relaxation's). Objective: the
fewest pipeline cycles, then the fewest cores. Solved with one worker, a fixed seed and a deterministic time limit,
so the same epoch gives the same answer on any machine; a hint (the planner's candidates, with their locations
where it packed them, else placed first-fit) warm-starts it. The solver's bound on P is kept.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable

from ortools.sat.python import cp_model

SEED = 1
CORE_WEIGHT = 1            # objective: pipeline cycles x (total cores + 1), then cores
DETERMINISTIC_SECONDS = 0.1


@dataclasses.dataclass(frozen=True)
class EpochOp:
    """What the epoch model needs of one op: per candidate its grid (rows, cols) and limiter cycles, whether it
    may be transposed, a fixed start (override) and the warm start: a candidate and, where known, its location
    and orientation."""

    name: str
    grids: tuple
    cycles: tuple
    transpose: bool | None = None   # None: free; True / False: forced
    start: tuple | None = None
    hint: int = 0
    hint_at: tuple | None = None    # ((row, col), transposed)
    dram: tuple = ()                # per candidate: DRAM bytes per input / all channels' bandwidth (cycles)


@dataclasses.dataclass(frozen=True)
class EpochSolution:
    """Per op: candidate index, transposed, (row, col); the pipeline cycles of the choice, the solver's lower
    bound on them and whether the solver proved the choice optimal."""

    choice: tuple
    transposed: tuple
    locations: tuple
    pipeline: float
    bound: float
    optimal: bool


def solve_epoch(ops: list[EpochOp], edges: list[tuple[int, int, Callable[[int, int], bool]]], rows: int, cols: int,
                lower: float = 0.0, deterministic_seconds: float = DETERMINISTIC_SECONDS) -> EpochSolution | None:
    """The best choice for one epoch; `edges`: (producer index, consumer index, compatible(candidate of producer,
    candidate of consumer)) for every edge inside the epoch; `lower`: a lower bound of its pipeline cycles. None
    if the solver finds no packing within its time limit."""
    model = cp_model.CpModel()
    top = max(max(max(op.cycles) for op in ops), sum(max(op.dram, default=0.0) for op in ops))
    scale = max(1.0, top / 1e7)      # keep cycle integers well inside int64
    options, x_ivs, y_ivs, locs = [], [], [], []
    pipeline = model.new_int_var(min(int(lower / scale), int(math.ceil(top / scale))), int(math.ceil(top / scale)) + 1,
                                 "P")
    core_terms, dram_terms = [], []
    for i, op in enumerate(ops):
        lits = {}
        for k, (grid, cycles) in enumerate(zip(op.grids, op.cycles)):
            for t in _orientations(grid, op.transpose):
                h, w = (grid[1], grid[0]) if t else grid
                if h > rows or w > cols:
                    continue
                lits[(k, t)] = (model.new_bool_var(f"x{i}_{k}_{t}"), h, w, int(math.ceil(cycles / scale)))
        if not lits:
            return None
        model.add_exactly_one(v for v, *_ in lits.values())
        height = model.new_int_var(1, rows, f"h{i}")
        width = model.new_int_var(1, cols, f"w{i}")
        model.add(height == sum(v * h for v, h, _, _ in lits.values()))
        model.add(width == sum(v * w for v, _, w, _ in lits.values()))
        row, col = model.new_int_var(0, rows - 1, f"r{i}"), model.new_int_var(0, cols - 1, f"c{i}")
        row_end, col_end = model.new_int_var(1, rows, f"re{i}"), model.new_int_var(1, cols, f"ce{i}")
        y_ivs.append(model.new_interval_var(row, height, row_end, f"y{i}"))
        x_ivs.append(model.new_interval_var(col, width, col_end, f"x{i}"))
        if op.start is not None:
            model.add(row == op.start[0])
            model.add(col == op.start[1])
        for (k, _), (v, h, w, c) in lits.items():
            model.add(pipeline >= c).only_enforce_if(v)
            core_terms.append(v * (h * w))
            if op.dram:
                dram_terms.append(v * int(op.dram[k] / scale))
        options.append(lits)
        locs.append((row, col))
    model.add_no_overlap_2d(x_ivs, y_ivs)
    model.add(pipeline >= sum(dram_terms))
    for p, c, compatible in edges:
        for (kp, tp), (vp, *_) in options[p].items():
            ok = [vc for (kc, _), (vc, *_) in options[c].items() if compatible(kp, kc)]
            model.add_bool_or([vp.Not(), *ok])
    cores = sum(core_terms)
    model.minimize(pipeline * (rows * cols + 1) + CORE_WEIGHT * cores)
    _hint(model, ops, options, locs, rows, cols)
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = SEED
    solver.parameters.max_deterministic_time = deterministic_seconds
    status = solver.solve(model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    choice, transposed, locations = [], [], []
    for lits, (row, col) in zip(options, locs):
        (k, t), = [key for key, (v, *_) in lits.items() if solver.boolean_value(v)]
        choice.append(k)
        transposed.append(bool(t))
        locations.append((solver.value(row), solver.value(col)))
    bound = solver.best_objective_bound / (rows * cols + 1) - CORE_WEIGHT * rows * cols / (rows * cols + 1)
    return EpochSolution(tuple(choice), tuple(transposed), tuple(locations), solver.value(pipeline) * scale,
                         max(0.0, math.floor(bound) * scale), status == cp_model.OPTIMAL)


def _orientations(grid: tuple, transpose: bool | None) -> tuple:
    if transpose is not None:
        return (transpose,)
    return (False,) if grid[0] == grid[1] else (False, True)


def _hint(model: cp_model.CpModel, ops: list[EpochOp], options: list, locs: list, rows: int, cols: int) -> None:
    """Warm start: each op's hint candidate at its hinted location, else untransposed unless forced and placed
    first-fit row-major."""
    taken = [[False] * cols for _ in range(rows)]
    for op, lits, (row, col) in zip(ops, options, locs):
        if op.hint_at is not None and (op.hint, op.hint_at[1]) in lits:
            key, spot = (op.hint, op.hint_at[1]), op.hint_at[0]
        else:
            key = ([k for k in lits if k[0] == op.hint] or list(lits))[0]
            spot = op.start or _first_fit(taken, *lits[key][1:3])
        if spot is None:
            return                      # the hint does not pack: let the solver search from scratch
        _, h, w, _ = lits[key]
        for r in range(spot[0], min(rows, spot[0] + h)):
            for c in range(spot[1], min(cols, spot[1] + w)):
                taken[r][c] = True
        for other, (v, *_) in lits.items():
            model.add_hint(v, other == key)
        model.add_hint(row, spot[0])
        model.add_hint(col, spot[1])


def _first_fit(taken: list[list[bool]], h: int, w: int) -> tuple | None:
    rows, cols = len(taken), len(taken[0])
    for r in range(rows - h + 1):
        for c in range(cols - w + 1):
            if not any(taken[rr][cc] for rr in range(r, r + h) for cc in range(c, c + w)):
                return (r, c)
    return None
