"""`enable_conv_prestride` (on by default, as in legacy): a strided conv over a model input runs as a stride-1
conv over the input's space-to-depth, made on the host ahead of the device, with the kernel rearranged alike in
consteval: the same outputs, fewer picker taps, a cheaper plan. Off, or on a conv the rule leaves out (not on an
input, dilated), the conv runs as before."""
from __future__ import annotations

import pytest
import torch

import pybuda
from pybuda.verify import pcc


def _compile(tmp_path, model, x, **options):
    compiled = pybuda.compile(model, x, config=pybuda.CompilerConfig(**options), output_dir=tmp_path)
    with torch.no_grad():
        assert pcc(compiled(x).numpy(), model(x).numpy()) >= 0.99
    return compiled


def _prestrided(compiled) -> bool:
    return any(n.op_type == "conv2d_prestride_act" for n in compiled.graphs["decompose"].nodes("op"))


@pytest.mark.parametrize("kernel, stride, padding, size", [(7, 2, 3, 32), (3, 2, 1, 31), (5, 3, 1, 33)],
                         ids=["7x7s2", "3x3s2_odd", "5x5s3"])
def test_a_strided_conv_on_an_input_is_prestrided_on_the_host(tmp_path, kernel, stride, padding, size):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 16, kernel, stride, padding), torch.nn.ReLU())
    x = torch.randn(2, 3, size, size)
    on = _compile(tmp_path / "on", model, x)
    off = _compile(tmp_path / "off", model, x, enable_conv_prestride=False)
    assert _prestrided(on) and not _prestrided(off)
    assert any("prestride" in op for op in on.host_ops) and not off.host_ops
    assert on.placement.estimated_cycles < off.placement.estimated_cycles


def test_convs_the_rule_leaves_out_run_as_before(tmp_path):
    torch.manual_seed(0)
    inner = torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Conv2d(3, 8, 3, 2, 1))           # not on an input
    dilated = torch.nn.Conv2d(3, 8, 3, 2, 2, dilation=2)
    for k, model in enumerate((inner, dilated)):
        assert not _prestrided(_compile(tmp_path / str(k), model, torch.randn(1, 3, 16, 16)))


def test_the_prestrided_positions_pad_to_a_tile_count_with_u_kt_blocks(tmp_path):
    """YOLOv5s's stem (6x6, stride 2, padding 2 over 320 x 320): 162 x 162 prestrided positions are 821 tiles, a
    prime; the host pads them to 825, so the picker's inner dimension splits (u_kt above 1) and the outputs stay
    those of torch."""
    from pybuda.ops.conv import _blockable_tiles
    assert [_blockable_tiles(n) for n in (821, 414, 64, 9)] == [825, 414, 64, 9]
    torch.manual_seed(0)
    model = torch.nn.Conv2d(3, 16, 6, 2, 2)
    compiled = _compile(tmp_path, model, torch.randn(1, 3, 320, 320))
    pickers = [op for g in compiled.netlist.graphs.values() for op in g.ops.values() if op.attributes.identity]
    assert pickers and all(op.attributes.m_k * op.attributes.u_kt == 825 and op.attributes.u_kt > 1
                           for op in pickers)
