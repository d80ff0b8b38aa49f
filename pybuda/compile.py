"""`pybuda.compile`: run the stage list (`pybuda.stages.STAGES`) on a model and return a CompiledModel.

Each stage is timed (`stage_times`), each graph-producing stage's graph is kept (`graphs`) and, with `verify`,
evaluated against the framework; `compile_depth` stops after a stage. `config.device_mode` CompileOnly also
saves a TTI image and returns a model that does not run; RunOnly loads a saved image instead of compiling.
"""
from __future__ import annotations

import contextlib
import dataclasses
import warnings
from pathlib import Path
from typing import Iterator

import numpy as np
import torch

from . import config as cfg
from .config import CompileDepth, DeviceMode
from .errors import UsageError, UserInputError, UserTypeError
from .progress import StageProgress
from .device import get_device
from .files import safe_file_stem, usable_output_dir
from .frontend.generation import paged_decoder
from .frontend.meta import holds_meta_weights
from .frontend.pybuda_trace import trace_module
from .ir import Graph
from .module import PyBudaModule, PyTorchModule, to_numpy
from .runtime import RuntimeModel
from .runtime.training import TrainingRuntime
from .runtime import load as load_tti
from .stages import STAGES, CompileState, Stage, check_stages, run_stages, stop_stage
from .training import TrainingReference, check_training, tensors
from .passes.cpu_fallback import Segment
from .runtime.loss import TrainingError
from .verify import (GRAPH_PCC_THRESHOLD, StageCheck, VerificationError, compare_ops, golden_gradients,
                     netlist_pcc_threshold, op_values, pcc, run_golden, run_segments)

DEFAULT_DEVICE = "e150"
# stages whose rewrites give ops new layouts under their names (channels-last convolutions, ops hoisted over TMs):
# `enable_op_level_comparision` checks them through their outputs only
RELAYOUT_STAGES = frozenset({"optimize"})


