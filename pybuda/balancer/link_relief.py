"""Moves against NoC link congestion, once an epoch is placed (shared/reference/data-movement.md §1).

The epoch solver chooses locations without routing the pipes (an op's data movement there loads only the NIUs of
its own cores), so ops whose pipes cross the same links can end up sharing one that sets the epoch's pace: three
depthwise convolutions' gathers down one column of the grid, say. Per epoch whose busiest link is slower than
every other term of its ops (kernel, DRAM, PCIe, ...; the `floor`), a steepest-descent search moves the ops whose
pipes load that link: each to every free window of its footprint (in either orientation unless the user fixed
it) and into the place of an op of the same footprint (a swap). A move re-routes only the pipes that touch the
ops it moves (`_Links`); the search takes the move that most lowers the busiest link (then the bytes all links
carry beyond the floor) while one lowers either by `GAIN`, at most `ROUNDS` times and within `EVALUATIONS`
moves tried. The epoch's moves are kept when its exact timing (`PlanCoster.epoch_timing`: fill, fork-join
stalls, prologue included) is cheaper. Ops the user placed (`override_op_placement` start) stay; an epoch that
runs beside epochs of other chips is left as placed. Epochs alike in shape (a transformer's layers, placed alike)
are searched once (`_relief`): the search reads no op name (ops, windows and ties in epoch order), so its moves
depend on the epoch's shape alone, deterministic whatever compiled before it.
"""
from __future__ import annotations

import collections
import dataclasses
from typing import Iterator

from ..arch.movement import MovingOp, epoch_pipes, pipe_links
from ..device import DeviceSpec
from .dram import DramPlacement
from .op_model import OpModel
from .placer import Occupancy, PlacedOp
from .plan_cost import PlanCoster

ROUNDS = 16             # moves taken per epoch at most
GAIN = 0.005            # a move is taken when it lowers the busiest link (or the overflow) by more than this share
EVALUATIONS = 6000      # moves tried per epoch at most
RANKED = 64             # the busiest links kept in order (a move changes few of them)
RECENT = 256            # epoch shapes whose moves are kept (`_relief`)

_RECENT: collections.OrderedDict = collections.OrderedDict()

Move = dict     # op name -> its MovingOp at the new location


def relieve_links(coster: PlanCoster, schedule: list[str], models: dict[str, OpModel],
                  placed: dict[str, PlacedOp], prologue: dict[str, bool], dram: DramPlacement,
                  fixed: frozenset, transposed: frozenset) -> dict[str, PlacedOp]:
    """`placed` with the moves of each epoch that lower its exact cost (module docstring); `fixed`: ops the user
    placed, `transposed`: ops whose orientation stays (`Constraints.fixed_orientation`)."""
    device = coster.device
    epoch_of = {n: p.epoch for n, p in placed.items()}
    by_epoch, groups, temporal = coster.grouped(schedule, epoch_of)
    placed = dict(placed)
    for group in groups:
        if len(group) != 1:
            continue
        names = by_epoch[group[0]]
        loads = coster.epoch_loads(names, models, epoch_of, prologue, dram, temporal, placed)
        if any(load.moving is None or load.moving.loc is None for load in loads):
            continue
        before = coster.epoch_timing(loads)
        floor = max(max((v for k, v in o.terms.items() if k not in ("noc_link", "fork_join")), default=0.0)
                    for o in before.ops) * device.noc_link_bytes_per_cycle
        moved = _relief(device, {load.name: load.moving for load in loads}, floor, fixed, transposed)
        if not moved:
            continue
        trial = {**placed, **{n: PlacedOp(placed[n].epoch, op.loc, op.transpose) for n, op in moved.items()}}
        after = coster.epoch_timing(coster.epoch_loads(names, models, epoch_of, prologue, dram, temporal, trial))
        if after.epoch_cycles < before.epoch_cycles:
            placed = trial
    return placed


