"""Slow tier (`make test-models`): the models users bring (issue 10), architectures the zoo does not cover, each
in a small configuration with random weights, compiled for e150 at Float16_b, simulated and checked against
PyTorch. `benchmarks/models_table.py` prints the table of docs/models.md from the same list, failures included."""
from __future__ import annotations

import pytest
import torch
from torch.utils._pytree import tree_leaves

import pybuda
from pybuda.tools.families import FAMILIES
from pybuda.verify import pcc

pytestmark = pytest.mark.models

PASSING = ["distilbert", "roberta", "albert", "electra", "deberta", "deberta_v2", "t5_encoder", "opt", "gpt_neo",
           "bloom", "llama", "qwen2", "mistral", "deit", "beit", "convnext", "regnet", "efficientnet",
           "mobilenet_v1", "levit", "segformer", "wav2vec2", "hubert"]


@pytest.mark.parametrize("name", PASSING)
def test_model_matches_torch(tmp_path, name):
    entry = FAMILIES[name]
    model, inputs = entry.build(), entry.inputs(1)
    compiled = pybuda.compile(model, *inputs, device="e150", output_dir=tmp_path)
    with torch.no_grad():
        expected = model(*inputs)
    got = compiled(*inputs)
    assert type(got) is type(expected)   # the model's own output structure (a transformers ModelOutput)
    leaves = list(zip(tree_leaves(got), tree_leaves(expected), strict=True))
    for out, want in leaves:
        assert out.shape == want.shape
        assert pcc(out.numpy(), want.numpy()) >= 0.99
