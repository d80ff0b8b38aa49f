"""The graph levels of the compile pipeline and the contract of each: what a `CompileState` holds at the level, and a
structural check of it (torch.fx's `PassBase.requires` / `ensures`: a stage of `pybuda.stages` declares the levels
it requires and ensures; the checks live here, with the levels).

    model       nothing built yet: the framework model and its sample inputs
    framework   PyBuda graphs: every op a registered op of the shape the registry infers, no edge TMs, one sample
                (each model input the sample input's shape with a leading dim of 1, through its host transforms);
                after `cpu_fallback`, every segment's
    buda        the device segments lowered: every tensor (1, z, R, C) with R and C multiples of 32, every op a Buda
                op type of the shape the registry infers from its operands after their edge TMs, TMs only as edge TMs
    placed      the Buda graphs and the balancer's placement: one per device segment, every op with its op model
                and its place
    netlist     one netlist per device segment, each valid by the backend's rules, and the run manifest

`check_level(level, state, stage)` raises a `ContractError` (an InternalError: a pybuda bug) naming the stage that
left the state and the first node (or netlist) that breaks the level's contract. `pybuda.stages.run_stages` runs
the check of the level each stage ensures after every stage of every compile (about 1.5 % of BERT-base's compile,
the netlist's second validation a third of it).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Iterator

from .arch.tms import TMError
from .errors import InternalError
from .ir import Graph, Node
from .netlist import check as check_netlist
from .ops import registry
from .ops.registry import OpError

TILE = 32


class ContractError(InternalError):
    """A stage left a state that breaks the contract of the level it ensures; the message names the stage, the
    level and the node (or netlist)."""


@dataclasses.dataclass(frozen=True)
class Level:
    """One graph level: its name and the check of its contract (`problems(state)`: what in the state breaks it, as
    messages naming the node, first found first); what the state holds at each level is the module's docstring."""

    name: str
    problems: Callable[[Any], Iterator[str]]
    graph: bool = False     # a stage that ensures this level produces a graph (kept and verified)


def check_level(level: str, state: Any, stage: str, given: bool = False) -> None:
    """ContractError naming `stage` unless `state` (a `pybuda.stages.CompileState`) meets the contract of `level`:
    the state the stage returned, or (`given`) the state given to it."""
    problem = next(LEVELS[level].problems(state), None)
    if problem is not None:
        who = f"the state given to stage {stage!r}" if given else f"stage {stage!r}"
        raise ContractError(f"{who} breaks the contract of the {level!r} level: {problem}")


def _op(node: Node) -> str:
    """An op as messages name it."""
    return f"op {node.name!r} ({node.op_type})"


# --- model -------------------------------------------------------------------------------------------------------

def _model_problems(state: Any) -> Iterator[str]:
    """Sample inputs given, nothing built yet."""
    if not state.sample_inputs:
        yield "there are no sample inputs"
    if state.graph is not None or state.segments:
        yield "a graph is built already"


# --- framework ---------------------------------------------------------------------------------------------------

def _inferred_shape_problem(graph: Graph, node: Node) -> str | None:
    """Why op `node` is not of the shape the registry infers from its operands (after their edge TMs), if it is
    not; an unregistered op type, an illegal edge TM or operands the op does not take say so."""
    try:
        shapes = [graph.operand_shape(o) for o in graph.operands(node.name)]
        shape = registry.infer_shape(node.op_type, shapes, node.attrs, node.name)
    except TMError as e:
        return f"{_op(node)}: an operand's edge TMs do not apply: {e}"
    except OpError as e:
        return f"{_op(node)}: {e}"
    if shape != tuple(node.shape):
        return f"{_op(node)} has shape {tuple(node.shape)}, but the registry infers {shape} from its operands"
    return None


def _through(transforms: tuple, shape: tuple) -> tuple:
    """`shape` through host transforms ((op_type, attrs) registry ops, in order)."""
    for op_type, attrs in transforms:
        shape = registry.infer_shape(op_type, [shape], attrs)
    return tuple(shape)


def _sample_problems(graph: Graph, state: Any) -> Iterator[str]:
    """The model inputs `graph` holds are one sample: the sample input's shape with a leading dim of 1, through
    their host transforms. (A model's outputs need not have a leading sample dim: a batch-1 model may return any
    shape.)"""
    for name, sample in zip(state.input_names, state.sample_inputs):
        if name in graph and graph.node(name).kind == "input":
            node = graph.node(name)
            one = _through(node.host_transforms, (1, *sample.shape[1:]))
            if tuple(node.shape) != one:
                yield (f"model input {name!r} has shape {tuple(node.shape)}, not one sample's through its host "
                       f"transforms, {one}")


