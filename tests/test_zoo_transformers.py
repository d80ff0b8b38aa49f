"""Fast tier of the model zoo: small BERT, GPT-2 and ViT through torch.export and TVM Relax to simulated
netlists, checked against PyTorch."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import pybuda
from pybuda.netlist import validate
from pybuda.tools.zoo import ZOO
from pybuda.verify import pcc


def _run(name, tmp_path, device="e150", **options):
    entry = ZOO[name]
    model, inputs = entry.build(), entry.inputs(2)
    config = pybuda.CompilerConfig(**options) if options else None  # None: the global config and its overrides
    compiled = pybuda.compile(model, *inputs, device=device, config=config, output_dir=tmp_path)
    with torch.no_grad():
        expected = model(*inputs)[0].numpy()
    out = compiled(*inputs)
    out = out[0].numpy()   # the same ModelOutput type as the torch model's
    return compiled, out, expected


@pytest.mark.parametrize("device", ["e150", "n150"])
@pytest.mark.parametrize("name", ["bert_tiny", "gpt2_tiny", "vit_tiny"])
def test_small_transformers_match_torch(tmp_path, name, device):
    compiled, out, expected = _run(name, tmp_path, device)
    assert out.shape == expected.shape
    assert pcc(out, expected) >= 0.99
    validate(compiled.netlist)


@pytest.mark.parametrize("name", ["bert_tiny", "gpt2_tiny"])
def test_small_transformers_float32(tmp_path, name):
    _, out, expected = _run(name, tmp_path, "n150", default_df_override="Float32")
    assert pcc(out, expected) >= 0.999


def test_embedding_runs_on_host_and_attention_heads_are_tms(tmp_path):
    compiled, _, _ = _run("bert_tiny", tmp_path)
    host_ops = {n.op_type for s in compiled.segments if not s.on_device for n in s.graph.nodes("op")}
    assert "embedding" in host_ops
    device_types = {op.type for g in compiled.netlist.graphs.values() for op in g.ops.values()}
    assert "embedding" not in device_types
    assert "host (CPU fallback) ops: " in compiled.summary() and "embedding" in compiled.summary()
    tms = [str(tm) for g in compiled.netlist.graphs.values() for op in g.ops.values()
           for tm_list in op.input_tms.values() for tm in tm_list]
    assert any("hslice" in t for t in tms) and any("hstack" in t for t in tms)


def test_without_cpu_fallback_embedding_fails_naming_the_op(tmp_path):
    with pytest.raises(ValueError, match="has no device lowering: run it on the host by adding .* to cpu_fallback_ops"):
        _run("bert_tiny", tmp_path, enable_tvm_cpu_fallback=False)


def test_mixed_precision_changes_netlist_and_numerics(tmp_path):
    base, out_base, expected = _run("bert_tiny", tmp_path / "a")
    pybuda.configure_mixed_precision(op_type="matmul", output_df=pybuda.DataFormat.Bfp8_b,
                                     math_fidelity=pybuda.MathFidelity.LoFi)
    mixed, out_mixed, _ = _run("bert_tiny", tmp_path / "b")
    ops = {name: op for g in mixed.netlist.graphs.values() for name, op in g.ops.items() if op.type == "matmul"}
    model_matmuls = [op for name, op in ops.items() if name.startswith("matmul_")]
    assert model_matmuls and all(op.out_df.value == "Bfp8_b" and op.math_fidelity.value == "LoFi"
                                 for op in model_matmuls)
    # softmax/layernorm (fused ops of their sub-ops) come from other framework ops and keep the default format
    fused = [op for g in mixed.netlist.graphs.values() for op in g.ops.values() if op.type == "fused_op"]
    assert fused and all(op.out_df.value == "Float16_b" for op in fused)
    assert not np.array_equal(out_base, out_mixed)
    assert pcc(out_mixed, expected) >= 0.97


@pytest.mark.parametrize("level, matmul_df", [(1, "Bfp8_b"), (2, "Bfp8")])
def test_amp_levels(tmp_path, level, matmul_df):
    compiled, out, expected = _run("gpt2_tiny", tmp_path, amp_level=level)
    ops = [op for g in compiled.netlist.graphs.values() for op in g.ops.values()]
    assert any(op.type == "matmul" and op.out_df.value == matmul_df for op in ops)
    assert pcc(out, expected) >= 0.97
