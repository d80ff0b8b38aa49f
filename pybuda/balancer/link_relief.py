"""Moves against NoC link congestion, once an epoch is placed (shared/reference/data-movement.md §1).

The epoch solver chooses locations without routing the pipes (an op's data movement there loads only the NIUs of
its own cores), so ops whose pipes cross the same links can end up sharing one that sets the epoch's pace: three
depthwise convolutions' gathers down one column of the grid, say. Per epoch whose busiest link is slower than
every other term of its ops (kernel, DRAM, PCIe, ...; the `floor`), a steepest-descent search moves the ops whose
pipes load that link: each to every free window of its footprint (in either orientation unless the user fixed
it), into the place of an op of the same footprint (a swap), where blocks are searched into a window of its
footprint that smaller whole ops fill, which take its place as a block (`_block_swaps`), and where regions are
searched, every square region holding it and only whole ops, turned (`_turned_regions`: transposed about its
diagonal or mirrored, the moves that reach an epoch with no free window: a column of cores fed down one grid
column becomes a row fed down several). A move re-routes only the pipes that touch the ops it moves (`_Links`,
routes kept per placement in `_Routes`); the search takes the move that most lowers the busiest link (then the
bytes all links carry beyond the floor) while one lowers either by `GAIN`, at most `ROUNDS` times and within
`EVALUATIONS` moves tried per phase. Each of `STRATEGIES` is searched (single moves to their end then regions
too; blocks, then regions too; and the same from the whole epoch turned upside down, mirrored or both (`TURNS`:
the DRAM and PCIe ends do not turn with it, so its pipes route anew): each can stop at a better local optimum;
the next only while a link still sets the pace) and the cheapest of their results by the epoch's exact timing
(`PlanCoster.epoch_timing`: fill, fork-join stalls, prologue included) is kept where it is cheaper than the
placement. Ops the user placed (`override_op_placement` start) stay, and no whole epoch holding one turns; an
epoch that runs beside epochs of other chips is left as placed. Epochs alike in shape (a transformer's layers,
placed alike) are searched once (`_relief`): the search reads no op name (ops, windows and ties in epoch order),
so its moves depend on the epoch's shape alone, deterministic whatever compiled before it.
"""
from __future__ import annotations

import collections
import dataclasses
from typing import Iterator, NamedTuple

import numpy as np

from ..arch.movement import MovingOp, epoch_pipes, leg_links, pipe_legs
from ..device import DeviceSpec
from .dram import DramPlacement
from .op_model import OpModel
from .placer import Occupancy, PlacedOp
from .plan_cost import PlanCoster

ROUNDS = 16             # moves taken per phase of a search at most
GAIN = 0.005            # a move is taken when it lowers the busiest link (or the overflow) by more than this share
EVALUATIONS = 6000      # moves tried per phase of a search at most
# per search, its phases: each the kinds of move it adds to single moves and swaps (`_search`, `_moves`)
TURNS = {"rotated": (True, True), "flipped": (True, False), "mirrored": (False, True)}   # whole-epoch starts
STRATEGIES = (((), ("regions",)), (("blocks",), ("blocks", "regions")),
              *(((turn, "blocks"), ("blocks", "regions")) for turn in TURNS))
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
        base = placed
        for moved in _relief(device, {load.name: load.moving for load in loads}, floor, fixed, transposed):
            trial = {**base, **{n: PlacedOp(base[n].epoch, op.loc, op.transpose) for n, op in moved.items()}}
            after = coster.epoch_timing(coster.epoch_loads(names, models, epoch_of, prologue, dram, temporal, trial))
            if after.epoch_cycles < before.epoch_cycles:
                placed, before = trial, after
    return placed