class CompiledModel:
    """A compiled model: every stage's graph and time, its segments (host and device parts, in run order), the
    placements, the netlists on disk (one per device part) and the estimate. Call it to simulate (the runtime runs
    it from the netlists, its run manifest and arrays); `save` writes a TTI image.

    `graphs`, `device_graph`, `placement` and `netlist_path` are those of the first device part (the only one
    unless a CPU fallback op sits between device ops); `segments`, `placements` and `netlist_paths` cover all."""

    def __init__(self, name: str, device: str, config, microbatch: int):
        self.name = name
        self.device = device
        self.config = config
        self.microbatch = microbatch
        self.graphs: dict[str, Graph] = {}
        self.stage_times: dict[str, float] = {}
        self.checks: list[StageCheck] = []
        self.input_names: list[str] = []
        self.segments: tuple[Segment, ...] = ()  # host (CPU fallback) and device parts, in run order
        self.device_graph: Graph | None = None   # the last Buda-level graph (of the first device part)
        self.placements: tuple = ()
        self.netlist_paths: tuple[Path, ...] = ()
        self.runtime: RuntimeModel | None = None  # netlist + run manifest + arrays (after the netlist stage)
        self.tti_path: Path | None = None         # the image written with device_mode CompileOnly
        self.training: TrainingRuntime | None = None  # a training compile: the device state and its step loop

    @property
    def placement(self):
        """The placement of the first device part (None before the balance stage or without device parts)."""
        return self.placements[0] if self.placements else None

    @property
    def netlist_path(self) -> Path | None:
        """The netlist file of the first device part (None before the netlist stage or without device parts)."""
        return self.netlist_paths[0] if self.netlist_paths else None

    @property
    def host_ops(self) -> list[str]:
        """The ops run on the host (CPU fallback), in run order."""
        return [n.name for s in self.segments if not s.on_device for n in s.graph.nodes("op")]

    @property
    def netlist(self):
        """The typed model of the first netlist file (None before the netlist stage)."""
        return self.runtime.netlist if self.runtime else None

    @property
    def netlists(self) -> list:
        """The typed model of every netlist file, one per device part, in run order."""
        return self.runtime.netlists if self.runtime else []

    @property
    def manifest(self):
        """The run manifest: what feeds every host-facing queue of the netlist (None before the netlist stage)."""
        return self.runtime.manifest if self.runtime else None

    @property
    def perf(self):
        """The simulator's performance estimate of every netlist, summed, and the host ops (computed once); of a
        training model, one training step of one microbatch (run_fwd, run_bwd and run_opt, or with optimizer_on_host
        the host optimizer's PCIe transfers)."""
        return self._require_runtime().perf

    def _require_training(self) -> TrainingRuntime:
        if self.training is None:
            raise UsageError(f"model {self.name!r} was compiled for inference; compile with loss=, optimizer= "
                             "and sample_targets= to train it")
        return self.training

    def train_step(self, *inputs, targets, accumulation_steps: int = 1) -> float:
        """One training step in the simulator (run_fwd and run_bwd per microbatch, then run_opt or the host
        optimizer) on
        `accumulation_steps` microbatches of inputs and targets; returns the mean loss."""
        return self._require_training().train_step(inputs, targets, accumulation_steps)

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The current (trained) parameters as torch tensors under the framework's names."""
        return self._require_training().state_dict()

    def get_parameter_checkpoint(self) -> dict[str, torch.Tensor]:
        """Legacy name of `state_dict`."""
        return self.state_dict()

    def get_parameter_gradients(self) -> dict[str, torch.Tensor]:
        """The last step's accumulated gradient of every trained parameter (legacy name)."""
        return self._require_training().gradients()

    def run_training(self, inputs: list[tuple], targets: list, epochs: int = 1, steps: int | None = None,
                     accumulation_steps: int = 1) -> list[float]:
        """Legacy loop: `epochs` passes over `steps` steps (default: all given), step k taking inputs[k] and
        targets[k] (each `accumulation_steps` microbatches); returns every step's loss."""
        steps = len(inputs) if steps is None else steps
        if steps > len(inputs) or len(inputs) != len(targets):
            raise UserInputError(f"run_training: {steps} steps need as many inputs and targets; got {len(inputs)} "
                                 f"inputs and {len(targets)} targets")
        return [self.train_step(*inputs[k], targets=targets[k], accumulation_steps=accumulation_steps)
                for _ in range(epochs) for k in range(steps)]

    def _require_runtime(self) -> RuntimeModel:
        if self.runtime is None:
            depth = self.config.compile_depth
            raise UsageError(f"model {self.name!r} was compiled to depth "
                             f"{depth.name if isinstance(depth, CompileDepth) else depth}; there is no netlist to "
                             "run (compile with compile_depth=FULL)")
        return self.runtime

    def generate(self, input_ids, max_new_tokens: int = 20, eos_token_id=None) -> torch.Tensor:
        """Greedy decoding with a compiled decode step (`RuntimeModel.generate`)."""
        return self._require_runtime().generate(input_ids, max_new_tokens, eos_token_id)

    def __call__(self, *inputs, cache_write_index: int | None = None, programs: list[str] | None = None):
        """Run the model's parts (host ops on the CPU, netlists in the backend simulator) on a microbatch of torch
        tensors; returns torch tensors. A model with paged state takes the page this run writes; `programs` runs
        chosen netlist programs only (`RuntimeModel.__call__`)."""
        runtime = self._require_runtime()
        if self.config.device_mode is DeviceMode.CompileOnly:
            raise UsageError(f"model {self.name!r} was compiled with device_mode CompileOnly: it was saved to "
                             f"{self.tti_path} and does not run here; run it with pybuda.load({str(self.tti_path)!r})"
                             " or compile with device_mode RunOnly")
        return runtime(*inputs, cache_write_index=cache_write_index, programs=programs)

    @property
    def intermediates(self) -> dict[str, torch.Tensor]:
        """The outputs of the ops `op_intermediates_to_save` names, by op name, as of the last call (framework
        layout; empty before the first: `verify` makes one during the compile)."""
        return self._require_runtime().intermediates

    def save(self, path: str | Path) -> Path:
        """Write the compiled model as one TTI image file (atomically); `pybuda.load(path)` runs it."""
        return self._require_runtime().save(path)

    def report(self, path: str | Path) -> Path:
        """Write the HTML report of this compile to `path` (one self-contained file; docs/user_guide.md)."""
        from .report import from_compiled, write_report
        return write_report(from_compiled(self), path)

    def summary(self) -> str:
        """Where ops run (host fallback vs device), the netlist, epochs, cores, the estimate and, per device part,
        the balancer's plan against its lower bound."""
        if self.runtime is not None:
            lines = [self.runtime.summary()]
        else:
            lines = [f"model {self.name} on {self.device}, microbatch {self.microbatch}",
                     f"host (CPU fallback) ops: {', '.join(self.host_ops) if self.host_ops else 'none'}"]
            if self.device_graph is not None:
                lines.append(f"device ops: {len(self.device_graph.op_names())}")
        for part, placement in enumerate(self.placements):
            bound = "" if placement.bounds is None else \
                f", lower bound {placement.lower_bound_cycles:,} cycles (plan/bound {placement.bound_ratio:.2f}x)"
            lines.append(f"balancer ({placement.policy}{f', part {part}' if len(self.placements) > 1 else ''}): "
                         f"plan {placement.estimated_cycles:,} cycles{bound}")
        return "\n".join(lines)


