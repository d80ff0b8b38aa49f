"""`pybuda.compile`: run the named stages on a model and return a CompiledModel.

Stages (each a CompileDepth; `compile_depth` stops after one, every stage's graph is kept):
    GENERATE_INITIAL_GRAPH   import (torch.export + TVM Relax) or trace (PyBudaModule)
    POST_INITIAL_GRAPH_PASS  decompose
    OPTIMIZED_GRAPH          optimize (TM cancellation, weight folding, consteval), host io transforms
    BUDA_GRAPH_PRE_PLACER    lower to Buda ops (4-D, tiles), data formats and fidelity
    BALANCER_PASS            op models, epochs and placement
    GENERATE_NETLIST         netlist YAML (written atomically)
"""
from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import numpy as np
import torch

from . import config as cfg
from .balancer import balance_and_place
from .device import get_device
from .frontend.pybuda_trace import trace_module
from .ir import Graph
from .module import PyBudaModule, to_numpy
from .codegen import build_netlist, sparse_queue_values
from .netlist import Netlist, NetlistError, check, write_netlist
from .netlist import load as load_netlist
from .passes.cpu_fallback import split_host_ops
from .passes.data_formats import assign_data_formats
from .passes.decompose import decompose
from .passes.host_io import hoist_io_transforms
from .passes.lower import lower
from .passes.optimize import optimize
from .verify import pcc, run_golden

CompileDepth = cfg.CompileDepth


class VerificationError(AssertionError):
    """A stage's golden outputs diverge from the framework's; the message names the first such stage."""


@dataclasses.dataclass
class StageCheck:
    stage: str
    pcc: float
    max_abs_error: float


class CompiledModel:
    """A compiled model: the netlist on disk, its estimate, every stage's graph; call it to simulate."""

    def __init__(self, name: str, device: str, config, microbatch: int):
        self.name = name
        self.device = device
        self.config = config
        self.microbatch = microbatch
        self.graphs: dict[str, Graph] = {}
        self.stage_times: dict[str, float] = {}
        self.checks: list[StageCheck] = []
        self.placement = None
        self.input_names: list[str] = []
        self.host_graph: Graph | None = None   # ops run on the host before the device (CPU fallback)
        self.netlist_path: Path | None = None
        self.netlist: Netlist | None = None      # the typed model of the netlist file
        self._perf = None

    @property
    def device_graph(self) -> Graph:
        return self.graphs["lower"]

    @property
    def perf(self):
        """The simulator's performance estimate of the netlist (computed once, on first use)."""
        if self._perf is None:
            self._require_netlist()
            from .backend_sim.timing import estimate
            self._perf = estimate(self.netlist, device=self.device)
        return self._perf

    def _require_netlist(self) -> None:
        if self.netlist_path is None:
            raise RuntimeError(f"model {self.name!r} was compiled to depth {self.config.compile_depth.name}; "
                               "there is no netlist to run (compile with compile_depth=FULL)")

    def __call__(self, *inputs):
        """Run the netlist in the backend simulator on a microbatch of torch tensors; returns torch tensors."""
        self._require_netlist()
        from .backend_sim.executor import Simulator
        from .verify import host_inputs, host_outputs, sample_feeds

        if len(inputs) != len(self.input_names):
            raise ValueError(f"model {self.name!r} takes {len(self.input_names)} inputs "
                             f"({', '.join(self.input_names)}), got {len(inputs)}")
        batch = {name: to_numpy(x) for name, x in zip(self.input_names, inputs)}
        n = next(iter(batch.values())).shape[0]
        if n != self.microbatch:
            raise ValueError(f"model {self.name!r} was compiled for microbatch {self.microbatch}, got {n} samples")
        graph = self.device_graph
        sim = Simulator(self.netlist, device=self.device)
        for node in graph.nodes():
            if node.kind in ("parameter", "constant") and node.name in self.netlist.queues:
                sim.push(node.name, node.value.reshape(1, *node.value.shape[-3:]))
        for queue, value in sparse_queue_values(graph, self.placement).items():
            sim.push(queue, value.reshape(1, *value.shape[-3:]))
        samples = [host_inputs(graph, sample_feeds(self.host_graph, {k: v[i:i + 1] for k, v in batch.items()}))
                   for i in range(n)]
        for node in graph.inputs():
            sim.push(node.name, np.stack([s[node.name].reshape(node.shape[-3:]) for s in samples]))
        sim.run(p_loop_count=1)
        popped = {o.name: np.stack([sim.pop(o.name) for _ in range(n)]) for o in graph.outputs()}
        outs = host_outputs(graph, popped)
        tensors = [torch.from_numpy(np.ascontiguousarray(o)) for o in outs]
        return tensors[0] if len(tensors) == 1 else tuple(tensors)

    def summary(self) -> str:
        """Where ops run (host fallback vs device), the netlist, epochs, cores and the estimate."""
        lines = [f"model {self.name} on {self.device}, microbatch {self.microbatch}"]
        host_ops = [n.name for n in self.host_graph.nodes("op")] if self.host_graph is not None else []
        lines.append(f"host (CPU fallback) ops: {', '.join(host_ops) if host_ops else 'none'}")
        if "lower" in self.graphs:
            lines.append(f"device ops: {len(self.device_graph.op_names())}")
        if self.netlist_path:
            perf = self.perf
            lines.append(f"netlist: {self.netlist_path}")
            lines.append(f"epochs: {len(perf.epochs)}; cores per epoch: {[e.cores for e in perf.epochs]}")
            lines.append(f"estimated samples/second: {perf.samples_per_second:,.1f}")
        return "\n".join(lines)


