"""`TrainingRuntime`: a training netlist run step by step in one backend simulator that keeps the device's state
(parameters, optimizer state, gradient accumulators) between steps.

A step of `accumulation_steps` microbatches: per microbatch, push its inputs, run `run_fwd`, pop the outputs,
compute the loss and its gradient on the host (`loss.host_loss`), push the gradient to the `loss_<output>`
queues and run `run_bwd` (zeroing the accumulators on the first microbatch); then write the optimizer's per-step
scalars and run `run_opt` once. A compensated parameter's value is what the math unit reads of its ram plus its
residual (`<p>.residual`); the runtime splits the initial value so and adds the two for the state dict."""
from __future__ import annotations

import numpy as np
import torch

from ..backend_sim import Simulator
from ..backend_sim.formats import quantize, to_source_register
from ..backend_sim.timing import estimate
from ..codegen.manifest import RunManifest
from ..ir import accumulated_parameter, residual_parameter
from ..netlist import Netlist
from ..passes.host_io import apply_host_transforms, from_device_layout
from .feeds import load_arrays, pop_samples, push_samples
from .inputs import checked_inputs
from .loss import TrainingError, host_loss
from .perf import ModelPerf

PROGRAMS = ("run_fwd", "run_bwd", "run_opt")


def is_training_netlist(netlist: Netlist) -> bool:
    return {p.name for p in netlist.programs} >= set(PROGRAMS)


