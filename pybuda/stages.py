"""The compile pipeline as data: a declared list of named stages over one `CompileState`.

A `Stage` is a function `CompileState -> CompileState` with the graph level it requires and the level it ensures
(`pybuda.levels`: model, framework, buda, placed, netlist, each with the check of its contract).
After `cpu_fallback` the model is a list of host and device segments (`CompileState.segments`); the stages after it
work on every device segment, and `graph` is the first device segment's graph.
`pybuda.compile` runs `STAGES` (or a list given to it) with `run_stages`, which checks that each stage's required
level is the one the stages before it leave, and that the state each stage leaves meets the contract of the level it
ensures. Adding a stage (autograd, t-streaming, fusion, fork-join) is one entry of the list; `compile_depth` names a
stage (or a legacy `CompileDepth`, mapped by `Stage.legacy`).
"""
from __future__ import annotations

import dataclasses
from functools import partial
import hashlib
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import torch

from . import config as cfg
from .balancer import balance_and_place
from .balancer.policy import Placement
from .balancer.schedule import check_orderings
from .codegen import ModelInput, RunManifest, build_manifest, build_netlist
from .config import CompileDepth
from .device import DeviceSpec
from .errors import InternalError, PyBudaError, UserInputError, UserTypeError
from .files import safe_file_stem, write_atomically
from .frontend.generation import PagedStep
from .frontend.pybuda_trace import trace_module
from .ir import Graph
from .levels import LEVELS, check_level
from .module import PyBudaModule, to_numpy
from .netlist import CompiledNetlistError, Netlist, check, netlist_text
from .netlist import load as load_netlist
from .passes.autograd import recompute, training_graph
from .passes.cpu_fallback import DEVICE, Segment, partition
from .passes.data_formats import assign_data_formats
from .passes.decompose import decompose
from .passes.fracture import fracture
from .passes.fuse import fuse
from .passes.host_io import hoist_io_transforms
from .passes.fan_out import over_limit, split_fan_out
from .passes.insert_nops import insert_nops
from .passes.split_broadcasts import split_broadcasts
from .passes.intermediates import save_intermediates
from .passes.loopback import link_loopbacks
from .passes.lower import lower
from .passes.optimize import optimize
from .passes.t_stream import apply_streaming

class StageError(UserInputError):
    """A malformed stage list, or a compile_depth that names no stage of it."""


@dataclasses.dataclass
class CompileState:
    """Everything the stages read and produce. Stages return an updated copy (`dataclasses.replace`)."""

    model: Any
    sample_inputs: tuple
    config: cfg.CompilerConfig
    device: DeviceSpec
    microbatch: int
    name: str
    output_dir: Path
    input_names: list[str] = dataclasses.field(default_factory=list)
    output_names: list[str] = dataclasses.field(default_factory=list)
    graph: Graph | None = None                 # the current graph (framework, then the first device segment's)
    segments: tuple[Segment, ...] = ()         # after cpu_fallback: host and device segments in run order
    placements: tuple[Placement, ...] = ()     # one per device segment
    netlists: tuple[Netlist, ...] = ()         # one per device segment, as loaded back from its file
    netlist_paths: tuple[Path, ...] = ()
    netlist_texts: tuple[str, ...] = ()
    manifest: RunManifest | None = None
    arrays: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)   # queue and host data by name
    output_structure: dict | None = None       # how the torch model nests its outputs (None: PyBudaModule)
    optimizer: Any = None                      # training: a pybuda.optimizers.Optimizer (None: inference)

    def parts(self) -> tuple[Segment, ...]:
        """The segments, the first device segment's graph being `graph` (a stage may have replaced it); before
        cpu_fallback, the one graph as a device segment."""
        if not self.segments:
            return (Segment(DEVICE, self.graph),)
        first = next((i for i, s in enumerate(self.segments) if s.on_device), None)
        return tuple(s.with_graph(self.graph) if i == first else s for i, s in enumerate(self.segments))

    def device_graphs(self) -> list[Graph]:
        return [s.graph for s in self.parts() if s.on_device]


