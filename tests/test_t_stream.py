"""T-streaming (pybuda-passes.md §7): the TM algebra (simplification, edge TMs that keep every op's values), each
legality rule with a case accepted and one refused for the stated reason, the overrides, and compiled models whose
streamed netlists validate and match the framework."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

import pybuda
from pybuda.arch.streaming import edge_tms, in_epoch_problem, replay_factor, restream
from pybuda.arch.tms import TMError, apply_tms, shape_after_tms, simplify_tms
from pybuda.balancer.op_model import BalancerError, legal_op_models
from pybuda.balancer.streaming import direction_problems, factors, op_streams
from pybuda.config import CompilerConfig
from pybuda.device import get_device
from pybuda.verify import pcc

from models import MLP

RNG = np.random.default_rng(0)

_TM = st.one_of(st.tuples(st.sampled_from(["vslice", "vstack", "hslice", "hstack"]), st.sampled_from([2, 4])),
                st.just(("transpose",)), st.tuples(st.just("broadcast"), st.sampled_from(["r", "c"]), st.just(2)))


@settings(max_examples=300, deadline=None)
@given(st.lists(_TM, max_size=6))
def test_simplified_tms_compute_the_same(tms):
    x = RNG.standard_normal((4, 8, 8))
    try:
        shape_after_tms(x.shape, tms)
    except TMError:
        return
    simple = simplify_tms(tms)
    assert len(simple) <= len(tms)
    np.testing.assert_array_equal(apply_tms(x, list(simple)), apply_tms(x, list(tms)))


def _stream(x: np.ndarray, stream) -> np.ndarray:
    return apply_tms(x, [("vslice" if stream[0] == "r" else "hslice", stream[1])]) if stream else x


STREAMS = [(), ("r", 2), ("r", 4), ("c", 2)]


@pytest.mark.parametrize("producer", STREAMS)
@pytest.mark.parametrize("consumer", STREAMS)
@pytest.mark.parametrize("tms", [(), (("hslice", 2),), (("transpose",),), (("broadcast", "c", 2),)])
def test_edge_tms_give_the_consumer_its_slices_of_the_original_values(producer, consumer, tms):
    """The producer's streamed output through the edge's TMs = the consumer's slicing of what the edge gave
    before; for a matmul's second operand, each of its t slices whole once per row slice of the first operand."""
    p = RNG.standard_normal((1, 8, 8))
    before = apply_tms(p, list(tms))
    got = apply_tms(_stream(p, producer), list(edge_tms(producer, tms, consumer, "add", 0)))
    np.testing.assert_array_equal(got, _stream(before, consumer))
    if consumer and consumer[0] == "r":
        replayed = apply_tms(_stream(p, producer), list(edge_tms(producer, tms, consumer, "matmul", 1)))
        np.testing.assert_array_equal(replayed, np.repeat(before, consumer[1], axis=0))   # each t once per slice


# ---- §7 rules, each accepted and refused --------------------------------------------------------------------

def test_same_slicing_on_both_sides_needs_no_tm():
    assert edge_tms(("r", 4), (), ("r", 4), "add", 0) == ()
    assert in_epoch_problem(("r", 4), (), ("r", 4), "add", 0) is None
    assert in_epoch_problem(("c", 2), (), ("c", 2), "multiply", 1) is None


def test_row_slices_reach_a_row_ordered_operand_stacked():
    assert in_epoch_problem(("r", 4), (), (), "add", 0) is None              # one vstack: rows in order
    assert in_epoch_problem(("r", 4), (), ("r", 2), "exp", 0) is None        # vstack 2
    assert in_epoch_problem(("r", 2), (), ("r", 4), "exp", 0) is None        # vslice 2
    assert in_epoch_problem(("r", 2), (), (), "matmul", 0) is None           # activations are read by rows
    assert in_epoch_problem(("r", 2), (), (), "matmul", 1, identity=True) is None   # sparse matmul activations


def test_row_slices_cannot_reach_a_matmul_weight_operand_in_the_epoch():
    for consumer in [(), ("r", 2), ("c", 2)]:
        assert "out of order" in in_epoch_problem(("r", 2), (), consumer, "matmul", 1)


def test_column_slices_cannot_be_stacked_for_a_row_ordered_reader():
    assert "out of order" in in_epoch_problem(("c", 2), (), (), "add", 0)
    assert "out of order" in in_epoch_problem(("c", 2), (), ("r", 2), "add", 0)


def test_a_transpose_turns_row_slices_into_column_slices():
    assert edge_tms(("r", 2), (("transpose",),), ("c", 2), "nop", 0) == (("transpose",),)
    assert in_epoch_problem(("r", 2), (("transpose",),), ("c", 2), "nop", 0) is None
    assert "out of order" in in_epoch_problem(("r", 2), (("transpose",),), ("r", 2), "nop", 0)