def _relief(device: DeviceSpec, ops: dict[str, MovingOp], floor: float, fixed: frozenset,
            transposed: frozenset) -> dict[str, MovingOp]:
    """`_search`'s moves, made once per epoch shape: epochs alike in their ops, edges, queues and locations (a
    transformer's layers) share them (`_shape`; the last `RECENT` shapes kept)."""
    names = list(ops)
    key = (device, floor, _shape(ops, fixed, transposed))
    found = _RECENT.get(key)
    if found is None:
        moved = _search(device, ops, floor, fixed, transposed)
        found = tuple((names.index(n), op.loc, op.transpose) for n, op in moved.items())
        _RECENT[key] = found
        if len(_RECENT) > RECENT:
            _RECENT.popitem(last=False)
    _RECENT.move_to_end(key)
    return {names[k]: dataclasses.replace(ops[names[k]], loc=loc, transpose=flip) for k, loc, flip in found}


def _shape(ops: dict[str, MovingOp], fixed: frozenset, transposed: frozenset) -> str:
    """An epoch as the search sees it, without names: per op its geometry, location, user constraints, inputs
    (the producer's position in the epoch, or the queue's layout) and the layouts of the queues it writes."""
    position = {n: k for k, n in enumerate(ops)}

    def layout(queue):
        return None if queue is None else dataclasses.replace(queue, name="")
    return repr(tuple((op.geometry, op.loc, op.transpose, op.chip, name in fixed, name in transposed,
                       tuple((position.get(i.src), i.tms, layout(i.queue), i.unpad, i.pad, i.tile_bytes, i.prologue,
                              i.min_buffer_tiles, i.dram_io_tiles) for i in op.inputs),
                       tuple(layout(q) for q in op.writes)) for name, op in ops.items()))


def _search(device: DeviceSpec, ops: dict[str, MovingOp], floor: float, fixed: frozenset,
            transposed: frozenset) -> dict[str, MovingOp]:
    """The ops the search moves (module docstring), at their new locations."""
    links = _Links(device, ops, floor)
    tried = 0
    for _ in range(ROUNDS):
        most, link = links.busiest()
        if most <= floor:
            break
        current = links.score({})
        best, best_score = None, current
        for name in links.through(link):
            if name in fixed:
                continue
            for move in _moves(device, name, links.ops, fixed, transposed):
                score = links.score(links.rerouted(move)[0])
                tried += 1
                if score < best_score:
                    best, best_score = move, score
            if tried >= EVALUATIONS:
                break
        if best is None or (best_score[0] > most * (1 - GAIN) and best_score[1] > current[1] * (1 - GAIN)):
            break
        links.apply(best)
        if tried >= EVALUATIONS:
            break
    return {n: op for n, op in links.ops.items() if (op.loc, op.transpose) != (ops[n].loc, ops[n].transpose)}


def _footprint(op: MovingOp) -> tuple[int, int]:
    rows, cols = op.geometry.grid
    return (cols, rows) if op.transpose else (rows, cols)


def _moves(device: DeviceSpec, name: str, ops: dict[str, MovingOp], fixed: frozenset,
           transposed: frozenset) -> Iterator[Move]:
    """Every move of op `name`: to each free window of its footprint (row-major, as placed first, then the other
    orientation where the user did not fix it), then swapped with each op of the same footprint (epoch order)."""
    op = ops[name]
    occupied = Occupancy(device.grid_rows, device.grid_cols)
    for other in ops.values():
        if other.name != name:
            occupied.take(*other.loc, *_footprint(other))
    rows, cols = op.geometry.grid
    flips = (op.transpose,) if name in transposed or rows == cols else (op.transpose, not op.transpose)
    for flip in flips:
        turned = dataclasses.replace(op, transpose=flip)
        h, w = _footprint(turned)
        for r in range(device.grid_rows - h + 1):
            for c in range(device.grid_cols - w + 1):
                if ((r, c), flip) != (op.loc, op.transpose) and occupied.free(r, c, h, w):
                    yield {name: dataclasses.replace(turned, loc=(r, c))}
    for other, partner in ops.items():
        if other != name and other not in fixed and _footprint(partner) == _footprint(op):
            yield {name: dataclasses.replace(op, loc=partner.loc), other: dataclasses.replace(partner, loc=op.loc)}


