"""`op_intermediates_to_save`: each named op keeps out of fusion, writes an output queue `intermediate_<op>`, and
its output comes back beside the model's outputs (`compiled.intermediates`), also from a TTI image; a name the
device graph lacks fails naming the closest ops."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import pybuda
from pybuda.config import OverrideError
from pybuda.verify import pcc

from models import MLP, torch_mlp


def _close(got: torch.Tensor, expected: torch.Tensor) -> bool:
    return got.shape == expected.shape and pcc(got.numpy(), expected.numpy()) >= 0.99 and \
        np.allclose(got.numpy(), expected.numpy(), atol=0.05, rtol=0.02)


def test_saved_intermediates_come_back_beside_the_outputs(tmp_path):
    model, x = MLP(d_in=256), torch.randn(2, 64, 256)
    config = pybuda.CompilerConfig(op_intermediates_to_save=["mm1", "bias1"])
    compiled = pybuda.compile(model, x, config=config, output_dir=tmp_path, verify=True)   # every stage's outputs
    ops = {name for graph in compiled.netlist.graphs.values() for name in graph.ops}
    assert {"mm1", "bias1"} <= ops                          # bias1 would fuse with gelu1 otherwise
    queues = compiled.netlist.queues
    assert {q: queues[q].input for q in ("intermediate_mm1", "intermediate_bias1")} == \
        {"intermediate_mm1": "mm1", "intermediate_bias1": "bias1"}
    assert _close(compiled(x), torch_mlp(model, x))
    p = {k.split(".")[-1]: v.value() for k, v in model.get_parameters().items()}
    expected = {"mm1": x @ p["w1"], "bias1": x @ p["w1"] + p["b1"]}
    assert set(compiled.intermediates) == set(expected)
    assert all(_close(compiled.intermediates[op], value) for op, value in expected.items())
    loaded = pybuda.load(compiled.save(tmp_path / "mlp.tti"))
    loaded(x)
    assert all(torch.equal(loaded.intermediates[op], compiled.intermediates[op]) for op in expected)


def test_an_intermediate_the_graph_lacks_names_the_closest_ops(tmp_path):
    config = pybuda.CompilerConfig(op_intermediates_to_save=["mm3"])
    missing = r"op_intermediates_to_save\('mm3'\): no op named 'mm3'.*closest: 'mm2', 'mm1'"
    with pytest.raises(OverrideError, match=missing):
        pybuda.compile(MLP(d_in=256), torch.randn(2, 64, 256), config=config, output_dir=tmp_path)
