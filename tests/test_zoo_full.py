"""Full-size model zoo (`make test-zoo`): every model compiles for e150 and n150, its netlist validates,
and its simulated outputs match PyTorch (PCC >= 0.99 at Float16_b)."""
from __future__ import annotations

import pytest
import torch

import pybuda
from pybuda.netlist import validate
from pybuda.tools.zoo import PUBLISHED_ONLY, ZOO
from pybuda.verify import pcc

FULL = [name for name, entry in ZOO.items() if entry.full_size and name not in PUBLISHED_ONLY]   # rest: test_published


@pytest.mark.zoo
@pytest.mark.parametrize("device", ["e150", "n150"])
@pytest.mark.parametrize("name", FULL)
def test_full_size_model(tmp_path, name, device):
    entry = ZOO[name]
    model, inputs = entry.build(), entry.inputs(1)
    compiled = pybuda.compile(model, *inputs, device=device, output_dir=tmp_path)
    validate(compiled.netlist)
    assert compiled.perf.samples_per_second > 0
    with torch.no_grad():
        expected = model(*inputs)[0].numpy()
    out = compiled(*inputs)
    out = out[0].numpy()   # the same ModelOutput type as the torch model's
    assert pcc(out, expected) >= 0.99


@pytest.mark.zoo
def test_bert_large_384_at_microbatch_128(tmp_path):
    """BERT-Large at sequence 384 and microbatch 128 on e150 (default formats): compiles, its netlist validates,
    and the simulator runs the whole microbatch with outputs that match PyTorch (about 20 minutes)."""
    entry = ZOO["bert_large_384"]
    model, inputs = entry.build(), entry.inputs(128)
    compiled = pybuda.compile(model, *inputs, device="e150", output_dir=tmp_path)
    validate(compiled.netlist)
    assert compiled.netlist.programs and compiled.perf.samples == 128
    with torch.no_grad():
        expected = model(*inputs)[0].numpy()
    out = compiled(*inputs)[0].numpy()
    assert out.shape == expected.shape == (128, 384, 1024)
    assert pcc(out, expected) >= 0.99
