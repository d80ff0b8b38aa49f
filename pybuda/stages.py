"""The compile pipeline as data: a declared list of named stages over one `CompileState`.

A `Stage` is a function `CompileState -> CompileState` with the graph level it requires and the level it ensures:
    model       nothing built yet: the framework model and its sample inputs
    framework   a PyBuda graph: framework (logical) shapes, one sample, no edge TMs
    buda        the lowered Buda graph: 4-D tile-padded tensors, Buda op types, edge TMs
    placed      the Buda graph plus the balancer's placement (op models, epochs, grid locations)
    netlist     the netlist written and validated, its run manifest and arrays built
`pybuda.compile` runs `STAGES` (or a list given to it) with `run_stages`, which checks that each stage's required
level is the one the stages before it leave. Adding a stage (autograd, t-streaming, fusion, fork-join) is one
entry of the list; `compile_depth` names a stage (or a legacy `CompileDepth`, mapped by `Stage.legacy`).
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import torch

from . import config as cfg
from .balancer import balance_and_place
from .balancer.policy import Placement
from .codegen import ModelInput, RunManifest, build_manifest, build_netlist
from .config import CompileDepth
from .device import DeviceSpec
from .frontend.pybuda_trace import trace_module
from .ir import Graph
from .module import PyBudaModule
from .netlist import Netlist, NetlistError, check, write_netlist
from .netlist import load as load_netlist
from .passes.cpu_fallback import split_host_ops
from .passes.data_formats import assign_data_formats
from .passes.decompose import decompose
from .passes.host_io import hoist_io_transforms
from .passes.lower import lower
from .passes.optimize import optimize

LEVELS = ("model", "framework", "buda", "placed", "netlist")
GRAPH_LEVELS = ("framework", "buda")   # a stage that ensures one of these produces a graph (kept, verified)


class StageError(ValueError):
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
    graph: Graph | None = None                 # the current graph (framework, then Buda)
    host_graph: Graph | None = None            # CPU fallback ops, run on the host before the device
    placement: Placement | None = None
    netlist: Netlist | None = None
    netlist_path: Path | None = None
    netlist_text: str | None = None
    manifest: RunManifest | None = None
    arrays: dict[str, np.ndarray] = dataclasses.field(default_factory=dict)   # queue and host data by name


@dataclasses.dataclass(frozen=True)
class Stage:
    """One named stage: `run` takes the state at level `requires` and returns it at level `ensures`; `legacy`
    lists the CompileDepth values that stop after this stage."""

    name: str
    run: Callable[[CompileState], CompileState]
    requires: str
    ensures: str
    legacy: tuple[CompileDepth, ...] = ()

    def __post_init__(self):
        for which in ("requires", "ensures"):
            if getattr(self, which) not in LEVELS:
                raise StageError(f"stage {self.name!r}: {which} {getattr(self, which)!r} is not a level; levels: "
                                 f"{', '.join(LEVELS)}")

    @property
    def produces_graph(self) -> bool:
        return self.ensures in GRAPH_LEVELS


# --- the stages -------------------------------------------------------------------------------------------------

def initial_graph_stage(state: CompileState) -> CompileState:
    """Import a torch.nn.Module (torch.export + TVM Relax, cached) or trace a PyBudaModule."""
    model, inputs = state.model, state.sample_inputs
    if isinstance(model, PyBudaModule):
        graph = trace_module(model, inputs)
    elif isinstance(model, torch.nn.Module):
        from .frontend.torch_import import import_torch
        from .frontend.tvm_cache import cached_import
        graph = cached_import(model, inputs, state.config, lambda m, x: import_torch(m, x, name=type(model).__name__))
    else:
        raise TypeError(f"compile takes a torch.nn.Module or a PyBudaModule, got {type(model).__name__}")
    return dataclasses.replace(state, graph=graph, input_names=list(graph.input_names))


def decompose_stage(state: CompileState) -> CompileState:
    """Simplify, fold and decompose ops into registry primitives (to a fixpoint)."""
    return dataclasses.replace(state, graph=decompose(state.graph.copy(), state.config))


def optimize_stage(state: CompileState) -> CompileState:
    """TM cancellation, weight folding, consteval."""
    return dataclasses.replace(state, graph=optimize(state.graph.copy(), state.config))


def cpu_fallback_stage(state: CompileState) -> CompileState:
    """Split the ops of `cpu_fallback_ops` (and their ancestors) into the host graph."""
    host, device = split_host_ops(state.graph, state.config)
    return dataclasses.replace(state, graph=device, host_graph=host)


def host_io_stage(state: CompileState) -> CompileState:
    """TMs on graph inputs and outputs become host transforms."""
    return dataclasses.replace(state, graph=hoist_io_transforms(state.graph.copy(), state.config))


def lower_stage(state: CompileState) -> CompileState:
    """Lower to Buda ops (4-D, tiles, edge TMs); every override must name an op of the lowered graph."""
    graph = lower(state.graph, state.config, state.device.arch)
    cfg.check_override_names(state.config, graph.op_names())
    return dataclasses.replace(state, graph=graph)


def data_formats_stage(state: CompileState) -> CompileState:
    """Data formats, accumulation and intermediate formats, math fidelity (AMP and mixed-precision rules)."""
    return dataclasses.replace(state, graph=assign_data_formats(state.graph.copy(), state.config,
                                                                state.device.arch))


def balance_stage(state: CompileState) -> CompileState:
    """Op models, epochs and core placement."""
    return dataclasses.replace(state, placement=balance_and_place(state.graph, state.device, state.config,
                                                                  state.microbatch))


def netlist_stage(state: CompileState) -> CompileState:
    """Build the netlist and the run manifest, validate the netlist against the backend's rules, write it
    atomically to `<output_dir>/<model>_netlist.yaml`."""
    nl = build_netlist(state.graph, state.placement, state.device, state.config, state.microbatch)
    errors = check(nl, device=state.device)
    if errors:
        raise NetlistError(errors, header=f"the compiled netlist breaks {len(errors)} backend rule(s) (compiler bug):")
    inputs = [ModelInput(name, tuple(x.shape), str(x.dtype).removeprefix("torch."))
              for name, x in zip(state.input_names, state.sample_inputs)]
    manifest, arrays = build_manifest(state.name, state.device.name, state.microbatch, inputs, state.graph,
                                      state.placement, state.host_graph, nl)
    header = f"# pybuda netlist: model {state.name}, device {state.device.name}, microbatch {state.microbatch}"
    path = write_netlist(nl, state.output_dir / f"{state.name}_netlist.yaml", header)
    # the compiled model runs from exactly what a TTI image stores: the written text and the manifest's file form
    return dataclasses.replace(state, netlist=load_netlist(path), netlist_path=path, netlist_text=path.read_text(),
                               manifest=RunManifest.from_json(manifest.to_json()), arrays=arrays)


STAGES: tuple[Stage, ...] = (
    Stage("initial_graph", initial_graph_stage, "model", "framework",
          (CompileDepth.INIT_COMPILE, CompileDepth.GENERATE_INITIAL_GRAPH)),
    Stage("decompose", decompose_stage, "framework", "framework", (CompileDepth.POST_INITIAL_GRAPH_PASS,)),
    Stage("optimize", optimize_stage, "framework", "framework",
          (CompileDepth.CONSTEVAL_GRAPH, CompileDepth.POST_PATTERN_MATCHER, CompileDepth.OPTIMIZED_GRAPH)),
    Stage("cpu_fallback", cpu_fallback_stage, "framework", "framework"),
    Stage("host_io", host_io_stage, "framework", "framework",
          (CompileDepth.AUTOGRAD, CompileDepth.POST_AUTOGRAD_PASS, CompileDepth.PRE_LOWERING_PASS)),
    Stage("lower", lower_stage, "framework", "buda"),
    Stage("data_formats", data_formats_stage, "buda", "buda", (CompileDepth.BUDA_GRAPH_PRE_PLACER,)),
    Stage("balance", balance_stage, "buda", "placed", (CompileDepth.BALANCER_PASS, CompileDepth.PRE_NETLIST_PASS)),
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


def run_stages(stages: list[Stage] | tuple[Stage, ...], state: CompileState,
               stop_after: str | None = None) -> Iterator[tuple[Stage, CompileState, float]]:
    """Check the list, then run its stages in order (through `stop_after`), yielding each stage, the state it
    returned and the seconds it took."""
    check_stages(stages)
    for stage in stages:
        start = time.perf_counter()
        state = stage.run(state)
        yield stage, state, time.perf_counter() - start
        if stage.name == stop_after:
            return