@dataclasses.dataclass(frozen=True)
class Stage:
    """One named stage: `run` takes the state at level `requires` and returns it at level `ensures`; `legacy`
    lists the CompileDepth values that stop after this stage."""

    name: str
    run: Callable[[CompileState], CompileState]
    requires: str
    ensures: str
    legacy: tuple[CompileDepth, ...] = ()
    edits_graph: bool = False     # a stage at the placed level that edits the graph (kept and verified)

    def __post_init__(self):
        for which in ("requires", "ensures"):
            if getattr(self, which) not in LEVELS:
                raise StageError(f"stage {self.name!r}: {which} {getattr(self, which)!r} is not a level; levels: "
                                 f"{', '.join(LEVELS)}")

    @property
    def produces_graph(self) -> bool:
        """A stage that ensures a graph level (framework, buda), or edits the graph: its graph is kept, verified."""
        return LEVELS[self.ensures].graph or self.edits_graph


# --- the stages -------------------------------------------------------------------------------------------------

def initial_graph_stage(state: CompileState) -> CompileState:
    """Import a torch.nn.Module (checked to treat the leading dim as a microbatch, then torch.export + TVM Relax,
    cached) or trace a PyBudaModule."""
    model, inputs = state.model, state.sample_inputs
    structure = None
    if isinstance(model, PyBudaModule):
        graph = trace_module(model, inputs)
    elif isinstance(model, torch.nn.Module):
        from .frontend.microbatch import check_per_sample
        from .frontend.outputs import output_structure
        from .frontend.meta import holds_meta_weights
        from .frontend.torch_import import export_model, import_program
        from .frontend.tvm_cache import cached_import
        shape_only = holds_meta_weights(model)
        # (a meta-device model computes nothing to compare; a decode step is written for one sequence a sample)
        if not shape_only and not isinstance(model, PagedStep):
            check_per_sample(model.eval(), inputs)
        exported = export_model(model, inputs)
        structure = output_structure(exported.program.call_spec.out_spec)
        imported = partial(import_program, exported, name=state.name)
        graph = imported() if shape_only else cached_import(exported.program, model, state.config, imported)
    else:
        raise UserTypeError(f"compile takes a torch.nn.Module or a PyBudaModule, got {type(model).__name__}")
    if state.optimizer is not None:
        for node in graph.nodes("parameter"):
            if node.requires_grad:
                node.role = "trained"
    if state.config.loopback_outputs:
        if state.optimizer is not None:
            raise UserInputError("loopback_outputs in a training compile is not supported: compile the model "
                                 "for inference (without loss= and optimizer=) to keep state on the device")
        names = list(graph.input_names)
        looped, removed = link_loopbacks(graph, state.config.loopback_outputs,
                                         {n: to_numpy(x) for n, x in zip(names, inputs)})
        inputs = tuple(x for n, x in zip(names, inputs) if n not in looped)
        if structure is not None:
            from .frontend.outputs import without_leaves
            structure = without_leaves(structure, removed)
    return dataclasses.replace(state, graph=graph, input_names=list(graph.input_names), sample_inputs=inputs,
                               output_names=[o.name for o in graph.outputs() if o.loopback is None],
                               output_structure=structure)


def decompose_stage(state: CompileState) -> CompileState:
    """Simplify, fold and decompose ops into registry primitives (to a fixpoint); overrides that name framework
    ops (a conv's fracture factor) must name one of this graph's."""
    cfg.check_override_names(state.config, state.graph.op_names(), framework=True)
    return dataclasses.replace(state, graph=decompose(state.graph.copy(), state.config))


def fracture_stage(state: CompileState) -> CompileState:
    """The ops of `fracture_groups` split into pieces along a dim (`passes/fracture.py`)."""
    if not state.config.fracture_groups:
        return state
    return dataclasses.replace(state, graph=fracture(state.graph.copy(), state.config.fracture_groups))


def optimize_stage(state: CompileState) -> CompileState:
    """TM cancellation, weight folding, consteval."""
    return dataclasses.replace(state, graph=optimize(state.graph.copy(), state.config))


def autograd_stage(state: CompileState) -> CompileState:
    """Training: the backward ops of the trained parameters, their gradient accumulators and the optimizer's
    updates (none with `optimizer_on_host`; `passes/autograd.py`; with `enable_recompute`, the forward values the
    backward ops read computed again there), decomposed like the forward ops; inference: nothing."""
    if state.optimizer is None:
        return state
    graph = training_graph(state.graph.copy(), state.optimizer, state.config.compensated_parameter_updates,
                           on_host=state.config.optimizer_on_host)
    if state.config.enable_recompute:
        graph = recompute(graph)
    return dataclasses.replace(state, graph=optimize(decompose(graph, state.config), state.config))


