"""Moves against NoC link congestion once an epoch is placed (`pybuda.balancer.link_relief`): a depthwise-separable
CNN whose solver placement routes several pipes over one link gets ops moved off it, the move lowers the epoch's
busiest link and its exact cost, and the netlist written is the moved plan; ops the user placed stay."""
from __future__ import annotations

import torch

import pybuda
from pybuda.arch.movement import epoch_pipes, link_loads
from pybuda.backend_sim import estimate
from pybuda.balancer import background, plan


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