def _framework_graph_problems(graph: Graph) -> Iterator[str]:
    """What in `graph` breaks the framework level, model inputs and outputs aside: unregistered ops, edge TMs, op
    shapes other than the registry's inference."""
    for node in graph.nodes("op"):
        moved = next((o for o in graph.operands(node.name) if o.tms), None)
        if moved is not None:
            yield f"{_op(node)} reads {moved.src!r} through edge TMs {list(moved.tms)} (a framework graph has none)"
            continue
        problem = _inferred_shape_problem(graph, node)
        if problem is not None:
            yield problem


def _framework_problems(state: Any) -> Iterator[str]:
    """Every segment (host and device) a framework graph of one sample."""
    for part in state.parts():
        yield from _sample_problems(part.graph, state)
        yield from _framework_graph_problems(part.graph)


# --- buda --------------------------------------------------------------------------------------------------------

def _tile_padded(shape: tuple) -> bool:
    """A Buda tensor's shape: (1, z, R, C) with R and C whole tiles."""
    return len(shape) == 4 and shape[0] == 1 and shape[2] % TILE == 0 and shape[3] % TILE == 0


def _buda_graph_problems(graph: Graph) -> Iterator[str]:
    """What in `graph` breaks the Buda level: a tensor not (1, z, R, C) tile padded, an op that is not a Buda op
    type (a TM op among them: TMs are edge TMs here), an op of another shape than the registry infers."""
    for node in graph.nodes():
        if not _tile_padded(tuple(node.shape)):
            what = _op(node) if node.kind == "op" else f"{node.kind} {node.name!r}"
            yield f"{what} has shape {tuple(node.shape)}, not (1, z, R, C) with R and C multiples of {TILE}"
            continue
        if node.kind != "op":
            continue
        try:
            opdef = registry.get(node.op_type)
        except OpError as e:
            yield f"{_op(node)}: {e}"
            continue
        if not opdef.buda:
            tm = " (a TM op: at the Buda level TMs are edge TMs)" if opdef.kind == "tm" else ""
            yield f"{_op(node)} is not a Buda op type{tm}"
            continue
        problem = _inferred_shape_problem(graph, node)
        if problem is not None:
            yield problem


def _buda_problems(state: Any) -> Iterator[str]:
    """Every device segment a Buda graph (host segments stay framework graphs)."""
    for graph in state.device_graphs():
        yield from _buda_graph_problems(graph)


# --- placed ------------------------------------------------------------------------------------------------------

def _placed_problems(state: Any) -> Iterator[str]:
    """The Buda level, and one placement per device graph giving every op its op model and its place."""
    yield from _buda_problems(state)
    graphs = state.device_graphs()
    if len(state.placements) != len(graphs):
        yield f"{len(state.placements)} placements for {len(graphs)} device graphs"
        return
    for graph, placement in zip(graphs, state.placements):
        for node in graph.nodes("op"):
            if node.name not in placement.models:
                yield f"{_op(node)} has no op model"
            elif node.name not in placement.placed:
                yield f"{_op(node)} has no place (epoch and cores)"


# --- netlist -----------------------------------------------------------------------------------------------------

def _netlist_problems(state: Any) -> Iterator[str]:
    """One netlist (with its file and text) per device graph, each valid by the backend's rules, and the manifest."""
    graphs = state.device_graphs()
    counts = {len(state.netlists), len(state.netlist_paths), len(state.netlist_texts)}
    if counts != {len(graphs)}:
        yield (f"{len(state.netlists)} netlists, {len(state.netlist_paths)} files and {len(state.netlist_texts)} "
               f"texts for {len(graphs)} device graphs")
        return
    if state.manifest is None:
        yield "there is no run manifest"
    for path, netlist in zip(state.netlist_paths, state.netlists):
        errors = check_netlist(netlist, device=state.device)
        if errors:
            yield f"netlist {str(path)!r} breaks {len(errors)} backend rule(s), the first: {errors[0]}"


LEVELS: dict[str, Level] = {level.name: level for level in (
    Level("model", _model_problems),
    Level("framework", _framework_problems, graph=True),
    Level("buda", _buda_problems, graph=True),
    Level("placed", _placed_problems),
    Level("netlist", _netlist_problems),
)}
