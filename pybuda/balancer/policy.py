"""Balancing policy: pick one op model per op and cut epochs.

Search over a common cycle target T (as the legacy NLP/Ribbon policies do, but searched rather than fixed):
for each candidate T every op takes the model with the fewest cores whose limiter cycles are <= T (or its
fastest model), the placer packs the ops, and the plan's estimated time
    sum over epochs (slowest op * microbatch) + epoch switches
is computed. The T with the least time wins. Overrides (grid size, start, transpose, epoch breaks) are
constraints of every candidate plan."""
from __future__ import annotations

import dataclasses

from ..device import DeviceSpec
from ..ir import Graph
from .op_model import BalancerError, OpModel, legal_op_models, op_dims
from .placer import PlacedOp, place


@dataclasses.dataclass
class Placement:
    """The balancer's result: per op its model and location, and per queue whether it is a prologue."""

    models: dict[str, OpModel]
    placed: dict[str, PlacedOp]
    limiter_cycles: dict[str, int]
    prologue: dict[str, bool]
    epochs: int
    estimated_cycles: int


def _operand_tiles(graph: Graph, name: str, port: int, model: OpModel) -> int:
    """Tiles one core reads from operand `port` for one input."""
    dims = op_dims(graph, name)
    gr, gc = model.grid
    node = graph.node(name)
    if node.op_type == "matmul":
        per_core = dims["rt"] // gr * dims["k"] if port == 0 else dims["k"] * dims["ct"] // gc
    elif node.op_type == "sparse_matmul":
        return dims["k"] * dims["ct"] // gc  # the activations are not t-sliced (act_t 1)
    elif node.op_type == "reduce":
        per_core = dims["rt"] // gr * dims["k"] if node.attrs["dim"] == "c" else dims["k"] * dims["ct"] // gc
    else:
        per_core = dims["rt"] // gr * dims["ct"] // gc
    return per_core * dims["t"]


def _queue_cost(graph: Graph, name: str, model: OpModel, device: DeviceSpec, microbatch: int,
                host_inputs: bool) -> tuple[int, dict[str, bool]]:
    """Read-limited cycles of an op's queue operands and which parameter queues fit L1 as prologue."""
    free = device.l1_usable - model.l1_bytes
    worst, prologue = 0.0, {}
    operands = sorted(enumerate(graph.operands(name)), key=lambda po: _operand_tiles(graph, name, po[0], model))
    for port, operand in operands:
        src = graph.node(operand.src)
        if src.kind == "op":
            continue
        tiles = _operand_tiles(graph, name, port, model)
        nbytes = tiles * src.df.tile_bytes
        if src.kind == "input":
            bw = device.pcie_bw_bytes_per_cycle / model.cores if host_inputs else device.dram_bw_bytes_per_cycle
            worst = max(worst, nbytes / bw)
            continue
        if nbytes <= free:
            free -= nbytes
            prologue[operand.src] = True
            worst = max(worst, nbytes / (device.dram_bw_bytes_per_cycle * microbatch))
        else:
            prologue[operand.src] = False
            worst = max(worst, nbytes / device.dram_bw_bytes_per_cycle)
    return int(worst), prologue


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


def _models_for(graph: Graph, name: str, device: DeviceSpec, grid_override: tuple | None) -> list[OpModel]:
    models = legal_op_models(graph, name, device)
    dims = op_dims(graph, name)
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


def balance_and_place(graph: Graph, device: DeviceSpec, config, microbatch: int) -> Placement:
    """Choose op models and placement for every op of the Buda graph."""
    schedule = [n for n in graph.topo_order() if graph.node(n).kind == "op"]
    grid_overrides, starts, transposed, breaks = _overrides(config, schedule)
    host_inputs = bool(config.input_queues_on_host)
    candidates: dict[str, list[tuple[int, OpModel, dict]]] = {}
    for name in schedule:
        entries = []
        for m in _models_for(graph, name, device, grid_overrides.get(name)):
            qcost, prologue = _queue_cost(graph, name, m, device, microbatch, host_inputs)
            entries.append((max(m.cycles, qcost), m, prologue))
        entries.sort(key=lambda e: (e[1].cores, e[0], e[1].grid))
        candidates[name] = entries

    def plan(target: int):
        chosen = {}
        for name in schedule:
            fits = [e for e in candidates[name] if e[0] <= target]
            chosen[name] = fits[0] if fits else min(candidates[name], key=lambda e: (e[0], e[1].cores))
        placed = place(schedule, {n: chosen[n][1].grid for n in schedule}, device, starts=starts,
                       transposed=transposed, breaks=breaks)
        epochs = max(p.epoch for p in placed.values()) + 1
        slowest = [0] * epochs
        for n in schedule:
            slowest[placed[n].epoch] = max(slowest[placed[n].epoch], chosen[n][0])
        cost = sum(s * microbatch for s in slowest) + (epochs - 1) * device.epoch_switch_cycles
        return cost, chosen, placed, epochs

    targets = sorted({e[0] for entries in candidates.values() for e in entries})
    if len(targets) > 48:
        step = (len(targets) - 1) / 47
        targets = sorted({targets[round(i * step)] for i in range(48)})
    best = min((plan(t) for t in targets), key=lambda p: p[0])
    cost, chosen, placed, epochs = best
    prologue: dict[str, bool] = {}
    for name in schedule:
        for queue, ok in chosen[name][2].items():
            prologue[queue] = prologue.get(queue, True) and ok
    return Placement(models={n: chosen[n][1] for n in schedule}, placed=placed,
                     limiter_cycles={n: chosen[n][0] for n in schedule}, prologue=prologue, epochs=epochs,
                     estimated_cycles=cost)
