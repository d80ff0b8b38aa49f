"""Fork-join buffering (pybuda-balancer.md §4.5, the legacy pass's second remedy: grow input buffers into free L1).

Where a fork-join in an epoch stalls its join beyond the pace of the epoch's slowest op without stalls
(`pybuda.arch.perf.fork_join_stalls`), the join's input buffer on the short path grows (input_buf_min_size_tiles)
to the least size that brings the stall down to that pace, or as far as the join's free L1 allows. The buffer is
costed like any other: its L1 in the op model, the stall it leaves in the epoch's timing.
"""
from __future__ import annotations

from ..arch.perf import EpochTiming
from ..ir import Graph
from .dram import DramPlacement
from .op_model import OpModel, input_names, netlist_inputs, with_input_buffers
from .placer import PlacedOp
from .plan_cost import PlanCoster

ROUNDS = 8      # buffering passes over an epoch (a grown buffer can leave another fork-join the worst)


def buffer_fork_joins(graph: Graph, coster: PlanCoster, schedule: list[str], models: dict[str, OpModel],
                      epoch_of: dict[str, int], prologue: dict[str, bool], dram: DramPlacement | None = None,
                      placed: dict[str, PlacedOp] | None = None) -> dict[str, OpModel]:
    """`models` with the joins of every epoch's stalling fork-joins buffered (module docstring), costed with the
    DRAM placement and core locations where given (`PlanCoster.cost`)."""
    where = {"dram": dram, "placed": placed}
    models = dict(models)
    by_epoch: dict[int, list[str]] = {}
    for name in schedule:
        by_epoch.setdefault(epoch_of[name], []).append(name)
    for names in by_epoch.values():
        for _ in range(ROUNDS):
            grown = False
            for join, short in _stalled(coster, names, models, epoch_of, prologue, where):
                model = _buffered(graph, coster, names, models, epoch_of, prologue, join, short, where)
                if model is not None:
                    models[join] = model
                    grown = True
            if not grown:
                break
    return models


def _stalled(coster: PlanCoster, names: list[str], models: dict[str, OpModel], epoch_of: dict[str, int],
             prologue: dict[str, bool], where: dict) -> list[tuple[str, str]]:
    """(join, its input on the short path) of each op a fork-join stall makes slower than the epoch's pace."""
    timing = coster.cost(names, models, epoch_of, prologue, **where).epochs[0]
    limit = pace(timing)
    return [(op.name, op.short_input) for op in timing.ops if op.limiter == "fork_join" and op.limiter_cycles > limit]


def pace(timing: EpochTiming) -> float:
    """The epoch's slowest op's limiter cycles without fork-join stalls."""
    return max(max(v for k, v in op.terms.items() if k != "fork_join") for op in timing.ops)


def _buffered(graph: Graph, coster: PlanCoster, names: list[str], models: dict[str, OpModel],
              epoch_of: dict[str, int], prologue: dict[str, bool], join: str, short: str,
              where: dict) -> OpModel | None:
    """The join's model with its short-path input buffers at the least min size (tiles) that takes the stall to
    the epoch's pace, or the largest that fits L1 if none does (None: no bigger buffer fits)."""
    model = models[join]
    device = coster.device
    inputs = [k for k, src in enumerate(input_names(graph, join)) if src == short]
    if not inputs:
        return None
    current = model.input_buf_min or (0,) * len(input_names(graph, join))

    def sized(tiles: int) -> OpModel | None:
        return with_input_buffers(graph, join, model, device,
                                  tuple(max(tiles, m) if k in inputs else m for k, m in enumerate(current)))

    def stall(candidate: OpModel) -> tuple[float, float]:
        timing = coster.cost(names, {**models, join: candidate}, epoch_of, prologue, **where).epochs[0]
        op = next(o for o in timing.ops if o.name == join)
        return op.terms.get("fork_join", 0.0), pace(timing)

    tile_bytes = min(i.df.tile_bytes for k, i in enumerate(netlist_inputs(graph, join, model, exact=False))
                     if k in inputs)
    lo = max(current[k] for k in inputs)
    hi = lo + (device.l1_usable - model.l1_bytes) // tile_bytes     # at most every free byte of L1
    while hi > lo and sized(hi) is None:
        hi = lo + (hi - lo) // 2
    if hi == lo:
        return None
    best = sized(hi)
    if best.l1_bytes == model.l1_bytes:     # no bigger than the buffer the backend sizes anyway
        return None
    cycles, limit = stall(best)
    if cycles > limit:
        return best
    while hi - lo > 1:
        mid = (lo + hi) // 2
        candidate = sized(mid)
        cycles, limit = stall(candidate)
        if cycles <= limit:
            hi, best = mid, candidate
        else:
            lo = mid
    return best
