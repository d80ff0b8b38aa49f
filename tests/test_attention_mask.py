"""Attention masks (issue 34, point 2): a Hugging Face encoder given input ids and an attention mask compiles into
one host part ahead of the device (the mask's casts, comparisons and logical ops: `cpu_fallback.ahead_of_device`)
and one device part, with torch's safe-softmax guard over a -inf mask made finite
(`simplify.finite_masked_softmax`), and matches torch, a fully masked sample included."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import pybuda
from pybuda.ir import Graph
from pybuda.ops import add_op
from pybuda.passes.simplify import simplify
from pybuda.verify import evaluate_sample, host_inputs, host_outputs, pcc

MASK_OPS = {"cast", "equal", "logical_not", "logical_and", "index_tensor", "greater_equal"}


def _bert():
    import transformers as T
    torch.manual_seed(0)
    config = T.BertConfig(hidden_size=64, num_hidden_layers=2, num_attention_heads=2, intermediate_size=128,
                          vocab_size=100, max_position_embeddings=64)
    return T.BertForSequenceClassification(config).eval()


@pytest.mark.parametrize("masked", ["tail", "whole"])
def test_bert_with_an_attention_mask_runs_its_mask_on_the_host_ahead_of_the_device(tmp_path, masked):
    model = _bert()
    ids, mask = torch.randint(0, 100, (2, 32)), torch.ones(2, 32, dtype=torch.long)
    mask[1, 20:] = 0
    if masked == "whole":
        mask[1, :] = 0      # torch's guard gives this sample's attention rows 0, not NaN
    compiled = pybuda.compile(model, ids, mask, output_dir=tmp_path, verify=True)
    assert [s.kind for s in compiled.segments] == ["host", "device"]
    host_types = {s.graph.node(n).op_type for s in compiled.segments if not s.on_device for n in s.graph.op_names()}
    assert {"cast", "index_tensor"} <= host_types
    assert not MASK_OPS & {compiled.device_graph.node(n).op_type for n in compiled.device_graph.op_names()}
    with torch.no_grad():
        expected = model(ids, mask).logits.numpy()
    got = compiled(ids, mask)[0].numpy()
    assert pcc(got, expected) >= 0.99 and np.abs(got - expected).max() < 5e-3


def _guarded_softmax_graph(fill: float) -> Graph:
    """softmax(s + where(c, 0, fill)) under torch's safe-softmax guard, as torch.export writes it."""
    g = Graph("g")
    s, c = g.add_input("s", (1, 2, 4, 8)), g.add_input("c", (1, 1, 4, 8))
    mask = add_op(g, "mask", "where", [c, g.add_constant("zero", np.array(0.0, np.float32)),
                                       g.add_constant("fill", np.array(fill, np.float32))])
    x = add_op(g, "x", "add", [s, mask])
    probs = add_op(g, "probs", "softmax", [x], {"dim": -1})
    t = add_op(g, "eq", "equal", [x, g.add_constant("inf", np.array(-np.inf, np.float32))])
    t = add_op(g, "not1", "logical_not", [t])
    t = add_op(g, "i8", "cast", [t], {"dtype": "int8"})
    t = add_op(g, "any", "reduce_max", [t], {"dim": -1, "keep_dim": True})
    t = add_op(g, "b", "cast", [t], {"dtype": "bool"})
    t = add_op(g, "not2", "logical_not", [t])
    g.add_output("out", add_op(g, "guard", "where", [t, g.add_constant("zeros", np.zeros((1, 2, 4, 8), np.float32)),
                                                     probs]))
    return g


def _run(g: Graph, feeds: dict) -> np.ndarray:
    return host_outputs(g, evaluate_sample(g, host_inputs(g, feeds)))[0]


def test_the_safe_softmax_guard_over_a_minus_inf_mask_becomes_finite_and_keeps_its_values():
    rng = np.random.default_rng(0)
    feeds = {"s": rng.standard_normal((1, 2, 4, 8)).astype(np.float32) * 4,
             "c": (rng.random((1, 1, 4, 8)) > 0.4).astype(np.float32)}
    feeds["c"][0, 0, 2] = 0.0       # a row with every key masked
    g = _guarded_softmax_graph(-np.inf)
    with np.errstate(invalid="ignore"):
        expected = _run(g, feeds)
    assert np.all(expected[0, :, 2] == 0.0)
    simplify(g)
    types = {g.node(n).op_type for n in g.op_names()}
    assert not {"equal", "logical_not", "cast"} & types
    assert all(np.isfinite(node.value).all() for node in g.nodes("constant"))
    np.testing.assert_allclose(_run(g, feeds), expected, atol=1e-6)


def test_a_finite_mask_keeps_its_guard_for_the_infinity_fold():
    """With a finite fill the guard's test folds away as before (`fold_infinity_tests`), not through this rewrite:
    no reduce over the mask is added."""
    g = _guarded_softmax_graph(-1e9)
    simplify(g)
    assert "reduce_max" not in {g.node(n).op_type for n in g.op_names()}
