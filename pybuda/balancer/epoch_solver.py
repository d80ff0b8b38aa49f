"""One epoch as a CP-SAT model (pybuda-balancer.md §8.2-8.4; `ortools.sat`): which candidate each op of the epoch
takes, transposed or not, and where its grid sits on the core grid. Laid out as OR-tools' samples are: the data
(`EpochOp`, the edges), the variables (`EpochModel`: per op its `Option`s and top-left core), one block per
constraint, the objective, the warm start, then solve and decode.

Variables: a literal per (op, candidate, orientation) that fits the grid; each op's top-left core (row, col) and
its footprint's height and width, tied to the chosen literal; the epoch's pipeline cycles P. Constraints: exactly
one option per op; the footprints inside the grid and `NoOverlap2D`; P at least the chosen option's limiter cycles
in the epoch's context (from `PlanCoster.context_cost`); P at least the epoch's DRAM bytes per input over the
bandwidth of all channels; producer/consumer compatibility on every edge inside the epoch (a clause per producer
option: it implies one of the consumer options that can read it in the epoch); user start overrides fixed
(transpose overrides restrict the orientations); P at least a given lower bound (the segment relaxation's).
Objective: the fewest pipeline cycles, then the fewest cores. Solved with one worker, a fixed seed and a
deterministic time limit, so the same epoch gives the same answer on any machine; a hint (the planner's
candidates, with their locations where it packed them, else placed first-fit) warm-starts it. The solver's bound
on P is kept.

Debugging: with `export_to`, the model is written as a text protobuf before it is solved; `replay(path)` solves
such a file again with the same parameters (the config's `balancer_export_models` names the directory).
"""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Callable

from ortools.sat.python import cp_model

from ..files import write_atomically

SEED = 1
CORE_WEIGHT = 1            # objective: pipeline cycles x (total cores + 1), then cores
DETERMINISTIC_SECONDS = 0.1
MAX_SCALED_CYCLES = 1e7    # cycles are divided by a scale that keeps them below this (well inside int64)

Compatible = Callable[[int, int], bool]     # (producer's candidate, consumer's candidate) -> may share the epoch


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


@dataclasses.dataclass(frozen=True)
class Option:
    """One way to place an op: a candidate in an orientation, its footprint, its (scaled) cycles and the literal
    that chooses it."""

    candidate: int
    transposed: bool
    height: int
    width: int
    cycles: int
    chosen: cp_model.IntVar


@dataclasses.dataclass(frozen=True)
class OpVars:
    """An op's variables: its options, its footprint's height and width and its top-left and end cores."""

    options: tuple[Option, ...]
    height: cp_model.IntVar
    width: cp_model.IntVar
    row: cp_model.IntVar
    col: cp_model.IntVar
    row_end: cp_model.IntVar
    col_end: cp_model.IntVar


@dataclasses.dataclass(frozen=True)
class EpochModel:
    """The CP-SAT model of an epoch and the variables decoding reads."""

    model: cp_model.CpModel
    ops: tuple[OpVars, ...]
    pipeline: cp_model.IntVar
    scale: float
    slots: int          # the grid's cores + 1: the objective's weight of a pipeline cycle


def build_model(ops: list[EpochOp], edges: list[tuple[int, int, Compatible]], rows: int, cols: int,
                lower: float = 0.0) -> EpochModel | None:
    """The epoch's model (module docstring); None if an op has no option that fits the grid."""
    model = cp_model.CpModel()

    # Data: cycles scaled to integers well inside int64
    top = max(max(max(op.cycles) for op in ops), sum(max(op.dram, default=0.0) for op in ops))
    scale = max(1.0, top / MAX_SCALED_CYCLES)
    ceiling = int(math.ceil(top / scale))

    # Variables: P; per op an option literal per (candidate, orientation) that fits, its footprint and place
    pipeline = model.new_int_var(min(int(lower / scale), ceiling), ceiling + 1, "P")
    op_vars = []
    for i, op in enumerate(ops):
        options = tuple(Option(k, t, h, w, int(math.ceil(cycles / scale)), model.new_bool_var(f"x{i}_{k}_{t}"))
                        for k, (grid, cycles) in enumerate(zip(op.grids, op.cycles))
                        for t in _orientations(grid, op.transpose)
                        for h, w in [(grid[1], grid[0]) if t else grid] if h <= rows and w <= cols)
        if not options:
            return None
        op_vars.append(OpVars(options, model.new_int_var(1, rows, f"h{i}"), model.new_int_var(1, cols, f"w{i}"),
                              model.new_int_var(0, rows - 1, f"r{i}"), model.new_int_var(0, cols - 1, f"c{i}"),
                              model.new_int_var(1, rows, f"re{i}"), model.new_int_var(1, cols, f"ce{i}")))

    x_intervals, y_intervals = [], []
    for i, (op, v) in enumerate(zip(ops, op_vars)):
        # Constraint: each op takes exactly one option
        model.add_exactly_one(o.chosen for o in v.options)
        # Constraint: its footprint is the chosen option's, inside the grid
        model.add(v.height == sum(o.chosen * o.height for o in v.options))
        model.add(v.width == sum(o.chosen * o.width for o in v.options))
        y_intervals.append(model.new_interval_var(v.row, v.height, v.row_end, f"y{i}"))
        x_intervals.append(model.new_interval_var(v.col, v.width, v.col_end, f"x{i}"))
        # Constraint: the user's start override
        if op.start is not None:
            model.add(v.row == op.start[0])
            model.add(v.col == op.start[1])
        # Constraint: the pipeline is at least the chosen option's cycles
        for o in v.options:
            model.add(pipeline >= o.cycles).only_enforce_if(o.chosen)

    # Constraint: the footprints do not overlap
    model.add_no_overlap_2d(x_intervals, y_intervals)

    # Constraint: the pipeline is at least the epoch's DRAM bytes over all channels' bandwidth
    model.add(pipeline >= sum(o.chosen * int(op.dram[o.candidate] / scale)
                              for op, v in zip(ops, op_vars) if op.dram for o in v.options))

    # Constraint: a producer's option implies a consumer option that can read it in the epoch
    for p, c, compatible in edges:
        for o in op_vars[p].options:
            model.add_bool_or([o.chosen.Not(), *(r.chosen for r in op_vars[c].options
                                                 if compatible(o.candidate, r.candidate))])

    # Objective: the fewest pipeline cycles, then the fewest cores
    slots = rows * cols + 1
    cores = sum(o.chosen * (o.height * o.width) for v in op_vars for o in v.options)
    model.minimize(pipeline * slots + CORE_WEIGHT * cores)

    # Warm start: the planner's choice
    _hint(model, ops, op_vars, rows, cols)
    return EpochModel(model, tuple(op_vars), pipeline, scale, slots)