def test_a_broadcast_of_a_streamed_producer_only_where_the_slicings_cancel():
    assert in_epoch_problem(("r", 2), (("broadcast", "c", 4),), ("r", 2), "add", 1) is None
    assert "out of order" in in_epoch_problem(("r", 2), (("broadcast", "z", 4),), ("r", 2), "add", 1)


def test_slices_interleaved_with_other_slices_are_out_of_order():
    """Heads (hslice 12) of a row-streamed producer for a row-streamed consumer: head-major vs slice-major."""
    assert "out of order" in in_epoch_problem(("r", 2), (("hslice", 12),), ("r", 2), "matmul", 0)
    assert in_epoch_problem((), (("hslice", 12),), ("r", 2), "matmul", 0) is None


def test_a_fused_op_input_read_as_a_matmul_sub_ops_weights_is_not_row_ordered():
    assert "out of order" in in_epoch_problem(("r", 2), (), (), "fused_op", 1, role="cols")
    assert in_epoch_problem(("r", 2), (), (), "fused_op", 1, role="both") is None


def test_matmul_streaming_replays_the_other_operand():
    assert restream(("r", 4), "matmul", 1) == (("broadcast", "c", 4), ("hslice", 4))
    assert restream(("c", 2), "matmul", 0) == (("broadcast", "r", 2), ("vslice", 2))
    assert restream(("r", 4), "matmul", 0) == (("vslice", 4),)
    assert replay_factor(("r", 4), "matmul", 1) == 4 and replay_factor(("r", 4), "matmul", 0) == 1


def test_factors_times_grid_divide_the_extent():
    assert factors(12, 2) == [2, 3, 6] and factors(12, 5) == [] and factors(8, 8) == []


# ---- the ops that may stream (compiled MLP, Buda graph) --------------------------------------------------------

@pytest.fixture(scope="module")
def mlp_graph(tmp_path_factory):
    cfg = CompilerConfig(compile_depth="fuse", enable_auto_fusing=False)
    return pybuda.compile(MLP(), torch.randn(2, 256, 64), config=cfg,
                          output_dir=tmp_path_factory.mktemp("mlp")).device_graph


def test_which_ops_may_stream(mlp_graph):
    g = mlp_graph
    assert direction_problems(g, "mm1") == {} and direction_problems(g, "gelu1") == {}
    assert direction_problems(g, g.output_source(g.output_names[0])) == {}   # the host stacks its slices back
    reduce = next(n.name for n in g.nodes("op") if n.op_type == "reduce")
    assert set(direction_problems(g, reduce)) == {"c"}            # a row max does not stream along columns


def test_switches_and_overrides(mlp_graph):
    g = mlp_graph
    cfg = CompilerConfig()
    assert ("r", 2) in op_streams(g, "mm1", cfg, 1, 1, 8, 4) and ("c", 2) in op_streams(g, "mm1", cfg, 1, 1, 8, 4)
    assert op_streams(g, "mm1", CompilerConfig(enable_t_streaming=False), 1, 1, 8, 4) == [()]
    assert op_streams(g, "mm1", CompilerConfig(manual_t_streaming=True), 1, 1, 8, 4) == [()]
    cfg.balancer_op_override("mm1", "t_stream_dir", "c")
    assert {s[0] for s in op_streams(g, "mm1", cfg, 1, 1, 8, 4) if s} == {"c"}
    cfg.balancer_op_override("mm1", "t_stream_shape", (4, 1))
    with pytest.raises(BalancerError, match=r"override_t_stream_shape\('mm1', \(4, 1\)\) streams along rows, but "
                                            r"override_t_stream_dir\('mm1', 'c'\)"):
        op_streams(g, "mm1", cfg, 1, 1, 8, 4)
    cfg = CompilerConfig()
    cfg.balancer_op_override("mm1", "t_stream_dir", "rz")
    with pytest.raises(BalancerError, match="z-major streaming is not supported"):
        op_streams(g, "mm1", cfg, 1, 1, 8, 4)
    cfg = CompilerConfig()
    cfg.balancer_op_override("mm1", "t_stream_shape", (4, 1))
    assert op_streams(g, "mm1", cfg, 1, 1, 8, 4) == [("r", 4)] and op_streams(g, "mm1", cfg, 4, 1, 8, 4) == []
    cfg.enable_t_streaming = False
    with pytest.raises(BalancerError, match=r"override_t_stream_shape\('mm1', \(4, 1\)\) has no effect with "
                                            r"enable_t_streaming=False"):
        op_streams(g, "mm1", cfg, 1, 1, 8, 4)