def cpu_fallback_stage(state: CompileState) -> CompileState:
    """Partition the graph into host segments (the ops of `cpu_fallback_ops` and the ops they take along) and
    device segments; the stages after it work on every device segment."""
    return _with_segments(state, partition(state.graph, state.config))


def _on_device(state: CompileState, fn: Callable[[Graph], Graph]) -> CompileState:
    """The state with `fn` applied to every device segment's graph."""
    return _with_segments(state, tuple(s.with_graph(fn(s.graph)) if s.on_device else s for s in state.parts()))


def _with_segments(state: CompileState, segments: tuple[Segment, ...]) -> CompileState:
    """The state holding `segments`; `graph` becomes the first device segment's (None: all on the host)."""
    return dataclasses.replace(state, segments=segments, graph=next((s.graph for s in segments if s.on_device), None))


def host_io_stage(state: CompileState) -> CompileState:
    """TMs on graph inputs and outputs become host transforms."""
    return _on_device(state, lambda g: hoist_io_transforms(g.copy(), state.config))


def lower_stage(state: CompileState) -> CompileState:
    """Lower to Buda ops (4-D, tiles, edge TMs)."""
    return _on_device(state, lambda g: lower(g, state.config, state.device.arch))


def data_formats_stage(state: CompileState) -> CompileState:
    """Data formats, accumulation and intermediate formats, math fidelity (AMP and mixed-precision rules)."""
    return _on_device(state, lambda g: assign_data_formats(g.copy(), state.config, state.device.arch))


def fuse_stage(state: CompileState) -> CompileState:
    """Fuse groups of small ops into fused ops (`enable_auto_fusing`, `dont_fuse`, `manual_fuse`), the
    `pybuda.query` predicates of the overrides first resolved to the ops they match and the edges out of DRAMQueue
    ops added to `insert_queues`; every override must then name an op of a device graph (an op that was fused away,
    or a fused op `_fused_op_<k>`)."""
    before = [op for g in state.device_graphs() for op in g.op_names()]
    config = _with_dram_queue_edges(cfg.resolve_predicates(state.config, [n for g in state.device_graphs()
                                                                           for n in g.nodes("op")]),
                                    state.device_graphs())
    state = _on_device(dataclasses.replace(state, config=config), lambda g: fuse(g.copy(), config, state.device.arch))
    cfg.check_override_names(state.config, before + [op for g in state.device_graphs() for op in g.op_names()])
    return state


def _with_dram_queue_edges(config: cfg.CompilerConfig, graphs: list[Graph]) -> cfg.CompilerConfig:
    """`config` with an `insert_queues` entry for every op edge out of a legacy DRAMQueue op (`pybuda.op.DRAMQueue`:
    its readers read it through a DRAM queue)."""
    edges = [(n.name, user, port) for g in graphs for n in g.nodes("op") if n.framework_op_type == "dram_queue"
             for user, port in g.users(n.name) if g.node(user).kind == "op"]
    new = [e for e in edges if e not in config.insert_queues]
    if not new:
        return config
    config = config.copy()
    config.insert_queues = [*config.insert_queues, *new]
    return config


def insert_nops_stage(state: CompileState) -> CompileState:
    """The NOPs `insert_nop` / `insert_buffering_nop` ask for on edges of the Buda graph (`passes/insert_nops.py`),
    with `enable_broadcast_splitting` NOPs between the broadcasts of an edge (`passes/split_broadcasts.py`), then
    fan-out NOPs where an op feeds more data users than the backend allows (`passes/fan_out.py`)."""
    limit = state.device.op_consumers
    config = state.config
    if not (config.buffering_nops_to_insert or config.enable_broadcast_splitting
            or any(over_limit(g, limit) for g in state.device_graphs())):
        return state

    def inserted(graph: Graph) -> Graph:
        graph = insert_nops(graph.copy(), config)
        return split_fan_out(split_broadcasts(graph) if config.enable_broadcast_splitting else graph, limit)
    return _on_device(state, inserted)