def _check(stage: str, segments: tuple[Segment, ...], outputs: list[str], batch: dict[str, np.ndarray],
           expected: list[np.ndarray]) -> StageCheck:
    return _compare(StageCheck(stage, 1.0, 0.0), run_segments(segments, batch, outputs), expected,
                    "(the stage before it matched)")


def _check_netlist(runtime: RuntimeModel, sample_inputs: tuple, expected: list[np.ndarray]) -> StageCheck:
    """The written netlists run in the backend simulator (host parts on the CPU) on the sample inputs, against the
    framework, with the PCC threshold of their least precise data format."""
    fmt, lofi, threshold = min((netlist_pcc_threshold(nl) for nl in runtime.netlists), key=lambda t: t[2])
    write_index = 0 if runtime.pages else None        # a paged state: the check writes its first page
    got = [to_numpy(o) for o in torch.utils._pytree.tree_leaves(runtime(*sample_inputs,
                                                                        cache_write_index=write_index))]
    check = StageCheck("netlist", 1.0, 0.0, fmt.value, threshold)
    return _compare(check, got, expected, f"(the netlist run in the backend simulator; {threshold} is the threshold "
                                          f"of its least precise data format {fmt.value}"
                                          f"{' with LoFi math' if lofi else ''})")


def _compare(check: StageCheck, got: list[np.ndarray], expected: list[np.ndarray], note: str) -> StageCheck:
    """`check` with the worst output's PCC and max abs error; VerificationError below its threshold."""
    worst = None
    for g, e in zip(got, expected):
        if g.shape != e.shape:
            raise VerificationError(f"stage {check.stage!r}: output shape {g.shape} != framework {e.shape}")
        this = dataclasses.replace(check, pcc=pcc(g, e), max_abs_error=float(np.max(np.abs(g - e))) if g.size else 0.0)
        worst = this if worst is None or this.pcc < worst.pcc else worst
    if not worst.pcc >= worst.threshold:
        raise VerificationError(f"stage {check.stage!r} diverges from the framework: pcc {worst.pcc:.6f} < "
                                f"{worst.threshold}, max abs error {worst.max_abs_error:.3g} {note}")
    return worst