def solve_epoch(ops: list[EpochOp], edges: list[tuple[int, int, Compatible]], rows: int, cols: int,
                lower: float = 0.0, deterministic_seconds: float = DETERMINISTIC_SECONDS,
                export_to: Path | None = None) -> EpochSolution | None:
    """The best choice for one epoch; `edges`: (producer index, consumer index, compatible(candidate of producer,
    candidate of consumer)) for every edge inside the epoch; `lower`: a lower bound of its pipeline cycles;
    `export_to`: a file the model is written to first (text protobuf). None if the solver finds no packing within
    its time limit."""
    built = build_model(ops, edges, rows, cols, lower)
    if built is None:
        return None
    if export_to is not None:
        write_atomically(export_to, lambda f: f.write(str(built.model.proto)), binary=False)
    solver = _solver(deterministic_seconds)
    status = solver.solve(built.model)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    return _decode(solver, built, rows * cols, status == cp_model.OPTIMAL)


@dataclasses.dataclass(frozen=True)
class Replayed:
    """An exported model solved again: the solver's status name, objective value and bound on it."""

    status: str
    objective: float
    bound: float


def replay(path: str | Path, deterministic_seconds: float = DETERMINISTIC_SECONDS) -> Replayed:
    """Solve an exported epoch model (`solve_epoch(export_to=)`) again with the balancer's solver parameters."""
    model = cp_model.CpModel()
    model.proto.parse_text_format(Path(path).read_text())
    solver = _solver(deterministic_seconds)
    status = solver.solve(model)
    return Replayed(status.name, solver.objective_value, solver.best_objective_bound)


def _solver(deterministic_seconds: float) -> cp_model.CpSolver:
    """One worker, a fixed seed, a deterministic time limit: the same model gives the same answer anywhere."""
    solver = cp_model.CpSolver()
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = SEED
    solver.parameters.max_deterministic_time = deterministic_seconds
    return solver


def _decode(solver: cp_model.CpSolver, built: EpochModel, cores: int, optimal: bool) -> EpochSolution:
    """The solution's choice per op, its pipeline cycles and the solver's bound on them (unscaled)."""
    chosen = [next(o for o in v.options if solver.boolean_value(o.chosen)) for v in built.ops]
    bound = solver.best_objective_bound / built.slots - CORE_WEIGHT * cores / built.slots
    return EpochSolution(tuple(o.candidate for o in chosen), tuple(o.transposed for o in chosen),
                         tuple((solver.value(v.row), solver.value(v.col)) for v in built.ops),
                         solver.value(built.pipeline) * built.scale, max(0.0, math.floor(bound) * built.scale),
                         optimal)


def _orientations(grid: tuple, transpose: bool | None) -> tuple:
    if transpose is not None:
        return (transpose,)
    return (False,) if grid[0] == grid[1] else (False, True)


def _hint(model: cp_model.CpModel, ops: list[EpochOp], op_vars: list[OpVars], rows: int, cols: int) -> None:
    """Warm start: each op's hint candidate at its hinted location, else untransposed unless forced and placed
    first-fit row-major."""
    taken = [[False] * cols for _ in range(rows)]
    for op, v in zip(ops, op_vars):
        by_key = {(o.candidate, o.transposed): o for o in v.options}
        if op.hint_at is not None and (op.hint, op.hint_at[1]) in by_key:
            hinted, spot = by_key[(op.hint, op.hint_at[1])], op.hint_at[0]
        else:
            hinted = next((o for o in v.options if o.candidate == op.hint), v.options[0])
            spot = op.start or _first_fit(taken, hinted.height, hinted.width)
        if spot is None:
            return                      # the hint does not pack: let the solver search from scratch
        for r in range(spot[0], min(rows, spot[0] + hinted.height)):
            for c in range(spot[1], min(cols, spot[1] + hinted.width)):
                taken[r][c] = True
        for o in v.options:
            model.add_hint(o.chosen, o is hinted)
        model.add_hint(v.row, spot[0])
        model.add_hint(v.col, spot[1])


def _first_fit(taken: list[list[bool]], h: int, w: int) -> tuple | None:
    rows, cols = len(taken), len(taken[0])
    for r in range(rows - h + 1):
        for c in range(cols - w + 1):
            if not any(taken[rr][cc] for rr in range(r, r + h) for cc in range(c, c + w)):
                return (r, c)
    return None