def _relief(device: DeviceSpec, ops: dict[str, MovingOp], floor: float, fixed: frozenset,
            transposed: frozenset) -> list[dict[str, MovingOp]]:
    """The moves of each of `STRATEGIES` (those that move an op), searched once per epoch shape: epochs alike in
    their ops, edges, queues and locations (a transformer's layers) share them (`_shape`; the last `RECENT` shapes
    kept)."""
    names = list(ops)
    key = (device, floor, _shape(ops, fixed, transposed))
    found = _RECENT.get(key)
    if found is None:
        found = []
        routes = _Routes(device, ops)
        for phases in STRATEGIES:
            moved, busiest = _search(device, ops, floor, fixed, transposed, phases, routes)
            moves = tuple((names.index(n), op.loc, op.transpose) for n, op in moved.items())
            if moves and moves not in found:
                found.append(moves)
            if busiest <= floor:
                break       # no link sets the pace any more: another strategy cannot do better on links
        _RECENT[key] = found
        if len(_RECENT) > RECENT:
            _RECENT.popitem(last=False)
    _RECENT.move_to_end(key)
    return [{names[k]: dataclasses.replace(ops[names[k]], loc=loc, transpose=flip) for k, loc, flip in moves}
            for moves in found]


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
            transposed: frozenset, phases: tuple, routes: _Routes | None = None) -> tuple[dict[str, MovingOp], float]:
    """The ops the search moves (module docstring), at their new locations, and the busiest link's bytes then:
    per phase (the kinds of move it adds, `_moves`) moves taken until none gains; a phase with a kind of `TURNS`
    first turns the whole epoch (where the user placed none of its ops)."""
    links = _Links(routes or _Routes(device, ops), ops, floor)
    for kinds in phases:
        tried = 0
        turns = [k for k in kinds if k in TURNS]
        if turns and not fixed & set(ops):
            links.apply(_turned(device, links.ops, *TURNS[turns[0]]))
        for _ in range(ROUNDS):
            most, link = links.busiest()
            if most <= floor:
                break
            current = links.score(np.zeros(0))
            best, best_score = None, current
            seen: set = set()       # a swap or a region reached from several of its ops is scored once
            for name in links.through(link):
                if name in fixed:
                    continue
                for move in _moves(device, name, links.ops, fixed, transposed, kinds):
                    key = tuple((n, op.loc, op.transpose) for n, op in move.items())
                    if len(move) > 1 and key in seen:
                        continue
                    seen.add(key)
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
    moved = {n: op for n, op in links.ops.items() if (op.loc, op.transpose) != (ops[n].loc, ops[n].transpose)}
    return moved, links.busiest()[0]


def _footprint(op: MovingOp) -> tuple[int, int]:
    rows, cols = op.geometry.grid
    return (cols, rows) if op.transpose else (rows, cols)


def _moves(device: DeviceSpec, name: str, ops: dict[str, MovingOp], fixed: frozenset,
           transposed: frozenset, kinds: tuple = ()) -> Iterator[Move]:
    """Every move of op `name`: to each free window of its footprint (row-major, as placed first, then the other
    orientation where the user did not fix it), then swapped with each op of the same footprint (epoch order),
    then of `kinds`: "blocks", swapped with each block of smaller ops filling a window of its footprint
    (`_block_swaps`); "regions", each square region holding it turned (`_turned_regions`)."""
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
    if "blocks" in kinds:
        yield from _block_swaps(device, name, ops, fixed)
    if "regions" in kinds:
        yield from _turned_regions(device, name, ops, fixed, transposed)


def _turned(device: DeviceSpec, ops: dict[str, MovingOp], rows: bool, cols: bool) -> Move:
    """Every op mirrored top to bottom (`rows`) and/or left to right (`cols`) about the grid's centre (its
    footprint stays)."""
    def corner(o: MovingOp) -> tuple[int, int]:
        (r, c), (h, w) = o.loc, _footprint(o)
        return (device.grid_rows - r - h if rows else r, device.grid_cols - c - w if cols else c)
    return {n: dataclasses.replace(o, loc=corner(o)) for n, o in ops.items()}


def _block_swaps(device: DeviceSpec, name: str, ops: dict[str, MovingOp], fixed: frozenset) -> Iterator[Move]:
    """Op `name` swapped with every block of smaller ops (and free cores) that fills a window of its footprint
    apart from its own: the op moves into the window, the block keeps its layout at the op's place (row-major)."""
    op = ops[name]
    (r0, c0), (h, w) = op.loc, _footprint(op)
    rects = _rects(ops)
    for r in range(device.grid_rows - h + 1):
        for c in range(device.grid_cols - w + 1):
            if r < r0 + h and r0 < r + h and c < c0 + w and c0 < c + w:
                continue        # overlaps the op's own window
            block = _window_ops(rects, fixed, r, c, h, w)
            if block and len(block) > 1 or block and _footprint(next(iter(block.values()))) != (h, w):
                move = {n: dataclasses.replace(o, loc=(o.loc[0] - r + r0, o.loc[1] - c + c0)) for n, o in block.items()}
                move[name] = dataclasses.replace(op, loc=(r, c))
                yield move