class _Links:
    """An epoch's routed link loads (bytes per input; `pybuda.arch.movement.pipe_links`) kept per pipe, so that a
    move re-routes only the pipes that touch the ops it moves and is scored on the links it changes: (the busiest
    link's bytes, the bytes all links carry beyond `floor`)."""

    def __init__(self, device: DeviceSpec, ops: dict[str, MovingOp], floor: float):
        self.device, self.ops, self.floor = device, dict(ops), floor
        self.pipes = epoch_pipes(list(ops.values()))
        self.queues = {q.name: q for o in ops.values()
                       for q in (*o.writes, *(i.queue for i in o.inputs if i.queue is not None))}
        self.loads = [pipe_links(device, pipe, self.ops, self.queues) for pipe in self.pipes]
        self.totals: dict = {}
        self.touching: dict[str, list[int]] = {}
        for k, (pipe, loads) in enumerate(zip(self.pipes, self.loads)):
            for link, nbytes in loads.items():
                self.totals[link] = self.totals.get(link, 0.0) + nbytes
            for name in self._ends(pipe):
                self.touching.setdefault(name, []).append(k)
        self._rank()

    def _rank(self) -> None:
        """The busiest links, in order, and the bytes beyond the floor (after each move made)."""
        self.ranked = sorted(self.totals.items(), key=lambda item: (-item[1], repr(item[0])))[:RANKED]
        self.overflow = sum(b - self.floor for b in self.totals.values() if b > self.floor)

    @staticmethod
    def _ends(pipe) -> set:
        """The ops whose location a pipe's route depends on: its consumer and the ops whose cores it reads."""
        return {pipe.consumer, *pipe.producers}

    def busiest(self) -> tuple[float, tuple | None]:
        """(bytes per input, link) of the busiest link (ties: the first in repr order)."""
        return (self.ranked[0][1], self.ranked[0][0]) if self.ranked else (0.0, None)

    def through(self, link: tuple) -> list[str]:
        """The ops whose pipes load `link`, in epoch order."""
        names: set = set()
        for pipe, loads in zip(self.pipes, self.loads):
            if link in loads:
                names |= self._ends(pipe)
        return [n for n in self.ops if n in names]

    def rerouted(self, move: Move) -> tuple[dict, list[tuple[int, dict]]]:
        """(the change of each link's bytes `move` makes, the new loads of the pipes it re-routes)."""
        ops = {**self.ops, **move}
        delta: dict = {}
        new = []
        for k in sorted({k for name in move for k in self.touching.get(name, ())}):
            for link, nbytes in self.loads[k].items():
                delta[link] = delta.get(link, 0.0) - nbytes
            loads = pipe_links(self.device, self.pipes[k], ops, self.queues)
            for link, nbytes in loads.items():
                delta[link] = delta.get(link, 0.0) + nbytes
            new.append((k, loads))
        return delta, new

    def score(self, delta: dict) -> tuple[float, float]:
        """(the busiest link's bytes, the bytes beyond the floor) with each link changed by `delta`."""
        most = next((b for link, b in self.ranked if link not in delta), None)
        if most is None:        # every ranked link changes: the busiest of the others
            most = max((b for link, b in self.totals.items() if link not in delta), default=0.0)
        overflow = self.overflow
        for link, change in delta.items():
            old = self.totals.get(link, 0.0)
            new = old + change
            most = max(most, new)
            overflow += max(0.0, new - self.floor) - max(0.0, old - self.floor)
        return most, overflow

    def apply(self, move: Move) -> None:
        """Make `move`."""
        delta, new = self.rerouted(move)
        for link, change in delta.items():
            self.totals[link] = self.totals.get(link, 0.0) + change
        for k, loads in new:
            self.loads[k] = loads
        self.ops.update(move)
        self._rank()
