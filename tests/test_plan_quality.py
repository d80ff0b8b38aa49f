"""Plan quality of the default (CP-SAT) policy, both from our simulator: the BERT-base encoder stack against the
legacy compiler's netlist of it, and the planner's fork cuts (`planner._cut_forks`).

Fork cuts: where a fork-join stall that buffering cannot remove sets an epoch's pace, the split is planned again
with an epoch ending at the fork, so the join reads the short path from a DRAM queue that holds the microbatch;
the cut plan is kept only when it is cheaper. Two ViT-B/16 layers on e150 (microbatch 64, Bfp8_b, LoFi) have
one: the attention epoch starts with the residual add of the layer before (the fork), whose output its last op
adds back (the join, one core); the join's L1 holds about one input of the residual where the attention's latency
needs three."""
from __future__ import annotations


import pytest
import torch

import pybuda
from pybuda.backend_sim import estimate
from pybuda.balancer import planner
from pybuda.balancer.fork_join import pace
from pybuda.netlist import load
from pybuda.tools.models import BertEncoderStack
from pybuda.tools.shared import real_netlist

LEGACY_BERT = real_netlist("graph_tests__netlists__bert_base_inference.yaml")


@pytest.mark.slow
@pytest.mark.skipif(not LEGACY_BERT.is_file(), reason="netlist corpus not available")
def test_bert_base_stack_beats_the_legacy_netlist(tmp_path):
    """The legacy netlist's configuration (12 encoder layers, sequence 128, e150, input_count 128, Bfp8_b, LoFi,
    inputs in DRAM): ours at least 1.25x its samples/s (`benchmarks/bert_encoder.py` prints both)."""
    torch.manual_seed(0)
    config = pybuda.CompilerConfig(default_df_override="Bfp8_b", default_math_fidelity="LoFi",
                                   input_queues_on_host=False)
    with torch.no_grad():
        compiled = pybuda.compile(BertEncoderStack().eval(), torch.randn(128, 128, 768), torch.zeros(128, 1, 128),
                                  device="e150", config=config, output_dir=tmp_path)
    legacy = estimate(load(str(LEGACY_BERT)))
    assert legacy.samples == compiled.perf.samples == 128
    assert compiled.perf.samples_per_second >= 1.25 * legacy.samples_per_second


def _vit_layers(tmp_path, name: str):
    import transformers as T
    torch.manual_seed(0)
    model = T.ViTModel(T.ViTConfig(hidden_size=768, num_hidden_layers=2, num_attention_heads=12,
                                   intermediate_size=3072, image_size=224, patch_size=16),
                       add_pooling_layer=False).eval()
    config = pybuda.CompilerConfig(default_df_override="Bfp8_b", default_math_fidelity="LoFi")
    with torch.no_grad():
        return pybuda.compile(model, torch.randn(64, 3, 224, 224), device="e150", config=config,
                              output_dir=tmp_path / name)


def _stalls(placement) -> list[tuple[str, str]]:
    """(fork, join) of every fork-join stall that sets its epoch's pipeline."""
    return [(op.fork, op.name) for timing in placement.epoch_timings for op in timing.ops
            if op.limiter == "fork_join" and op.limiter_cycles > pace(timing)]


@pytest.mark.slow
def test_a_stalled_fork_join_is_cut_after_the_fork_when_that_is_cheaper(monkeypatch, tmp_path):
    monkeypatch.setattr(planner, "FORK_CUT_ROUNDS", 0)
    uncut = _vit_layers(tmp_path, "uncut").placement
    stalls = _stalls(uncut)
    assert stalls, "the plan without fork cuts should stall on the residual's fork-join"
    monkeypatch.undo()

    compiled = _vit_layers(tmp_path, "cut")
    cut = compiled.placement
    assert cut.estimated_cycles < uncut.estimated_cycles
    assert cut.lower_bound_cycles == uncut.lower_bound_cycles     # the planner's cuts do not touch the bound
    assert not _stalls(cut)
    graph = compiled.device_graph
    for fork, join in stalls:     # every reader of the fork, the join included, reads it from a DRAM queue
        readers = [u for u, _ in graph.users(fork) if graph.node(u).kind == "op"]
        assert join in readers and all(cut.placed[u].epoch > cut.placed[fork].epoch for u in readers)
    # the estimate the planner compared is the simulator's for the netlist written
    assert estimate(compiled.netlist).total_cycles == cut.estimated_cycles
