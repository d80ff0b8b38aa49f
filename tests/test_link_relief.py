"""Moves against NoC link congestion once an epoch is placed (`pybuda.balancer.link_relief`): a depthwise-separable
CNN whose solver placement routes several pipes over one link gets ops moved off it, the move lowers the epoch's
busiest link and its exact cost, and the netlist written is the moved plan; ops the user placed stay. An epoch
with no free core turns a square region (transposed: an op fed down one grid column becomes a row; or mirrored)."""
from __future__ import annotations

import torch

import pybuda
from pybuda.arch.movement import MovingInput, MovingOp, epoch_pipes, link_loads
from pybuda.arch.operands import OpGeometry
from pybuda.backend_sim import estimate
from pybuda.balancer import background, link_relief, plan
from pybuda.device import get_device
from pybuda.netlist.model import Attributes


def _separable_cnn() -> torch.nn.Module:
    """MobileNetV1's stem and two depthwise-separable blocks (random weights)."""
    def block(cin: int, cout: int, stride: int) -> list:
        return [torch.nn.Conv2d(cin, cin, 3, stride, 1, groups=cin), torch.nn.ReLU(), torch.nn.Conv2d(cin, cout, 1),
                torch.nn.ReLU()]
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 32, 3, 2, 1), torch.nn.ReLU(), *block(32, 64, 1),
                               *block(64, 128, 2)).eval()


def _compile(tmp_path, monkeypatch):
    """The compiled CNN on n150 and every `relieve_links` call of the planner and the greedy policy (run in a
    thread here, not a forked process, so that its calls are seen): (its arguments, its result)."""
    calls = []
    monkeypatch.delattr(background.os, "fork", raising=False)
    relieve = plan.relieve_links

    def record(*args):
        moved = relieve(*args)
        calls.append((args, moved))
        return moved
    monkeypatch.setattr(plan, "relieve_links", record)
    pybuda.set_configuration_options(enable_conv_prestride=False)    # the stem whose placement shares a link
    compiled = pybuda.compile(_separable_cnn(), torch.randn(16, 3, 64, 64), device="n150", output_dir=tmp_path)
    return compiled, calls


def _epoch(coster, schedule, models, placed, prologue, dram, epoch: int):
    """(busiest link's bytes per input, exact timing) of one epoch of a plan."""
    epoch_of = {n: p.epoch for n, p in placed.items()}
    by_epoch, _, temporal = coster.grouped(schedule, epoch_of)
    loads = coster.epoch_loads(by_epoch[epoch], models, epoch_of, prologue, dram, temporal, placed)
    ops = [load.moving for load in loads]
    totals, _ = link_loads(coster.device, ops, epoch_pipes(ops))
    return max(totals.values()), coster.epoch_timing(loads)


def test_ops_sharing_a_busy_link_move_off_it_and_the_netlist_is_the_moved_plan(tmp_path, monkeypatch):
    compiled, calls = _compile(tmp_path, monkeypatch)
    kept = compiled.placement
    (coster, schedule, models, placed, prologue, dram, _, _), moved = next(
        call for call in calls if call[1] == kept.placed)
    names = [n for n in placed if placed[n] != moved[n]]
    assert names, "the solver's placement of the stem should share a link the relief moves an op off"
    epoch = placed[names[0]].epoch
    link_before, before = _epoch(coster, schedule, models, placed, prologue, dram, epoch)
    link_after, after = _epoch(coster, schedule, models, moved, prologue, dram, epoch)
    assert link_after < link_before and after.epoch_cycles < before.epoch_cycles
    for e in {p.epoch for p in moved.values()}:     # the moved ops stay inside the grid, no two overlapping
        cores = [(p.loc[0] + r, p.loc[1] + c) for n, p in moved.items() if p.epoch == e
                 for r in range(models[n].grid[1] if p.transpose else models[n].grid[0])
                 for c in range(models[n].grid[0] if p.transpose else models[n].grid[1])]
        assert len(cores) == len(set(cores))
        assert all(0 <= r < coster.device.grid_rows and 0 <= c < coster.device.grid_cols for r, c in cores)
    # the netlist written has the moved locations, and the simulator's estimate of it is the planner's
    ops = {name: op for g in compiled.netlist.graphs.values() for name, op in g.ops.items()}
    assert all(ops[n].grid_loc == moved[n].loc for n in names)
    assert estimate(compiled.netlist).total_cycles == kept.estimated_cycles


def test_an_op_the_user_placed_is_not_moved(tmp_path, monkeypatch):
    _, calls = _compile(tmp_path / "free", monkeypatch)
    (_, _, _, placed, *_), moved = calls[-1]
    name = next(n for n in placed if placed[n] != moved[n])
    pybuda.override_op_placement(name, start=placed[name].loc, transpose_op=placed[name].transpose)
    compiled, _ = _compile(tmp_path / "pinned", monkeypatch)
    assert compiled.placement.placed[name].loc == placed[name].loc