def _turned_regions(device: DeviceSpec, name: str, ops: dict[str, MovingOp], fixed: frozenset,
                    transposed: frozenset) -> Iterator[Move]:
    """Every square region of the grid holding op `name` and only whole ops the user did not place, turned:
    transposed about its diagonal where every op inside may turn (each op turns and sits at its mirrored offset: a
    column of cores fed from above becomes a row, each core fed down its own column), and mirrored top to bottom
    and left to right (no op turns)."""
    op = ops[name]
    r0, c0 = op.loc
    h0, w0 = _footprint(op)
    rects = _rects(ops)
    for size in range(max(2, h0, w0), min(device.grid_rows, device.grid_cols) + 1):
        for top in range(max(0, r0 + h0 - size), min(r0, device.grid_rows - size) + 1):
            for left in range(max(0, c0 + w0 - size), min(c0, device.grid_cols - size) + 1):
                inside = _window_ops(rects, fixed, top, left, size, size)
                if not inside or len(inside) < 2:
                    continue
                shapes = {n: _footprint(o) for n, o in inside.items()}
                oblong = {n for n, (h, w) in shapes.items() if h != w}    # the ops a transposition turns
                if oblong and not oblong & transposed:
                    yield {n: dataclasses.replace(o, loc=(top + o.loc[1] - left, left + o.loc[0] - top),
                                                  transpose=o.transpose != (n in oblong)) for n, o in inside.items()}
                yield {n: dataclasses.replace(o, loc=(2 * top + size - o.loc[0] - shapes[n][0], o.loc[1]))
                       for n, o in inside.items()}
                yield {n: dataclasses.replace(o, loc=(o.loc[0], 2 * left + size - o.loc[1] - shapes[n][1]))
                       for n, o in inside.items()}


def _rects(ops: dict[str, MovingOp]) -> list[tuple]:
    """Per op (name, op, top row, left column, height, width) of its footprint where it sits."""
    return [(name, o, *o.loc, *_footprint(o)) for name, o in ops.items()]


def _window_ops(rects: list[tuple], fixed: frozenset, top: int, left: int, height: int,
                width: int) -> dict[str, MovingOp] | None:
    """The ops (`_rects`) in a window of the grid, None where one lies across its edge or was placed by the
    user."""
    inside = {}
    bottom, right = top + height, left + width
    for other, o, r, c, h, w in rects:
        if r + h <= top or r >= bottom or c + w <= left or c >= right:
            continue
        if other in fixed or not (top <= r and r + h <= bottom and left <= c and c + w <= right):
            return None
        inside[other] = o
    return inside


LEGS_KEPT = 1 << 17     # leg routes kept per device at most (the cache starts again beyond)


class _Ids(NamedTuple):
    """A device's link numbering (ids in the order links were first seen: indices only, no result reads them) and
    the ids of the links each leg route loads (`pybuda.arch.movement.leg_links`), shared by every epoch's search."""

    ids: dict
    links: list
    legs: dict

    def of_leg(self, device: DeviceSpec, route: tuple) -> tuple[int, ...]:
        """The ids of the links `route` loads, numbering links seen for the first time."""
        leg = self.legs.get(route)
        if leg is None:
            if len(self.legs) >= LEGS_KEPT:
                self.legs.clear()
            links = leg_links(device, route)
            for link in links:
                if link not in self.ids:
                    self.ids[link] = len(self.links)
                    self.links.append(link)
            leg = self.legs[route] = tuple(self.ids[link] for link in links)
        return leg


_IDS: dict[DeviceSpec, _Ids] = {}


