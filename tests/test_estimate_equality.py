"""The balancer optimises the number the simulator reports: for every fast-tier zoo model, on both archs and at
several microbatches, the balancer's estimated cycles for the plan it chose equal the simulator's estimate of the
netlist written from that plan, in total and per epoch (one backend model, pybuda.arch, below both)."""
import pytest
import torch

import pybuda
from pybuda.tools.zoo import ZOO

FAST_TIER = [name for name, entry in ZOO.items() if not entry.full_size]


@pytest.fixture(scope="module")
def models():
    return {}


@pytest.mark.parametrize("device", ["e150", "n150"])
@pytest.mark.parametrize("name", FAST_TIER)
def test_balancer_estimate_is_the_simulators(name, device, models, tmp_path):
    entry = ZOO[name]
    model = models.setdefault(name, entry.build())
    for microbatch in (1, 2, 4):
        with torch.no_grad():
            compiled = pybuda.compile(model, *entry.inputs(microbatch), device=device, output_dir=tmp_path)
        placement, perf = compiled.placement, compiled.perf
        assert placement.estimated_cycles == perf.total_cycles, (name, device, microbatch)
        assert [e.epoch_cycles for e in placement.epoch_timings] == [e.epoch_cycles for e in perf.epochs]
        assert placement.epochs == len(perf.epochs)