def _full_epoch_with_a_shared_column():
    """An n150 epoch with no free core: a (2, 1) op `c` reads a (2, 1) op `p` core by core, both its pipes come
    down grid column 3 on NOC0 and share the links above `c`; (1, 1) ops fill every other core."""
    device = get_device("n150")

    def op(name, grid, loc, inputs=()):
        return MovingOp(name, OpGeometry("datacopy", grid, 1, (4, 4), (1, 1), Attributes()), inputs, loc=loc)
    ops = {"p": op("p", (2, 1), (0, 0)), "c": op("c", (2, 1), (5, 3), (MovingInput("p"),))}
    taken = {(0, 0), (1, 0), (5, 3), (6, 3)}
    free = [(r, c) for r in range(device.grid_rows) for c in range(device.grid_cols) if (r, c) not in taken]
    ops.update((f"f{k}", op(f"f{k}", (1, 1), loc)) for k, loc in enumerate(free))
    return device, ops


def _busiest(device, ops) -> float:
    totals, _ = link_loads(device, list(ops.values()), epoch_pipes(list(ops.values())))
    return max(totals.values())


def test_the_searchs_routes_load_each_link_as_the_cost_model_does():
    """The search routes pipes leg by leg over the device's link ids (`_Routes`); every link's bytes agree with
    `link_loads`, before and after moves (whatever epochs were searched before)."""
    device, ops = _full_epoch_with_a_shared_column()
    for layout in (ops, {**ops, **link_relief._turned(device, ops, True, False)},
                   {**ops, **next(link_relief._block_swaps(device, "c", ops, frozenset()))}):
        links = link_relief._Links(link_relief._Routes(device, layout), layout, 0.0)
        expected, _ = link_loads(device, list(layout.values()), epoch_pipes(list(layout.values())))
        searched = {links.routes.links[i]: b for i, b in enumerate(links.totals) if b}
        assert searched.keys() == expected.keys()
        assert all(abs(searched[link] - b) <= 1e-9 * b for link, b in expected.items())
        assert links.busiest()[0] == _busiest(device, layout)


def test_an_epoch_with_no_free_core_turns_a_region_off_a_shared_column():
    device, ops = _full_epoch_with_a_shared_column()
    before = _busiest(device, ops)
    assert link_relief._search(device, ops, 0.0, frozenset(), frozenset(), ((),)) == ({}, before), \
        "single moves have no free window and no op of c's footprint to swap with"
    for phases in link_relief.STRATEGIES:
        moved, busiest = link_relief._search(device, ops, 0.0, frozenset(), frozenset(), phases)
        assert moved and _busiest(device, {**ops, **moved}) == busiest == before / 2   # one pipe per link
    turns = list(link_relief._turned_regions(device, "c", ops, frozenset(), frozenset()))
    assert any(m["c"].transpose and _busiest(device, {**ops, **m}) == before / 2 for m in turns), \
        "c turned into a row takes its two pipes down two columns"
    assert any(not m["c"].transpose and m["c"].loc[0] < 5 and _busiest(device, {**ops, **m}) == before / 2
               for m in turns), "c mirrored up to p's rows takes each pipe along its own row"


def _assert_fills_the_grid(device, layout: dict) -> None:
    """Every op of `layout` inside the grid, no two on one core, every core taken."""
    cores = [(o.loc[0] + r, o.loc[1] + c) for o in layout.values()
             for r in range(o.geometry.grid[o.transpose]) for c in range(o.geometry.grid[not o.transpose])]
    assert len(cores) == len(set(cores)) == device.cores
    assert all(0 <= r < device.grid_rows and 0 <= c < device.grid_cols for r, c in cores)


def test_a_turned_region_keeps_whole_ops_inside_the_grid_and_the_users_constraints():
    device, ops = _full_epoch_with_a_shared_column()
    below = next(n for n, o in ops.items() if o.loc == (7, 3))
    fixed, transposed = frozenset({below}), frozenset({"p"})
    free = list(link_relief._turned_regions(device, "c", ops, frozenset(), frozenset()))
    moves = list(link_relief._turned_regions(device, "c", ops, fixed, transposed))
    assert any(below in move for move in free) and any("p" in move for move in free) and moves
    for move in moves:
        _assert_fills_the_grid(device, {**ops, **move})
        assert below not in move and ("p" not in move or not move["p"].transpose)   # p may move, not turn


def test_an_op_swaps_with_a_block_of_smaller_ops_that_fills_its_footprint():
    device, ops = _full_epoch_with_a_shared_column()
    before = _busiest(device, ops)
    below = next(n for n, o in ops.items() if o.loc == (7, 3))
    blocks = list(link_relief._block_swaps(device, "c", ops, frozenset({below})))
    assert blocks and all(len(move) == 3 and below not in move for move in blocks)   # c and two (1, 1) ops
    for move in blocks:
        _assert_fills_the_grid(device, {**ops, **move})
        assert {o.loc for n, o in move.items() if n != "c"} == {(5, 3), (6, 3)}   # the block takes c's place
    assert any(_busiest(device, {**ops, **m}) == before / 2 for m in blocks), "c beside p: one pipe per link"
    moved, busiest = link_relief._search(device, ops, 0.0, frozenset(), frozenset(), (("blocks",),))
    assert moved and busiest == before / 2   # c beside p, or p moved beside c


def test_a_whole_epoch_turned_as_a_start_keeps_every_footprint_inside_the_grid():
    device, ops = _full_epoch_with_a_shared_column()
    for rows, cols in link_relief.TURNS.values():
        turned = link_relief._turned(device, ops, rows, cols)
        _assert_fills_the_grid(device, turned)
        assert turned["c"].loc == ((device.grid_rows - 7) if rows else 5, (device.grid_cols - 4) if cols else 3)
