"""Stage contracts (`pybuda.levels`): each level's structural check holds on the real stage outputs of small models
(inference, CPU fallback, training) and catches a hand-broken state with a ContractError (an InternalError) naming
the stage, the level and the node."""
from __future__ import annotations

import dataclasses

import pytest
import torch
from torch import nn

import pybuda
from pybuda.errors import InternalError
from pybuda.ir import Operand
from pybuda.levels import LEVELS, ContractError
from pybuda.optimizers import SGD
from pybuda.stages import STAGES, CompileState, Stage, run_stages

from models import MLP, CumsumMiddle


def _recording(states: list) -> list[Stage]:
    """The stage list, each stage recording the state it returns in `states`."""
    def record(stage: Stage) -> Stage:
        def run(state: CompileState) -> CompileState:
            state = stage.run(state)
            states.append((stage, state))
            return state
        return dataclasses.replace(stage, run=run)
    return [record(s) for s in STAGES]


def _training_mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 64), nn.GELU(), nn.Linear(64, 10))


@pytest.mark.parametrize("case", ["pybuda_module", "cpu_fallback", "training"])
def test_every_level_holds_on_the_real_stage_outputs(case, tmp_path):
    states: list = []
    if case == "pybuda_module":
        pybuda.compile(MLP(), torch.randn(2, 16, 64), output_dir=tmp_path, stages=_recording(states))
    elif case == "cpu_fallback":
        config = pybuda.CompilerConfig(cpu_fallback_ops={"cumsum"})
        compiled = pybuda.compile(CumsumMiddle(), torch.randn(2, 8, 32), output_dir=tmp_path, config=config,
                                  stages=_recording(states))
        assert len(compiled.netlist_paths) == 2
    else:
        pybuda.compile(_training_mlp(), torch.randn(2, 32), loss=nn.MSELoss(), optimizer=SGD(0.1),
                       sample_targets=torch.randn(2, 10), output_dir=tmp_path, stages=_recording(states))
    assert [stage.name for stage, _ in states] == [s.name for s in STAGES]
    for stage, state in states:
        assert list(LEVELS[stage.ensures].problems(state)) == [], stage.name


def _inserted_after(name: str, edit) -> list[Stage]:
    """The stage list with a stage `broken` after stage `name`, at the level that stage ensures, applying `edit` to a
    copy of the state's graph (or, for the placed and netlist levels, to the state)."""
    level = next(s.ensures for s in STAGES if s.name == name)

    def broken(state: CompileState) -> CompileState:
        if level in ("framework", "buda"):
            graph = state.graph.copy()
            edit(graph)
            return dataclasses.replace(state, graph=graph)
        return edit(state)

    at = [s.name for s in STAGES].index(name) + 1
    return [*STAGES[:at], Stage("broken", broken, level, level), *STAGES[at:]]


def _matmul(graph) -> str:
    return next(n.name for n in graph.nodes("op") if n.op_type == "matmul")


def _three_d(graph) -> None:
    node = graph.node(_matmul(graph))
    node.shape = node.shape[1:]


def _tm_op(graph) -> None:
    mm = _matmul(graph)
    graph.add_op("mm_reshaped", "reshape", [mm], {"shape": list(graph.node(mm).shape)}, shape=graph.node(mm).shape)


def _wrong_shape(graph) -> None:
    node = graph.node(_matmul(graph))
    node.shape = (*node.shape[:-1], node.shape[-1] + 32)


def _edge_tm(graph) -> None:
    mm = _matmul(graph)
    src = graph.operands(mm)[0].src
    graph.set_operand(mm, 0, Operand(src, (("transpose",),)))


def _unregistered(graph) -> None:
    graph.node(_matmul(graph)).op_type = "frobnicate"


def _two_samples(graph) -> None:
    node = graph.inputs()[0]
    node.shape = (2, *node.shape[1:])


def _no_op_model(state: CompileState) -> CompileState:
    placement = state.placements[0]
    models = dict(placement.models)
    del models[_matmul(state.graph)]
    return dataclasses.replace(state, placements=(dataclasses.replace(placement, models=models),))


def _no_manifest(state: CompileState) -> CompileState:
    return dataclasses.replace(state, manifest=None)


def _invalid_netlist(state: CompileState) -> CompileState:
    netlist = state.netlists[0]
    op = next(op for graph in netlist.graphs.values() for op in graph.ops.values())
    op.grid_size = (99, 99)
    return state


@pytest.mark.parametrize("after, edit, level, problem", [
    ("lower", _three_d, "buda", r"op '\S+' \(matmul\) has shape \(1, 32, 128\), not \(1, z, R, C\) with R and C "
                                r"multiples of 32"),
    ("fuse", _tm_op, "buda", r"op 'mm_reshaped' \(reshape\) is not a Buda op type \(a TM op: at the Buda level TMs "
                             r"are edge TMs\)"),
    ("data_formats", _wrong_shape, "buda", r"op '\S+' \(matmul\) has shape \(1, 1, 32, 160\), but the registry "
                                           r"infers \(1, 1, 32, 128\) from its operands"),
    ("decompose", _edge_tm, "framework", r"op '\S+' \(matmul\) reads '\S+' through edge TMs \[\('transpose',\)\] "
                                         r"\(a framework graph has none\)"),
    ("optimize", _unregistered, "framework", r"op '\S+' \(frobnicate\): unknown op type 'frobnicate'"),
    ("host_io", _two_samples, "framework", r"model input 'x' has shape \(2, 16, 64\), not one sample's through its "
                                           r"host transforms, \(1, 16, 64\)"),
    ("balance", _no_op_model, "placed", r"op '\S+' \(matmul\) has no op model"),
    ("netlist", _no_manifest, "netlist", "there is no run manifest"),
    ("netlist", _invalid_netlist, "netlist", r"netlist '\S+' breaks \d+ backend rule\(s\), the first: .*op "),
])
def test_a_stage_that_breaks_its_level_is_named_with_the_node(after, edit, level, problem, tmp_path):
    with pytest.raises(ContractError, match=rf"stage 'broken' breaks the contract of the '{level}' level: "
                                            rf"{problem}") as caught:
        pybuda.compile(MLP(), torch.randn(2, 16, 64), output_dir=tmp_path, stages=_inserted_after(after, edit))
    assert isinstance(caught.value, InternalError) and "this is a pybuda bug" in str(caught.value)


def test_the_state_given_to_the_first_stage_is_checked_too(tmp_path):
    state = CompileState(model=MLP(), sample_inputs=(torch.randn(2, 16, 64),), config=pybuda.CompilerConfig(),
                         device=pybuda.device.get_device("e150"), microbatch=2, name="mlp", output_dir=tmp_path,
                         graph=pybuda.ir.Graph())
    with pytest.raises(ContractError, match="the state given to stage 'initial_graph' breaks the contract of the "
                                            "'model' level: a graph is built already"):
        next(run_stages(STAGES, state))


def test_the_levels_are_the_stage_lists_vocabulary():
    assert list(LEVELS) == ["model", "framework", "buda", "placed", "netlist"]
    assert {s.ensures for s in STAGES} | {STAGES[0].requires} == set(LEVELS)
    assert [s.name for s in STAGES if s.produces_graph] == [s.name for s in STAGES if s.ensures in
                                                            ("framework", "buda") or s.name == "t_stream"]