class _Routes:
    """An epoch's pipes and their routes (`pybuda.arch.movement.pipe_legs`) as arrays over the device's link ids,
    each pipe's kept per placement of its ends: shared by the searches of one epoch."""

    def __init__(self, device: DeviceSpec, ops: dict[str, MovingOp]):
        self.device = device
        self.pipes = epoch_pipes(list(ops.values()))
        self.queues = {q.name: q for o in ops.values()
                       for q in (*o.writes, *(i.queue for i in o.inputs if i.queue is not None))}
        self._device_ids = _IDS.setdefault(device, _Ids({}, [], {}))
        self.ids, self.links = self._device_ids.ids, self._device_ids.links
        self._memo: dict = {}
        self.ends = [sorted(({pipe.consumer} | pipe.producers) & set(ops)) for pipe in self.pipes]
        self.touching: dict[str, list[int]] = {}
        for k, names in enumerate(self.ends):
            for name in names:
                self.touching.setdefault(name, []).append(k)

    def routed(self, k: int, ops: dict[str, MovingOp]) -> tuple[np.ndarray, np.ndarray]:
        """Pipe k's (link ids, bytes per input) with its ends where `ops` puts them: per leg (`pipe_legs`) its
        links' ids, a link that two legs load listed twice."""
        key = (k, *[(ops[n].loc, ops[n].transpose) for n in self.ends[k]])
        routed = self._memo.get(key)
        if routed is None:
            ids: list = []
            loads: list = []
            for route, nbytes in pipe_legs(self.device, self.pipes[k], ops, self.queues):
                leg = self._device_ids.of_leg(self.device, route)
                ids += leg
                loads += [nbytes] * len(leg)
            routed = self._memo[key] = (np.array(ids, dtype=np.int64), np.array(loads, dtype=float))
        return routed


class _Links:
    """An epoch's routed link loads (bytes per input) kept per pipe (`_Routes`), so that a move re-routes only the
    pipes that touch the ops it moves and is scored on the whole epoch at once: (the busiest link's bytes, the
    bytes all links carry beyond `floor`)."""

    def __init__(self, routes: _Routes, ops: dict[str, MovingOp], floor: float):
        self.routes, self.ops, self.floor = routes, dict(ops), floor
        self.loads = [routes.routed(k, self.ops) for k in range(len(routes.pipes))]
        self.totals = self._sum(self.loads)

    def _sum(self, loads: list[tuple[np.ndarray, np.ndarray]]) -> np.ndarray:
        """Bytes per link id of `loads` (signed), over every link seen so far."""
        if not loads:
            return np.zeros(len(self.routes.links))
        return np.bincount(np.concatenate([ids for ids, _ in loads]), np.concatenate([b for _, b in loads]),
                           minlength=len(self.routes.links))

    def busiest(self) -> tuple[float, tuple | None]:
        """(bytes per input, link) of the busiest link (ties: the first in repr order)."""
        if not len(self.totals):
            return 0.0, None
        most = self.totals.max()
        return float(most), min((self.routes.links[i] for i in np.flatnonzero(self.totals == most)), key=repr)

    def through(self, link: tuple) -> list[str]:
        """The ops whose pipes load `link`, in epoch order."""
        lid = self.routes.ids[link]
        names = {n for k, (ids, _) in enumerate(self.loads) if (ids == lid).any() for n in self.routes.ends[k]}
        return [n for n in self.ops if n in names]

    def rerouted(self, move: Move) -> tuple[np.ndarray, list[tuple[int, tuple]]]:
        """(the change of each link's bytes `move` makes, the new loads of the pipes it re-routes)."""
        ops = {**self.ops, **move}
        touching = self.routes.touching
        new = [(k, self.routes.routed(k, ops)) for k in sorted({k for name in move for k in touching.get(name, ())})]
        changes = [(self.loads[k][0], -self.loads[k][1]) for k, _ in new] + [loads for _, loads in new]
        return self._sum(changes), new

    def _after(self, delta: np.ndarray) -> np.ndarray:
        """Every link's bytes changed by `delta` (links first seen in `delta` start at zero)."""
        if len(delta) == len(self.totals):
            return self.totals + delta
        size = max(len(self.totals), len(delta))
        return np.pad(self.totals, (0, size - len(self.totals))) + np.pad(delta, (0, size - len(delta)))

    def score(self, delta: np.ndarray) -> tuple[float, float]:
        """(the busiest link's bytes, the bytes beyond the floor) with each link changed by `delta`."""
        after = self._after(delta)
        return float(after.max(initial=0.0)), float(np.maximum(after - self.floor, 0.0).sum())

    def apply(self, move: Move) -> None:
        """Make `move`."""
        delta, new = self.rerouted(move)
        self.totals = self._after(delta)
        for k, loads in new:
            self.loads[k] = loads
        self.ops.update(move)
