"""The receive floor (`pybuda.arch.movement.receive_floor`): what one core of an op needs at least to receive
its inputs through its two NIUs, wherever the op and its producers sit. The balancer's context costs count it
(`PlanCoster.context_cost`), so it must stay below what the placed plan's NoC model charges every op."""
from __future__ import annotations

import pytest

import pybuda.balancer.planner as planner
from pybuda.tools.zoo import compile_zoo_model


def _floors(model: str, device: str, microbatch: int, monkeypatch) -> list[tuple[str, float, float, int]]:
    """(op, receive floor, the placed plan's noc_link term, kernel cycles) of every op of a zoo model's plan."""
    costers = []
    bounds = planner.bounds

    def spy(table, *args):
        costers.append(table.coster)
        return bounds(table, *args)

    monkeypatch.setattr(planner, "bounds", spy)
    placement = compile_zoo_model(model, device, microbatch).placement
    coster, = costers
    rows = []
    for timing in placement.epoch_timings:
        for op in timing.ops:
            chosen = placement.models[op.name]
            load = coster.op_load(op.name, chosen, {op.name: 0}, {q: True for q in chosen.prologue}, False,
                                  spread=True)
            floor = coster.receive_cycles(load, chosen)
            rows.append((op.name, floor, op.terms.get("noc_link", 0.0), op.kernel_cycles))
    return rows


@pytest.mark.parametrize("model,device,microbatch,binds", [("mobilenetv2_tiny", "n150", 4, False),
                                                          ("mobilenetv1", "e150", 64, True)])
def test_receive_floor_is_below_what_the_placed_plan_charges(model, device, microbatch, binds, monkeypatch):
    """No op's placed NoC term is below its floor; on MobileNetV1 (depthwise convolutions: a sparse matmul's
    nine taps, and the activation it picks them from multicast down its grid columns) the floor is above the
    kernel somewhere (it is what the balancer counts for that op)."""
    rows = _floors(model, device, microbatch, monkeypatch)
    assert [r for r in rows if r[1] > r[2] * (1 + 1e-9)] == []
    if binds:
        assert any(floor > kernel for _, floor, _, kernel in rows)
