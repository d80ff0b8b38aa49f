"""The pipeline as data: the stage list, compile_depth by stage name and legacy CompileDepth, requires/ensures
checks, verify after every stage, and stages replaced or inserted by tests (no monkeypatching)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

import pybuda
from pybuda.config import CompileDepth
from pybuda.stages import STAGES, Stage, StageError, check_stages, stop_stage

from models import MLP


def _replace(name: str, run) -> list[Stage]:
    return [dataclasses.replace(s, run=run) if s.name == name else s for s in STAGES]


def _stage(name: str) -> Stage:
    return next(s for s in STAGES if s.name == name)


def test_default_list_chains_levels_and_stage_names():
    check_stages(STAGES)
    assert [s.name for s in STAGES] == ["initial_graph", "decompose", "fracture", "optimize", "autograd",
                                        "cpu_fallback", "host_io", "lower", "data_formats", "fuse",
                                        "save_intermediates", "insert_nops", "balance", "t_stream", "netlist"]
    assert STAGES[0].requires == "model" and STAGES[-1].ensures == "netlist"


def test_every_legacy_compile_depth_maps_onto_one_stage():
    expected = {
        CompileDepth.INIT_COMPILE: "initial_graph", CompileDepth.GENERATE_INITIAL_GRAPH: "initial_graph",
        CompileDepth.POST_INITIAL_GRAPH_PASS: "decompose", CompileDepth.CONSTEVAL_GRAPH: "optimize",
        CompileDepth.POST_PATTERN_MATCHER: "optimize", CompileDepth.OPTIMIZED_GRAPH: "optimize",
        CompileDepth.AUTOGRAD: "autograd", CompileDepth.POST_AUTOGRAD_PASS: "host_io",
        CompileDepth.PRE_LOWERING_PASS: "host_io", CompileDepth.BUDA_GRAPH_PRE_PLACER: "fuse",
        CompileDepth.BALANCER_PASS: "balance", CompileDepth.PRE_NETLIST_PASS: "t_stream",
        CompileDepth.GENERATE_NETLIST: "netlist", CompileDepth.BACKEND_GOLDEN_VERIFY: "netlist",
        CompileDepth.FULL: "netlist",
    }
    assert {d: stop_stage(d, STAGES) for d in CompileDepth} == expected
    assert sum(len(s.legacy) for s in STAGES) == len(CompileDepth) - 1   # FULL is the whole list
    assert stop_stage("lower", STAGES) == "lower"


def test_unknown_compile_depth_lists_the_stage_names(tmp_path):
    with pytest.raises(StageError, match=r"'balancer' names no stage; stage names: initial_graph, .*, balance, "
                                         r"t_stream, netlist \(or a CompileDepth: INIT_COMPILE"):
        pybuda.compile(MLP(), torch.randn(2, 16, 64), output_dir=tmp_path,
                       config=pybuda.CompilerConfig(compile_depth="balancer"))
    short = [s for s in STAGES if s.name not in ("data_formats", "fuse", "balance", "t_stream", "netlist")]
    with pytest.raises(StageError, match="BALANCER_PASS maps onto no stage"):
        stop_stage(CompileDepth.BALANCER_PASS, short)


def test_a_stage_whose_level_is_not_produced_is_a_clear_error(tmp_path):
    without_lower = [s for s in STAGES if s.name != "lower"]
    with pytest.raises(StageError, match="stage 'data_formats' requires the 'buda' level, but stage 'host_io' "
                                         "leaves the 'framework' level"):
        pybuda.compile(MLP(), torch.randn(2, 16, 64), output_dir=tmp_path, stages=without_lower)
    assert not list(tmp_path.iterdir())
    with pytest.raises(StageError, match="stage 'decompose' requires the 'framework' level, but nothing runs "
                                         "before it"):
        check_stages(STAGES[1:])
    with pytest.raises(StageError, match="repeated: optimize"):
        check_stages([*STAGES[:3], _stage("optimize"), *STAGES[3:]])
    with pytest.raises(StageError, match="'lowered' is not a level; levels: model, framework, buda"):
        Stage("x", lambda s: s, "lowered", "buda")


def test_a_stage_that_breaks_numerics_is_caught_by_verify_at_that_stage(tmp_path):
    real = _stage("optimize").run

    def broken_optimize(state):
        state = real(state)
        w = state.graph.node("mlp.w2")
        w.value = w.value * 0.0 + 1.0
        return state

    with pytest.raises(pybuda.VerificationError, match="stage 'optimize' diverges from the framework"):
        pybuda.compile(MLP(), torch.randn(2, 16, 64), output_dir=tmp_path, verify=True,
                       stages=_replace("optimize", broken_optimize))


def test_a_stage_inserted_after_lower_runs_is_timed_and_verified(tmp_path):
    def scale_weights(state):
        """A Buda-level stage that doubles a weight (verify must notice)."""
        graph = state.graph.copy()
        w = graph.node("mlp.w1")
        w.value = w.value * 2.0
        return dataclasses.replace(state, graph=graph)

    at = [s.name for s in STAGES].index("lower") + 1
    stages = [*STAGES[:at], Stage("scale", scale_weights, "buda", "buda"), *STAGES[at:]]
    x = torch.randn(2, 16, 64)
    with pytest.raises(pybuda.VerificationError, match="stage 'scale' diverges"):
        pybuda.compile(MLP(), x, output_dir=tmp_path / "v", verify=True, stages=stages)
    compiled = pybuda.compile(MLP(), x, output_dir=tmp_path, stages=stages)
    assert list(compiled.stage_times)[at] == "scale" and "scale" in compiled.graphs
    assert compiled.graphs["scale"].node("mlp.w1").value is not compiled.graphs["lower"].node("mlp.w1").value
    baseline = pybuda.compile(MLP(), x, output_dir=tmp_path / "b")
    assert not np.allclose(compiled(x).numpy(), baseline(x).numpy(), atol=1e-3)
    # compile_depth can name the inserted stage
    stopped = pybuda.compile(MLP(), x, output_dir=tmp_path / "s", stages=stages,
                             config=pybuda.CompilerConfig(compile_depth="scale"))
    assert list(stopped.stage_times)[-1] == "scale" and stopped.device_graph is stopped.graphs["scale"]


def test_each_stage_keeps_its_own_graph(tmp_path):
    compiled = pybuda.compile(MLP(), torch.randn(2, 16, 64), output_dir=tmp_path)
    # cpu_fallback keeps an unsplit graph as it is, autograd an inference graph, insert_nops a graph without NOPs,
    # save_intermediates one without intermediates, fracture one without fracture groups
    kept = ("cpu_fallback", "autograd", "insert_nops", "save_intermediates", "fracture")
    graphs = [compiled.graphs[s.name] for s in STAGES if s.produces_graph and s.name not in kept]
    assert len({id(g) for g in graphs}) == len(graphs)
    assert compiled.graphs["insert_nops"] is compiled.graphs["fuse"]
    assert compiled.graphs["fracture"] is compiled.graphs["decompose"]
    # data formats are set by their own stage: the lowered graph keeps the default format
    assert {n.df for n in compiled.graphs["lower"].nodes("op")} == {pybuda.DataFormat.Float32}
    assert {n.df for n in compiled.graphs["data_formats"].nodes("op")} == {pybuda.DataFormat.Float16_b}
    assert compiled.device_graph is compiled.graphs["t_stream"]


def test_an_error_in_a_stage_names_the_stage_and_keeps_its_type(tmp_path):
    def failing_balance(state):
        raise KeyError("mlp.w2")

    with pytest.raises(KeyError) as err:
        pybuda.compile(MLP(), torch.randn(2, 16, 64), output_dir=tmp_path, stages=_replace("balance", failing_balance))
    note, = err.value.__notes__
    assert note.startswith("raised in compile stage 'balance' of model 'mlp'; pybuda did not expect it") \
        and "pybuda bug" in note          # not a PyBudaError: a report is asked for


def test_op_level_comparison_names_the_first_op_a_stage_breaks(tmp_path):
    """`enable_op_level_comparision` (it implies verify): a Buda-level stage that doubles w1 makes mm1 the first op
    to diverge (its PCC stays 1: the max error catches it), and the error names it, not just the stage's outputs;
    without the breakage every stage's kept ops (mm1, bias1, ...) match their values before the stage."""
    def scale_weights(state):
        graph = state.graph.copy()
        graph.node("mlp.w1").value = graph.node("mlp.w1").value * 2.0
        return dataclasses.replace(state, graph=graph)

    at = [s.name for s in STAGES].index("lower") + 1
    stages = [*STAGES[:at], Stage("scale", scale_weights, "buda", "buda"), *STAGES[at:]]
    config = pybuda.CompilerConfig(enable_op_level_comparision=True)
    x = torch.randn(2, 16, 64)
    with pytest.raises(pybuda.VerificationError, match=r"stage 'scale': op 'mm1' diverges from its value before"):
        pybuda.compile(MLP(), x, output_dir=tmp_path / "broken", config=config, stages=stages)
    compiled = pybuda.compile(MLP(), x, output_dir=tmp_path, config=config)
    op_checks = {c.stage: c for c in compiled.checks if c.ops_compared}
    assert {"decompose", "lower", "data_formats", "fuse"} <= set(op_checks)
    assert op_checks["lower"].ops_compared >= 4 and all(c.pcc >= 0.999 for c in op_checks.values())
