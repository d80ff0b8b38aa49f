"""Kernel broadcast (data-movement.md §2.6): a constant or parameter an eltwise op reads through a broadcast is
received once per core (its repeating tiles) and reused by the kernel, as the legacy compiler writes it
(`kernel_broadcast: {input_N: tiles}`), instead of every repeat being streamed; the period is that of each core's
post-TM tile stream (`pybuda.arch.tilemap.broadcast_period`), and the validator refuses one that does not repeat."""
from __future__ import annotations

import dataclasses
import sys

import torch

import pybuda
from pybuda.arch.tilemap import broadcast_period, stream_repeats
from pybuda.netlist import check
from pybuda.verify import pcc


def test_the_period_is_one_tile_for_a_scalar_and_whole_ublocks_otherwise():
    # a 1x2-tile bias broadcast over 392 rows, 4 t slices: a 2x2 ublock repeats it (the legacy ResNet-50 netlist)
    assert broadcast_period((1, 1, 2), (("broadcast", "r", 392), ("vslice", 4)), None, None, (1, 1), 4, (49, 1),
                            (2, 2)) == 4
    # one tile everywhere: period 1 whatever the ublock
    assert broadcast_period((1, 1, 1), (("broadcast", "r", 392), ("vslice", 28)), None, None, (2, 1), 28, (1, 1),
                            (7, 1)) == 1
    # a column vector broadcast along columns repeats within each ublock row pair
    assert broadcast_period((1, 4, 1), (("broadcast", "c", 8),), None, None, (2, 2), 1, (1, 2), (2, 2)) == 4
    # a full tensor without a broadcast, and a broadcast whose stream repeats only as a whole, get none
    assert broadcast_period((1, 4, 4), (), None, None, (1, 1), 1, (2, 2), (2, 2)) == 0
    assert broadcast_period((1, 4, 1), (("broadcast", "c", 2),), None, None, (1, 1), 1, (1, 1), (4, 2)) == 0


def test_a_period_that_does_not_repeat_is_refused_and_a_shape_not_the_ops_is_unknown():
    tms = (("broadcast", "r", 392), ("vslice", 4))
    assert stream_repeats((1, 1, 2), tms, None, None, (1, 1), 4, (49, 1), (2, 2), 4)
    assert stream_repeats((1, 1, 2), tms, None, None, (1, 1), 4, (49, 1), (2, 2), 1) is False
    assert stream_repeats((1, 1, 2), tms, None, None, (1, 1), 2, (49, 1), (2, 2), 4) is None


class ChannelAffineHardswish(torch.nn.Module):
    """A per-channel scale and shift and a hardswish on an image: the scale and shift are rows of tiles broadcast
    over every row of the (spatial, channel) activation, the hardswish's constants single tiles broadcast over all
    of it."""

    def __init__(self, channels: int = 32):
        super().__init__()
        self.scale = torch.nn.Parameter(torch.rand(channels, 1, 1) + 0.5)
        self.shift = torch.nn.Parameter(torch.randn(channels, 1, 1))
        self.act = torch.nn.Hardswish()

    def forward(self, x):
        return self.act(x * self.scale + self.shift)


def _compile(tmp_path, x, model):
    """Compiled on e150 with the fused op on two cores (a busy epoch's choice): each core streams 392 rows of
    every broadcast constant per input unless the kernel reuses its one tile."""
    config = pybuda.CompilerConfig(default_df_override="Float16_b")
    config.balancer_op_override("_fused_op_0", "grid_shape", (2, 1))
    with torch.no_grad():
        return pybuda.compile(model, x, device="e150", config=config, output_dir=tmp_path)


def test_broadcast_constants_are_kernel_broadcast_prologued_and_cheaper(tmp_path, monkeypatch):
    torch.manual_seed(0)
    model, x = ChannelAffineHardswish(16).eval(), torch.randn(8, 16, 112, 112)
    compiled = _compile(tmp_path / "kb", x, model)
    nl = compiled.netlist
    broadcast = [(op, i, kb) for g in nl.graphs.values() for op in g.ops.values()
                 for i, kb in (op.attrs.kernel_broadcast or {}).items()]
    assert broadcast, "no input kernel-broadcast"
    for op, i, kb in broadcast:
        assert op.inputs[i] in nl.queues and compiled.placement.prologue.get(op.inputs[i]), (op.name, i)
        assert any(tm[0] == "broadcast" for tm in op.tms(i)) and 0 < kb < op.t * op.mblock[0] * op.mblock[1] * \
            op.ublock[0] * op.ublock[1]
    assert check(nl) == []
    with torch.no_grad():
        expected = model(x).numpy()
    assert pcc(compiled(x).numpy(), expected) >= 0.99
    # the same plan search without kernel broadcast streams every repeat of those tiles
    op_model = sys.modules["pybuda.balancer.op_model"]
    monkeypatch.setattr(op_model, "kernel_broadcast", lambda graph, name, model: {})
    plain = _compile(tmp_path / "plain", x, model)
    assert not any(op.attrs.kernel_broadcast for g in plain.netlist.graphs.values() for op in g.ops.values())
    assert compiled.placement.estimated_cycles < plain.placement.estimated_cycles


def test_the_validator_refuses_a_kernel_broadcast_that_does_not_repeat(tmp_path):
    torch.manual_seed(0)
    compiled = _compile(tmp_path, torch.randn(8, 16, 112, 112), ChannelAffineHardswish(16).eval())
    nl = compiled.netlist
    op, index = next((op, i) for g in nl.graphs.values() for op in g.ops.values()
                     for i in (op.attrs.kernel_broadcast or {}))
    # a period of every tile the core reads but the last: the stream does not repeat with it
    whole = op.t * op.mblock[0] * op.mblock[1] * op.ublock[0] * op.ublock[1]
    op.attributes = dataclasses.replace(op.attrs, kernel_broadcast={**op.attrs.kernel_broadcast, index: whole - 1})
    assert "attr.kernel_broadcast_period" in {v.rule for v in check(nl)}