def test_streamed_models_hold_less_l1(mlp_graph):
    models = legal_op_models(mlp_graph, "gelu1", get_device("e150"), lambda gr, gc: [(), ("r", 2), ("r", 4)])
    on_one = {m.t_stream: m for m in models if m.grid == (1, 1)}
    assert on_one[("r", 4)].l1_bytes < on_one[("r", 2)].l1_bytes < on_one[()].l1_bytes
    assert on_one[("r", 4)].t == 4 and on_one[("r", 4)].mblock[0] * on_one[("r", 4)].ublock[0] == 2


# ---- compiled ------------------------------------------------------------------------------------------------

def test_overridden_streaming_compiles_validates_and_matches(tmp_path):
    cfg = CompilerConfig(enable_auto_fusing=False)
    for op, shape in [("mm1", (4, 1)), ("bias1", (4, 1)), ("gelu1", (2, 1)), ("mm2", (8, 1))]:
        cfg.balancer_op_override(op, "t_stream_shape", shape)
    x = torch.randn(2, 256, 64)
    compiled = pybuda.compile(MLP(), x, config=cfg, output_dir=tmp_path, verify=True)
    ops = compiled.netlist.ops
    assert (ops["mm1"].t, ops["bias1"].t, ops["gelu1"].t, ops["mm2"].t) == (4, 4, 2, 8)
    assert ops["mm1"].input_tms[1] == [("broadcast", "c", 4), ("hslice", 4)]       # the weight replayed
    assert not ops["bias1"].tms(0)                                                  # mm1 -> bias1: same slices
    assert ops["gelu1"].input_tms[0] == [("vstack", 2)]                             # 4 slices -> 2
    assert ops["mm2"].input_tms[0] == [("vslice", 4)]                               # 2 slices -> 8
    assert [c.stage for c in compiled.checks][-2:] == ["t_stream", "netlist"]
    assert all(c.pcc > 0.999 for c in compiled.checks[:-1]) and compiled.checks[-1].pcc > 0.99


def test_an_override_no_grid_admits_lists_the_legal_factors(tmp_path):
    cfg = CompilerConfig()
    cfg.balancer_op_override("mm1", "t_stream_shape", (3, 1))
    with pytest.raises(BalancerError, match=r"override_t_stream_shape\('mm1', \(3, 1\)\): no grid of op 'mm1' fits "
                                            r"a factor of 3 along its 8 tile rows.*legal factors per grid: 1x1: 2, 4, 8"):
        pybuda.compile(MLP(), torch.randn(2, 256, 64), config=cfg, output_dir=tmp_path)


@pytest.mark.parametrize("shape", [(2, 1), (1, 2)], ids=["rows", "columns"])
def test_an_op_a_model_output_reads_streams_and_the_host_stacks_the_slices_back(tmp_path, shape):
    """The model's last op streamed: its output queue holds t = 2 slices, which the runtime stacks back."""
    cfg = CompilerConfig()
    cfg.balancer_op_override("softmax.dc.multiply.7", "t_stream_shape", shape)
    model, x = MLP(d_out=64), torch.randn(2, 256, 64)
    compiled = pybuda.compile(model, x, config=cfg, output_dir=tmp_path, verify=True)
    assert compiled.placement.models["softmax.dc.multiply.7"].t_stream == ("r" if shape[0] == 2 else "c", 2)
    (queue,) = [q for q in compiled.netlist.queues.values() if q.input == "softmax.dc.multiply.7"]
    assert queue.t == 2
    expected = torch.softmax(torch.nn.functional.gelu(x @ model.w1.value() + model.b1.value()) @ model.w2.value(), -1)
    assert pcc(compiled(x).numpy(), expected.numpy()) >= 0.99


def test_streaming_lets_an_op_fit_where_whole_blocks_do_not(tmp_path):
    """gelu1 on one core: its 64x4-tile output double-buffered does not fit L1 whole; streamed it does."""
    cfg = CompilerConfig(enable_auto_fusing=False)
    cfg.balancer_op_override("gelu1", "grid_shape", (1, 1))
    x = torch.randn(1, 2048, 64)
    compiled = pybuda.compile(MLP(), x, config=cfg, output_dir=tmp_path)
    assert compiled.netlist.ops["gelu1"].t > 1
    cfg.enable_t_streaming = False
    with pytest.raises(BalancerError, match="'gelu1'.*no legal op model with grid \\(1, 1\\)|'gelu1'"):
        pybuda.compile(MLP(), x, config=cfg, output_dir=tmp_path / "off")