def _check(model: CompiledModel, stage: str, graph: Graph, batch: dict[str, np.ndarray],
           expected: list[np.ndarray]):
    got = run_golden(graph, batch, model.host_graph)
    worst = None
    for g, e in zip(got, expected):
        if g.shape != e.shape:
            raise VerificationError(f"stage {stage!r}: output shape {g.shape} != framework {e.shape}")
        check = StageCheck(stage, pcc(g, e), float(np.max(np.abs(g - e))) if g.size else 0.0)
        worst = check if worst is None or check.pcc < worst.pcc else worst
    model.checks.append(worst)
    if not worst.pcc >= 0.999:
        raise VerificationError(f"stage {stage!r} diverges from the framework: pcc {worst.pcc:.6f}, max abs error "
                                f"{worst.max_abs_error:.3g} (the stage before it matched)")


def compile(model, *sample_inputs, device: str = "e150", config: cfg.CompilerConfig | None = None,
            output_dir: str | Path | None = None, verify: bool | None = None) -> CompiledModel:
    """Compile a torch.nn.Module or PyBudaModule for `device` ("e75", "e150", "n150", "n300").

    The leading dim of the sample inputs is the microbatch. `config` defaults to the global config.
    With `verify` (or `config.verify`) every stage's graph is evaluated and compared with the framework."""
    spec = get_device(device)
    config = (config or cfg._get_global_compiler_config()).copy()
    if not sample_inputs:
        raise ValueError("compile needs sample inputs (a microbatch of each model input)")
    sample_inputs = tuple(x if isinstance(x, torch.Tensor) else torch.as_tensor(x) for x in sample_inputs)
    microbatch = int(sample_inputs[0].shape[0])
    verify = config.verify if verify is None else verify
    name = model.get_name() if isinstance(model, PyBudaModule) else type(model).__name__
    result = CompiledModel(name, device, config, microbatch)
    depth = config.compile_depth

    expected = _framework_outputs(model, sample_inputs) if verify else None
    batch: dict[str, np.ndarray] = {}

    def stage(key: str, stage_depth, fn):
        start = time.perf_counter()
        out = fn()
        result.stage_times[key] = time.perf_counter() - start
        if isinstance(out, Graph):
            result.graphs[key] = out
            if verify:
                _check(result, key, out, batch, expected)
        return out, stage_depth >= depth

    def initial_stage():
        initial = _initial_graph(model, sample_inputs, config)
        result.input_names = list(initial.input_names)
        batch.update({n: to_numpy(x) for n, x in zip(result.input_names, sample_inputs)})
        return initial

    graph, stop = stage("initial_graph", CompileDepth.GENERATE_INITIAL_GRAPH, initial_stage)
    if stop:
        return result
    graph, stop = stage("decompose", CompileDepth.POST_INITIAL_GRAPH_PASS, lambda: decompose(graph.copy(), config))
    if stop:
        return result
    def optimize_stage():
        optimized = optimize(graph.copy(), config)
        result.host_graph, device_graph = split_host_ops(optimized, config)
        return hoist_io_transforms(device_graph, config)

    graph, stop = stage("optimize", CompileDepth.OPTIMIZED_GRAPH, optimize_stage)
    if stop:
        return result
    bgraph, stop = stage("lower", CompileDepth.BUDA_GRAPH_PRE_PLACER,
                         lambda: assign_data_formats(lower(graph, config), config, spec.arch))
    cfg.check_override_names(config, bgraph.op_names())
    if stop:
        return result
    result.placement, stop = stage("balance", CompileDepth.BALANCER_PASS,
                                   lambda: balance_and_place(bgraph, spec, config, microbatch))
    if stop:
        return result
    out_dir = Path(output_dir or config.backend_output_dir)
    path = out_dir / f"{name}_netlist.yaml"

    def netlist():
        nl = build_netlist(bgraph, result.placement, spec, config, microbatch)
        errors = check(nl, device=spec)
        if errors:
            raise NetlistError(errors, header=f"the compiled netlist breaks {len(errors)} backend rule(s) "
                                              "(compiler bug):")
        header = f"# pybuda netlist: model {name}, device {device}, microbatch {microbatch}"
        return write_netlist(nl, path, header)

    result.netlist_path, _ = stage("netlist", CompileDepth.GENERATE_NETLIST, netlist)
    result.netlist = load_netlist(result.netlist_path)
    return result


def _initial_graph(model, sample_inputs, config) -> Graph:
    if isinstance(model, PyBudaModule):
        return trace_module(model, sample_inputs)
    if isinstance(model, torch.nn.Module):
        from .frontend.torch_import import import_torch
        from .frontend.tvm_cache import cached_import
        return cached_import(model, sample_inputs, config,
                             lambda m, x: import_torch(m, x, name=type(model).__name__))
    raise TypeError(f"compile takes a torch.nn.Module or a PyBudaModule, got {type(model).__name__}")


def _framework_outputs(model, sample_inputs) -> list[np.ndarray]:
    """The reference outputs: torch's for a torch module, the traced graph's golden eval for a PyBudaModule."""
    if isinstance(model, torch.nn.Module):
        with torch.no_grad():
            out = model.eval()(*sample_inputs)
        return [to_numpy(o) for o in torch.utils._pytree.tree_leaves(out) if isinstance(o, torch.Tensor)]
    traced = trace_module(model, sample_inputs)
    return run_golden(traced, {n: to_numpy(x) for n, x in zip(traced.input_names, sample_inputs)})