def compile(model, *sample_inputs, device: str | None = None, config: cfg.CompilerConfig | None = None,
            output_dir: str | Path | None = None, verify: bool | None = None,
            stages: list[Stage] | tuple[Stage, ...] | None = None,
            tti_path: str | Path | None = None, loss=None, optimizer=None,
            sample_targets=None) -> CompiledModel | RuntimeModel:
    """Compile a torch.nn.Module or PyBudaModule for `device` ("e75", "e150" (default), "n150", "n300"; without it,
    the one `config.device_config` names).

    The leading dim of the sample inputs is the microbatch. `config` defaults to the global config.
    With `verify` (or `config.verify`) every stage's graph is evaluated and compared with the framework.
    `stages` replaces the stage list (default `pybuda.stages.STAGES`). `tti_path` is the TTI image that
    `config.device_mode` CompileOnly writes and RunOnly reads (default `<output_dir>/<model name>.tti`)."""
    config = (config or cfg._get_global_compiler_config()).copy()
    cfg.warn_ineffective(cfg.ineffective_options(config), "set in the config compile uses")
    out_dir = Path(output_dir or config.backend_output_dir).expanduser()
    if config.device_mode is DeviceMode.RunOnly:
        if model is None and tti_path is None:
            raise UserInputError("device_mode RunOnly loads a TTI image: give tti_path= (or the model, whose name "
                                 "gives the default path <output_dir>/<model name>.tti)")
        return _load_precompiled(model, sample_inputs, device, tti_path or _default_tti_path(out_dir, model))
    if tti_path is not None and config.device_mode is not DeviceMode.CompileOnly:
        warnings.warn(f"tti_path={str(tti_path)!r} has no effect with device_mode {config.device_mode.name}: "
                      f"CompileOnly writes the image there (compiled.save(path) writes one after any compile)",
                      UserWarning, stacklevel=2)
    device = _device(device, config)
    spec = get_device(device).harvested(config.harvesting_mask)
    if config.backend_device_descriptor_path:
        if config.harvesting_mask:
            raise UserInputError(f"harvesting_mask {config.harvesting_mask:#x} and backend_device_descriptor_path "
                                 f"{config.backend_device_descriptor_path!r} both say which rows the board has: give "
                                 "one of them")
        spec = spec.with_soc_descriptor(config.backend_device_descriptor_path)
    if not sample_inputs:
        raise UserInputError("compile needs sample inputs (a microbatch of each model input)")
    sample_inputs = tuple(x if isinstance(x, torch.Tensor) else torch.as_tensor(x) for x in sample_inputs)
    if config.enable_link_past_cache_ios:         # a causal LM: compiled as its paged decode step
        if config.loopback_outputs:
            raise UserInputError("enable_link_past_cache_ios links the caches itself: leave loopback_outputs empty")
        model, sample_inputs, config.loopback_outputs = paged_decoder(model, sample_inputs,
                                                                      config.generation_max_length,
                                                                      config.default_df_override)
        config.compile_subgraphs = config.compile_subgraphs or model.cross   # the encoder: a program of its own
    elif config.generation_max_length is not None:
        warnings.warn(f"generation_max_length={config.generation_max_length} has no effect without "
                      "enable_link_past_cache_ios (it sizes a compiled decoder's caches)", UserWarning, stacklevel=2)
    _check_microbatch(sample_inputs)
    stages = STAGES if stages is None else tuple(stages)
    check_stages(stages)
    stop = stop_stage(config.compile_depth, stages)
    reached = next(s.ensures for s in stages if s.name == stop)
    if config.device_mode is DeviceMode.CompileOnly and reached != "netlist":
        raise UserInputError(f"device_mode CompileOnly saves a TTI image, which needs the netlist, but compile_depth "
                             f"stops after stage {stop!r} (level {reached!r})")
    if reached == "netlist":
        out_dir = usable_output_dir(out_dir)   # before any work: the netlist is written there
    verify = config.verify if verify is None else verify
    _check_shape_only(model, verify, loss is not None or optimizer is not None, config)
    training = check_training(model, sample_inputs, loss, optimizer, sample_targets)
    if training is None and config.enable_training:
        raise TrainingError("enable_training is set, but a training compile needs loss=, optimizer= and "
                            "sample_targets= (pybuda.compile(model, x, loss=..., optimizer=..., sample_targets=y))")
    if training is None:
        for message in cfg.inference_compile_warnings(config):   # options that act only in a training compile
            warnings.warn(message, UserWarning, stacklevel=2)
    if training is not None:
        config.enable_training = True
    with _modes_kept(model):
        return _compile(model, sample_inputs, spec, config, out_dir, stages, stop, verify, tti_path, training)


