"""Multi-chip placement: `set_chip_break` on n300 places the ops from the break on the PCIe chip and those before
it on the other chip, their queues in their chip's DRAM; the epochs on the two chips run as one temporal epoch,
which the balancer and the simulator cost alike; an impossible break names the device's chips."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import pybuda
from pybuda.arch.perf import OpLoad, Transfer, epoch_timing, temporal_epochs
from pybuda.backend_sim import estimate
from pybuda.balancer import BalancerError
from pybuda.device import get_device
from pybuda.verify import pcc

from models import MLP, torch_mlp


def _compile(tmp_path, device: str = "n300", name: str = "out"):
    model, x = MLP(d_in=256, hidden=256), torch.randn(2, 64, 256)
    compiled = pybuda.compile(model, x, device=device, output_dir=tmp_path / name)
    out, expected = compiled(x).numpy(), torch_mlp(model, x).numpy()
    assert pcc(out, expected) >= 0.99 and np.allclose(out, expected, atol=0.02)
    return compiled


def test_chip_break_puts_the_ops_before_it_on_the_other_chip(tmp_path):
    single = _compile(tmp_path, name="single")
    assert {g.target_device for g in single.netlist.graphs.values()} == {0}
    pybuda.set_chip_break("mm2")
    compiled = _compile(tmp_path)
    nl, placement = compiled.netlist, compiled.placement
    chip_of = {op: g.target_device for g in nl.graphs.values() for op in g.ops}
    assert chip_of["mm1"] == 1 and chip_of["mm2"] == 0
    assert len(nl.graphs) == 2 and placement.temporal == ((0, 1),)      # the two chips run at once
    writer_chip = {q.name: chip_of[q.input] for q in nl.queues.values() if q.input in chip_of}
    assert writer_chip and all(nl.queues[q].target_device == chip for q, chip in writer_chip.items())
    assert nl.queues["x"].target_device == 1                             # the host input sits with its reader
    report = estimate(compiled.netlist_path, "n300")
    assert report.total_cycles == placement.estimated_cycles              # the balancer optimises what it reports
    (epoch,) = report.epochs
    assert epoch.graph == "+".join(nl.graphs) and epoch.executions == 1
    mm2 = next(o for o in epoch.ops if o.name == "mm2")
    assert mm2.terms["ethernet"] > 0 and mm2.device == 0                  # it reads chip 1's queue over ethernet
    assert placement.lower_bound_cycles <= placement.estimated_cycles


def test_the_same_netlist_on_one_chip_runs_its_epochs_one_after_the_other(tmp_path):
    pybuda.set_chip_break("mm2")
    compiled = _compile(tmp_path)
    text = compiled.netlist_path.read_text().replace("target_device: 1", "target_device: 0")
    one_chip = tmp_path / "one_chip.yaml"
    one_chip.write_text(text)
    report = estimate(one_chip, "n300")
    assert len(report.epochs) == 2 and report.epoch_switches == 1
    assert all("ethernet" not in o.terms for o in report.ops)


def test_chip_break_on_a_single_chip_device_says_which_devices_have_chips(tmp_path):
    pybuda.set_chip_break("mm2")
    with pytest.raises(BalancerError, match=r"set_chip_break\('mm2'\): device n150 has one chip.*n300"):
        _compile(tmp_path, device="n150")


def test_more_chip_breaks_than_chips_names_them(tmp_path):
    pybuda.set_chip_break("bias1")
    pybuda.set_chip_break("mm2")
    with pytest.raises(BalancerError, match=r"2 chip breaks \('bias1', 'mm2'\) need 3 chips; device n300 has 2"):
        _compile(tmp_path)


def test_a_queue_pinned_to_its_own_chip_takes_the_channel(tmp_path):
    pybuda.set_chip_break("mm2")
    base = _compile(tmp_path, name="base")
    queue = next(q for q in base.netlist.queues.values() if q.name.startswith("e2e_"))
    assert queue.target_device == 1
    pybuda.config.override_dram_queue_placement(queue.name, chip_id=1, channel=4)
    pinned = _compile(tmp_path).netlist.queues[queue.name]
    assert pinned.target_device == 1 and {ch for ch, _ in pinned.allocations} == {4}
    pybuda.config.override_dram_queue_placement(queue.name, chip_id=0, channel=4)
    with pytest.raises(BalancerError, match=rf"{queue.name}', chip_id=0\): the queue sits on chip 1.*legal chip_id: 1"):
        _compile(tmp_path, name="wrong")


def test_temporal_epochs_merge_consecutive_graphs_on_disjoint_chips_on_wormhole_only():
    chips = [frozenset({0}), frozenset({0}), frozenset({1}), frozenset({0}), frozenset({0, 1}), frozenset({1})]
    assert temporal_epochs("wormhole_b0", chips) == [[0], [1, 2], [3], [4], [5]]
    assert temporal_epochs("grayskull", chips) == [[k] for k in range(len(chips))]


def test_remote_transfers_share_the_chip_links():
    n300 = get_device("n300")
    remote = OpLoad("b", cores=4, kernel_cycles=10, reads=(Transfer(1000.0, "dram", channels=(6,), remote=True),))
    local = OpLoad("a", cores=2, kernel_cycles=10, reads=(Transfer(1000.0, "dram", channels=(0,)),))
    timing = epoch_timing(n300, [local, remote], 1)
    by_name = {o.name: o for o in timing.ops}
    assert by_name["b"].terms["ethernet"] == pytest.approx(4 * 1000 / (2 * 12.5))   # two links of 12.5 B/cycle
    assert "ethernet" not in by_name["a"].terms
    assert "ethernet" not in epoch_timing(get_device("e150"), [remote], 1).ops[0].terms   # no chip links modelled


def test_chip_id_puts_an_ops_part_of_the_schedule_on_that_chip(tmp_path):
    """With the outputs in device DRAM, the part after the break may leave the PCIe chip: pinning mm1's part to
    chip 0 sends mm2's to chip 1, the reverse of the default order."""
    pybuda.set_configuration_options(output_queues_on_host=False)
    pybuda.set_chip_break("mm2")
    pybuda.override_op_placement("mm1", chip_id=0)
    compiled = _compile(tmp_path)
    chip_of = {op: g.target_device for g in compiled.netlist.graphs.values() for op in g.ops}
    assert chip_of["mm1"] == 0 and chip_of["mm2"] == 1


@pytest.mark.parametrize("chip_break, pins, message", [
    (True, {"mm1": 1, "bias1": 0}, r"'mm1' \(chip_id=1\) and 'bias1' \(chip_id=0\) are in one part"),
    (True, {"mm1": 0, "mm2": 0}, r"'mm1' and 'mm2' \(chip_id=0\) are in different parts"),
    (False, {"mm1": 2}, r"chip_id=2\): device n300 has chips 0..1"),
])
def test_chip_id_pins_that_cannot_hold_are_refused_naming_the_ops(tmp_path, chip_break, pins, message):
    if chip_break:
        pybuda.set_chip_break("mm2")
    for op, chip in pins.items():
        pybuda.override_op_placement(op, chip_id=chip)
    with pytest.raises(BalancerError, match=message):
        _compile(tmp_path)