def save_intermediates_stage(state: CompileState) -> CompileState:
    """A graph output for each op `op_intermediates_to_save` names (`passes/intermediates.py`; before the fan-out
    NOPs, which count it as a user); the fuse stage checked the names. Inference compiles only."""
    names = state.config.op_intermediates_to_save
    if not names:
        return state
    if state.optimizer is not None:
        raise UserInputError(f"op_intermediates_to_save ({', '.join(map(repr, names))}): intermediates are saved in "
                             "inference compiles only; compile without the optimizer to read them")
    return _on_device(state, lambda g: save_intermediates(g.copy(), names))


def balance_stage(state: CompileState) -> CompileState:
    """Op models, epochs and core placement of every device segment."""
    check_orderings(state.config.scheduler_constraints, list(state.device_graphs()))
    return dataclasses.replace(state, placements=tuple(
        balance_and_place(g, state.device, state.config, state.microbatch) for g in state.device_graphs()))


def t_stream_stage(state: CompileState) -> CompileState:
    """The balancer's t-streaming choices as graph edits: streamed ops' shapes and every edge's slice, stack and
    replay TMs (`passes/t_stream.py`)."""
    graphs = iter(tuple(apply_streaming(g.copy(), {n: m.t_stream for n, m in p.models.items() if m.t_stream})
                        for g, p in zip(state.device_graphs(), state.placements)))
    return _with_segments(state, tuple(s.with_graph(next(graphs)) if s.on_device else s for s in state.parts()))


def netlist_stage(state: CompileState) -> CompileState:
    """Build one netlist per device segment and the run manifest, validate each netlist against the backend's
    rules, write it atomically to `<output_dir>/<model>_<10 hex of its content>_netlist.yaml` (the k-th after the
    first: `..._netlist_<k>.yaml`): models of one class with other graphs or configs get other files, the same
    model and config the same files, byte for byte."""
    netlists, paths, texts = [], [], []
    header = f"# pybuda netlist: model {state.name}, device {state.device.name}, microbatch {state.microbatch}"
    for k, (graph, placement) in enumerate(zip(state.device_graphs(), state.placements)):
        nl = build_netlist(graph, placement, state.device, state.config, state.microbatch)
        errors = check(nl, device=state.device)
        if errors:
            raise CompiledNetlistError(errors, state.name)
        netlists.append(nl)
        text = netlist_text(nl, header)
        digest = hashlib.sha256(text.encode()).hexdigest()[:10]
        name = f"{safe_file_stem(state.name)}_{digest}_netlist{f'_{k}' if k else ''}.yaml"
        paths.append(write_atomically(state.output_dir / name, lambda f, text=text: f.write(text), binary=False))
        texts.append(text)
    inputs = [ModelInput(name, tuple(x.shape), str(x.dtype).removeprefix("torch."))
              for name, x in zip(state.input_names, state.sample_inputs)]
    manifest, arrays = build_manifest(state.name, state.device.name, state.microbatch, inputs, state.output_names,
                                      state.parts(), state.placements, netlists, state.output_structure,
                                      state.model.generation if isinstance(state.model, PagedStep) else None)
    # the compiled model runs from exactly what a TTI image stores: the written texts and the manifest's file form
    return dataclasses.replace(state, netlists=tuple(load_netlist(t) for t in texts), netlist_paths=tuple(paths),
                               netlist_texts=tuple(texts),
                               manifest=RunManifest.from_json(manifest.to_json()), arrays=arrays)