def _compile(model, sample_inputs: tuple, spec, config: cfg.CompilerConfig, out_dir: Path, stages: tuple,
             stop: str, verify: bool, tti_path: str | Path | None, training=None) -> CompiledModel:
    microbatch = int(sample_inputs[0].shape[0])
    name = _model_name(model)
    result = CompiledModel(name, spec.name, config, microbatch)

    op_level = config.enable_op_level_comparision
    verify = verify or op_level
    expected = framework_outputs(model, sample_inputs) if verify else None
    if expected is not None and config.loopback_outputs:        # outputs written back on the device
        looped = set(config.loopback_outputs.values())
        expected = [e for i, e in enumerate(expected) if i not in looped]
    reference = TrainingReference.of(model, sample_inputs, training) if verify and training else None
    batch: dict[str, np.ndarray] = {}
    previous_ops: dict | None = None     # op_level: the last stage's op values on the first sample
    state = CompileState(model=model, sample_inputs=sample_inputs, config=config, device=spec, microbatch=microbatch,
                         name=name, output_dir=out_dir, optimizer=training.optimizer if training else None)
    level = "model"
    with StageProgress(name) as progress:
        for stage, state, seconds in run_stages(stages, state, stop, on_start=progress.start):
            progress.done(stage.name, seconds)
            result.stage_times[stage.name] = seconds
            level = stage.ensures
            if stage.produces_graph:
                result.graphs[stage.name] = state.graph
                if verify:
                    batch = batch or {n: to_numpy(x) for n, x in zip(state.input_names, state.sample_inputs)}
                    if reference is not None:
                        batch.update(reference.loss_gradients(state.output_names))
                    if op_level and stage.ensures in ("framework", "buda"):   # placed: streamed ops change shape
                        ops = op_values(state.parts(), {k: v[:1] for k, v in batch.items()})
                        if previous_ops is not None and stage.name not in RELAYOUT_STAGES:
                            # before the outputs' check: a divergence is named at its first op
                            result.checks.append(compare_ops(stage.name, ops, previous_ops))
                        previous_ops = ops
                    result.checks.append(_check(stage.name, state.parts(), state.output_names, batch, expected))
                    if reference is not None and any(p.graph.loopbacks_present() for p in state.parts()):
                        result.checks.append(reference.check_gradients(
                            stage.name, golden_gradients(state.parts(), batch), GRAPH_PCC_THRESHOLD))
    result.input_names = state.input_names
    result.segments = state.parts() if state.segments else ()
    result.device_graph = state.graph if level in ("buda", "placed", "netlist") else None
    result.placements = state.placements
    result.netlist_paths = state.netlist_paths
    if state.manifest is not None:
        result.runtime = RuntimeModel(state.netlists, state.netlist_texts, state.manifest, state.arrays,
                                      source=state.netlist_paths[0] if state.netlist_paths else "")
        if training is not None:
            result.training = TrainingRuntime(state.netlists[0], state.manifest, state.arrays, training.loss,
                                              training.optimizer)
        if verify and state.netlists:
            result.checks.append(_check_netlist(result.runtime, state.sample_inputs, expected))
            result.runtime.reset_state()      # the check ran the model once: device state back to its start
            if reference is not None:
                result.checks += reference.check_step(state, training)
    if config.device_mode is DeviceMode.CompileOnly:
        result.tti_path = result.save(tti_path or _default_tti_path(out_dir, model))
    return result


def _check_shape_only(model, verify: bool, training: bool, config: cfg.CompilerConfig) -> None:
    """A model whose weights are on torch's meta device compiles shape-only (netlist, placement, estimate: docs/
    user_guide.md); UserInputError for what needs the weights' numbers."""
    if not (isinstance(model, torch.nn.Module) and holds_meta_weights(model)):
        return
    needs = ("verify" if verify or config.enable_op_level_comparision else
             "a training compile" if training else
             "device_mode CompileOnly (a TTI image)" if config.device_mode is DeviceMode.CompileOnly else None)
    if needs:
        raise UserInputError(f"{type(model).__name__} holds weights on torch's meta device, so it compiles shape-only "
                             f"(netlist, placement and estimate), and {needs} needs the weights' numbers: load them "
                             "(e.g. model.to_empty(device='cpu') and load_state_dict), or compile without it")