class TrainingRuntime:
    """The device state of a training model and its step loop (module docstring). `optimizer.step_scalars(t)` gives
    the per-step scalars of step t; `loss` is a torch loss module."""

    def __init__(self, netlist: Netlist, manifest: RunManifest, arrays: dict[str, np.ndarray], loss, optimizer):
        if len(manifest.device_parts) != 1 or len(manifest.parts) != 1:
            raise TrainingError("training runs a model that is one device part (no CPU fallback ops)")
        self.netlist, self.manifest, self.loss, self.optimizer = netlist, manifest, loss, optimizer
        self.queues = manifest.device_parts[0].queues
        self.residuals = {residual_parameter(q): q for q, feed in self.queues.items()
                          if feed.kind == "parameter_residual"}
        self.sim = Simulator(netlist, device=manifest.device)
        load_arrays(self.sim, self.queues, self._split(arrays))
        self.steps = 0
        self._perf = None

    def _split(self, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The arrays with each compensated parameter's residual set to what the device does not hold or read of
        its initial value (passes/autograd.py `OptimizerContext.update`), so that the two add up to it."""
        arrays = dict(arrays)
        for param, residual in self.residuals.items():
            initial = arrays[self.queues[param].array]
            held = quantize(initial, self.netlist.queues[param].df)
            arrays[self.queues[residual].array] = initial - self._math_value(param, held)
        return arrays

    def _math_value(self, param: str, value: np.ndarray) -> np.ndarray:
        """A value of parameter queue `param` as the math unit reads it."""
        return to_source_register(value, self.netlist.queues[param].df)

    def _device_value(self, queue: str) -> np.ndarray:
        """The value a queue holds; a compensated parameter's is the math unit's reading of it plus its residual."""
        value = self.sim.peek(queue)
        if queue not in self.residuals:
            return value
        return self._math_value(queue, value) + self.sim.peek(self.residuals[queue])

    def _microbatch(self, batch: dict[str, np.ndarray], targets: tuple, first: bool) -> float:
        for queue, feed in self.queues.items():
            if feed.kind == "input":
                push_samples(self.sim, queue, feed, _samples(batch[feed.feed]))
        self.sim.run("run_fwd", p_microbatch_count=1)
        outputs = {}
        for queue, feed in self.queues.items():
            if feed.kind == "output":
                outputs[feed.feed] = np.concatenate(pop_samples(self.sim, queue, feed, self.manifest.microbatch))
        value, grads = host_loss(self.loss, [torch.from_numpy(outputs[n]) for n in self.manifest.outputs], targets)
        grad_of = dict(zip(self.manifest.outputs, grads))
        for queue, feed in self.queues.items():
            if feed.kind == "loss_gradient":
                push_samples(self.sim, queue, feed, _samples(grad_of[feed.feed]))
        self.sim.run("run_bwd", p_zero_grad=int(first), p_microbatch_count=1)
        return value

    def train_step(self, inputs: tuple, targets, accumulation_steps: int = 1) -> float:
        """One optimizer step over `accumulation_steps` microbatches (the inputs and targets hold them one after
        the other along dim 0); returns the mean of their losses (their gradients add up, as calling
        `loss.backward()` on each in torch)."""
        mb = self.manifest.microbatch
        if accumulation_steps < 1:
            raise TrainingError(f"accumulation_steps must be >= 1, got {accumulation_steps}")
        targets = tuple(targets) if isinstance(targets, (tuple, list)) else (targets,)
        targets = tuple(torch.as_tensor(t) for t in targets)
        inputs = tuple(torch.as_tensor(x) for x in inputs)
        for what, tensors in (("input", inputs), ("target", targets)):
            for k, t in enumerate(tensors):
                if t.shape[0] != mb * accumulation_steps:
                    raise TrainingError(f"{what} {k} has {t.shape[0]} samples along dim 0; a step of "
                                        f"{accumulation_steps} microbatch(es) of {mb} takes {mb * accumulation_steps}")
        losses = []
        for k in range(accumulation_steps):
            part = slice(k * mb, (k + 1) * mb)
            batch = checked_inputs(self.manifest, tuple(x[part] for x in inputs))
            losses.append(self._microbatch(batch, tuple(t[part] for t in targets), first=k == 0))
        self.steps += 1
        scalars = self.optimizer.step_scalars(self.steps)
        for queue, feed in self.queues.items():
            if feed.kind == "optimizer_parameter":
                entry = self.sim.queue_shape(queue)
                self.sim.push(queue, np.full(entry, scalars[queue.rsplit(".", 1)[1]], dtype=np.float32))
        self.sim.run("run_opt")
        return float(np.mean(losses))

    def _read(self, kind: str) -> dict[str, torch.Tensor]:
        out = {}
        for queue, feed in self.queues.items():
            if feed.kind == kind:
                value = from_device_layout(self._device_value(queue)[None], feed.logical_shape, ())
                value = apply_host_transforms(value.reshape(feed.logical_shape), feed.host_transforms)
                out[accumulated_parameter(queue)] = torch.from_numpy(np.ascontiguousarray(value))
        return out

    def state_dict(self) -> dict[str, torch.Tensor]:
        """The trained parameters as they are on the device now, under the framework's names."""
        return self._read("trained")

    def gradients(self) -> dict[str, torch.Tensor]:
        """The gradient accumulators (the last step's summed gradients), by parameter name."""
        return self._read("gradient_accumulator")

    @property
    def perf(self) -> ModelPerf:
        """The estimate of one training step of one microbatch: run_fwd, run_bwd and run_opt, summed."""
        if self._perf is None:
            self._perf = training_step_perf(self.netlist, self.manifest.device, self.manifest.microbatch)
        return self._perf


def _samples(batch: np.ndarray) -> list[np.ndarray]:
    return [batch[i:i + 1] for i in range(len(batch))]


def training_step_perf(netlist: Netlist, device: str, microbatch: int) -> ModelPerf:
    """One training step of one microbatch (run_fwd, run_bwd, run_opt), each program a part of the estimate."""
    return ModelPerf(tuple(estimate(netlist, device=device, program=p) for p in PROGRAMS), (), microbatch)


def epoch_counts(netlist: Netlist) -> str:
    """'forward F, backward B, optimizer O' epochs of a training netlist."""
    kinds = [name.split("_")[0] for name in netlist.graphs]
    return ", ".join(f"{label} {kinds.count(prefix)}" for prefix, label in
                     (("fwd", "forward"), ("bwd", "backward"), ("opt", "optimizer")))