STAGES: tuple[Stage, ...] = (
    Stage("initial_graph", initial_graph_stage, "model", "framework",
          (CompileDepth.INIT_COMPILE, CompileDepth.GENERATE_INITIAL_GRAPH)),
    Stage("decompose", decompose_stage, "framework", "framework", (CompileDepth.POST_INITIAL_GRAPH_PASS,)),
    Stage("fracture", fracture_stage, "framework", "framework"),
    Stage("optimize", optimize_stage, "framework", "framework",
          (CompileDepth.CONSTEVAL_GRAPH, CompileDepth.POST_PATTERN_MATCHER, CompileDepth.OPTIMIZED_GRAPH)),
    Stage("autograd", autograd_stage, "framework", "framework", (CompileDepth.AUTOGRAD,)),
    Stage("cpu_fallback", cpu_fallback_stage, "framework", "framework"),
    Stage("host_io", host_io_stage, "framework", "framework",
          (CompileDepth.POST_AUTOGRAD_PASS, CompileDepth.PRE_LOWERING_PASS)),
    Stage("lower", lower_stage, "framework", "buda"),
    Stage("data_formats", data_formats_stage, "buda", "buda"),
    Stage("fuse", fuse_stage, "buda", "buda", (CompileDepth.BUDA_GRAPH_PRE_PLACER,)),
    Stage("save_intermediates", save_intermediates_stage, "buda", "buda"),
    Stage("insert_nops", insert_nops_stage, "buda", "buda"),
    Stage("balance", balance_stage, "buda", "placed", (CompileDepth.BALANCER_PASS,)),
    Stage("t_stream", t_stream_stage, "placed", "placed", (CompileDepth.PRE_NETLIST_PASS,), edits_graph=True),
    Stage("netlist", netlist_stage, "placed", "netlist",
          (CompileDepth.GENERATE_NETLIST, CompileDepth.BACKEND_GOLDEN_VERIFY)),
)


# --- running a list ---------------------------------------------------------------------------------------------

def check_stages(stages: list[Stage] | tuple[Stage, ...]) -> None:
    """StageError unless names are unique and each stage requires the level the stages before it leave."""
    if not stages:
        raise StageError("the stage list is empty")
    names = [s.name for s in stages]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise StageError(f"stage names must be unique; repeated: {', '.join(duplicates)}")
    level, before = "model", None
    for stage in stages:
        if stage.requires != level:
            after = f"stage {before.name!r} leaves the {level!r} level" if before else \
                f"nothing runs before it (level {level!r})"
            raise StageError(f"stage {stage.name!r} requires the {stage.requires!r} level, but {after}")
        level, before = stage.ensures, stage


def stop_stage(depth: CompileDepth | str, stages: list[Stage] | tuple[Stage, ...]) -> str:
    """The name of the stage `compile_depth` stops after: a stage name, or the stage whose `legacy` lists the
    CompileDepth (FULL: the last stage)."""
    names = [s.name for s in stages]
    if isinstance(depth, CompileDepth):
        if depth is CompileDepth.FULL:
            return names[-1]
        for stage in stages:
            if depth in stage.legacy:
                return stage.name
        raise StageError(f"compile_depth {depth.name} maps onto no stage of this stage list ({', '.join(names)})")
    if depth not in names:
        raise StageError(f"compile_depth {depth!r} names no stage; stage names: {', '.join(names)} (or a "
                         f"CompileDepth: {', '.join(d.name for d in CompileDepth)})")
    return depth


def run_stages(stages: list[Stage] | tuple[Stage, ...], state: CompileState, stop_after: str | None = None,
               on_start: Callable[[str], None] | None = None) -> Iterator[tuple[Stage, CompileState, float]]:
    """Check the list, then run its stages in order (through `stop_after`), yielding each stage, the state it
    returned and the seconds it took (`on_start(stage name)` is called before each). An error raised by a stage
    keeps its type and gets a note naming the stage and the model (shown with its traceback); an exception that
    is not a PyBudaError also gets a note asking for a report, since pybuda did not expect it. The state given must
    meet the first stage's required level and the state each stage returns the level it ensures
    (`pybuda.levels.check_level`, not timed: a ContractError naming the stage otherwise; about 1.5 % of a compile)."""
    check_stages(stages)
    check_level(stages[0].requires, state, stages[0].name, given=True)
    for stage in stages:
        if on_start is not None:
            on_start(stage.name)
        start = time.perf_counter()
        try:
            state = stage.run(state)
        except PyBudaError as e:
            e.add_note(f"raised in compile stage {stage.name!r} of model {state.name!r}")
            raise
        except Exception as e:
            e.add_note(f"raised in compile stage {stage.name!r} of model {state.name!r}; pybuda did not expect it: "
                       f"unless the model's own code raised it, {InternalError.REPORT}")
            raise
        seconds = time.perf_counter() - start
        check_level(stage.ensures, state, stage.name)
        yield stage, state, seconds
        if stage.name == stop_after:
            return