@contextlib.contextmanager
def _modes_kept(model) -> Iterator[None]:
    """Compiling puts a torch model in eval mode; give each of its modules its train/eval mode back after."""
    modes = [(m, m.training) for m in model.modules()] if isinstance(model, torch.nn.Module) else []
    try:
        yield
    finally:
        for module, training in modes:
            module.training = training


def _device(device: str | None, config: cfg.CompilerConfig) -> str:
    """The device a compile targets: `device`, else the one `config.device_config` names, else the default."""
    named = cfg.DEVICE_OF_CONFIG.get(config.device_config) if config.device_config else None
    if device is not None and named is not None and device != named:
        raise UserInputError(f"compile(device={device!r}) but the config's device_config={config.device_config!r} "
                             f"names {named}: give one of them, or the same device")
    return device or named or DEFAULT_DEVICE


def _check_microbatch(sample_inputs: tuple) -> None:
    """UserInputError unless every sample input has the first input's leading (microbatch) dim."""
    if any(x.dim() == 0 for x in sample_inputs):
        raise UserInputError("compile's sample inputs need a leading microbatch dim; a 0-d input has none: pass "
                             "x.reshape(1) for one sample")
    microbatch = sample_inputs[0].shape[0]
    for k, x in enumerate(sample_inputs):
        if x.shape[0] != microbatch:
            legacy = (f"; legacy PyBuda shared an input of microbatch 1 among the samples: pass "
                      f"input.expand({microbatch}, *input.shape[1:])" if x.shape[0] == 1 else "")
            raise UserInputError(f"sample input {k} has leading (microbatch) dim {x.shape[0]}, input 0 has "
                                 f"{microbatch}: every input needs the same microbatch{legacy}")


def _default_tti_path(out_dir: Path, model) -> Path:
    return out_dir / f"{safe_file_stem(_model_name(model))}.tti"


def _model_name(model) -> str:
    if isinstance(model, (PyBudaModule, PyTorchModule)):
        return model.get_name()
    if isinstance(model, torch.nn.Module):
        return type(model).__name__
    raise UserTypeError(f"compile takes a torch.nn.Module or a PyBudaModule, got {type(model).__name__}")


def _load_precompiled(model, sample_inputs, device: str | None, path: str | Path) -> RuntimeModel:
    """device_mode RunOnly: the model of a TTI image, checked against what this compile call describes (model
    name, device, input shapes; each only when given)."""
    loaded = load_tti(path)
    problems = []
    if model is not None and _model_name(model) != loaded.name:
        problems.append(f"it holds model {loaded.name!r}, not {_model_name(model)!r}")
    if device is not None and device != loaded.device:
        problems.append(f"it was compiled for device {loaded.device}, not {device}")
    if sample_inputs:
        shapes = [tuple(torch.as_tensor(x).shape) for x in sample_inputs]
        if shapes != loaded.input_shapes:
            problems.append(f"it takes inputs of shapes {loaded.input_shapes}, the sample inputs have {shapes}")
    if problems:
        raise UserInputError(f"device_mode RunOnly: the TTI image {path} does not match this compile call: "
                             + "; ".join(problems))
    return loaded


def framework_outputs(model, sample_inputs) -> list[np.ndarray]:
    """The reference outputs: torch's for a torch module, the traced graph's golden eval for a PyBudaModule."""
    if isinstance(model, torch.nn.Module):
        with torch.no_grad():
            out = model.eval()(*sample_inputs)
        return [to_numpy(o) for o in tensors(out)]
    traced = trace_module(model, sample_inputs)
    return run_golden(traced, {n: to_numpy(x) for n, x in zip(traced.input_names, sample_inputs)})
