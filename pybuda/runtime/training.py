"""`TrainingRuntime`: a training netlist run step by step in one backend simulator that keeps the device's state
(parameters, optimizer state, gradient accumulators) between steps.

A step of `accumulation_steps` microbatches: per microbatch, push its inputs, run `run_fwd`, pop the outputs,
compute the loss and its gradient on the host (`loss.host_loss`), push the gradient to the `loss_<output>`
queues and run `run_bwd` (zeroing the accumulators on the first microbatch); then write the optimizer's per-step
scalars and run `run_opt` once (or, a netlist without `run_opt`, compiled with `optimizer_on_host`, update float32
master parameters on the host from the accumulated gradients and write them to the parameter queues:
`host_optimizer.py`). A compensated parameter's value is what the math unit reads of its ram plus its
residual (`<p>.residual`); the runtime splits the initial value so and adds the two for the state dict.

Host programs (CPU fallback ops, `passes/cpu_fallback.py`) take part by epoch type: forward ones run per sample
before `run_fwd` (their values feed the device), backward ones per sample after `run_bwd` (reading the `gradient`
outputs it writes; their gradient accumulators sum over the step's samples), optimizer ones once per step after
`run_opt`. Their parameters (a trained embedding table, its optimizer state) are arrays the runtime keeps."""
from __future__ import annotations

import math

import numpy as np
import torch

from ..backend_sim import Simulator
from ..backend_sim.formats import quantize, to_source_register
from ..backend_sim.loading import select_device
from ..backend_sim.timing import estimate
from ..codegen.manifest import HOST_ARRAY_PREFIX, HostProgram, RunManifest
from ..ir import EPOCH_TYPES, accumulated_parameter, accumulator_of, residual_of, residual_parameter
from ..netlist import Netlist
from ..netlist.sizes import queue_buffer_bytes
from ..passes.host_io import apply_host_transforms, from_device_layout
from .feeds import load_arrays, pop_samples, push_samples
from .host import run_host
from .host_optimizer import HostOptimizer
from .inputs import checked_inputs
from .loss import TrainingError, host_loss
from .perf import ModelPerf

PROGRAMS = ("run_fwd", "run_bwd", "run_opt")   # run_opt: not with optimizer_on_host


def is_training_netlist(netlist: Netlist) -> bool:
    return {p.name for p in netlist.programs} >= set(PROGRAMS[:2])


def _programs(netlist: Netlist) -> list[str]:
    names = {p.name for p in netlist.programs}
    return [p for p in PROGRAMS if p in names]


class TrainingRuntime:
    """The device state of a training model and its step loop (module docstring). `optimizer.step_scalars(t)` gives
    the per-step scalars of step t; `loss` is a torch loss module."""

    def __init__(self, netlist: Netlist, manifest: RunManifest, arrays: dict[str, np.ndarray], loss, optimizer):
        if len(manifest.device_parts) != 1:
            raise TrainingError(f"training runs a model whose device ops are one part; this one has "
                                f"{len(manifest.device_parts)}")
        self.netlist, self.manifest, self.loss, self.optimizer = netlist, manifest, loss, optimizer
        self.queues = manifest.device_parts[0].queues
        self.residuals = {residual_parameter(q): q for q, feed in self.queues.items()
                          if feed.kind == "parameter_residual"}
        hosts = [p for p in manifest.parts if isinstance(p, HostProgram)]
        self.hosts = {t: [h for h in hosts if h.epoch_type == t] for t in EPOCH_TYPES}
        self.host_roles = {node: role for h in hosts for node, role in h.roles.items()}
        self.host_transforms = {node: t for h in hosts for node, t in h.transforms.items()}
        self.sim = Simulator(netlist, device=manifest.device)
        self.arrays = self._split(arrays)   # the host programs' parameters and state live here between steps
        load_arrays(self.sim, self.queues, self.arrays)
        self.steps = 0
        self._perf = None
        self.host_optimizer = None if "run_opt" in _programs(netlist) else HostOptimizer(optimizer, self._masters())

    def _masters(self) -> dict[str, np.ndarray]:
        """The initial float32 value of every trained parameter (device queues and host arrays) by node name."""
        masters = {q: self.arrays[feed.array] for q, feed in self.queues.items() if feed.kind == "trained"}
        masters.update({node: self.arrays[HOST_ARRAY_PREFIX + node] for node, role in self.host_roles.items()
                        if role == "trained"})
        for param in masters:
            if param in self.queues and self.sim.queue_shape(param) != self.sim.queue_shape(accumulator_of(param)):
                raise TrainingError(f"optimizer_on_host: parameter {param!r} is laid out as (t, R, C) = "
                                    f"{self.sim.queue_shape(param)} on the device but its gradient accumulator as "
                                    f"{self.sim.queue_shape(accumulator_of(param))}; compile without "
                                    "optimizer_on_host")
        return masters

    def _host_step(self) -> None:
        """optimizer_on_host: the masters updated from the accumulated gradients, then written to the device."""
        opt = self.host_optimizer
        opt.step({p: self.sim.peek(accumulator_of(p)) if p in self.queues
                  else self.arrays[HOST_ARRAY_PREFIX + accumulator_of(p)] for p in opt.params})
        for param in opt.params:
            if param in self.queues:
                self.sim.push(param, opt.value(param))
            else:
                self.arrays[HOST_ARRAY_PREFIX + param] = opt.value(param).copy()

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
        """The value a queue holds; a compensated parameter's is the math unit's reading of it plus its residual,
        a parameter the host optimizer updates its float32 master."""
        if self.host_optimizer is not None and queue in self.host_optimizer.params:
            return self.host_optimizer.value(queue)
        value = self.sim.peek(queue)
        if queue not in self.residuals:
            return value
        return self._math_value(queue, value) + self.sim.peek(self.residuals[queue])

    def _microbatch(self, batch: dict[str, np.ndarray], targets: tuple, first: bool) -> float:
        samples = [{name: x[i:i + 1] for name, x in batch.items()} for i in range(self.manifest.microbatch)]
        for host in self.hosts["forward"]:
            for values in samples:
                values.update(run_host(host, self.arrays, values))
        for queue, feed in self.queues.items():
            if feed.kind == "input":
                push_samples(self.sim, queue, feed, [values[feed.feed] for values in samples])
        self.sim.run("run_fwd", p_microbatch_count=1)
        self._pop("output", samples)
        outputs = [torch.from_numpy(np.concatenate([values[n] for values in samples])) for n in self.manifest.outputs]
        value, grads = host_loss(self.loss, outputs, targets)
        grad_of = dict(zip(self.manifest.outputs, grads))
        for queue, feed in self.queues.items():
            if feed.kind == "loss_gradient":
                push_samples(self.sim, queue, feed, _samples(grad_of[feed.feed]))
        self.sim.run("run_bwd", p_zero_grad=int(first), p_microbatch_count=1)
        self._pop("gradient", samples)
        for host in self.hosts["backward"]:
            for k, values in enumerate(samples):
                self._write_back(host, run_host(host, self.arrays, values), restart=first and k == 0)
        return value

    def _pop(self, kind: str, samples: list[dict[str, np.ndarray]]) -> None:
        """Pop every device output queue of feed kind `kind` into the samples' values."""
        for queue, feed in self.queues.items():
            if feed.kind == kind:
                for values, value in zip(samples, pop_samples(self.sim, queue, feed, len(samples))):
                    values[feed.feed] = value

    def _write_back(self, host: HostProgram, outputs: dict[str, np.ndarray], restart: bool = False) -> None:
        """A host program's loopback outputs into the arrays of the nodes they write: a gradient accumulator sums
        (from zero when `restart`), any other node takes the value."""
        for out, node in host.writes.items():
            array = host.arrays[node]
            value = np.asarray(outputs[out], dtype=np.float32).reshape(self.arrays[array].shape)
            if self.host_roles.get(node) == "gradient_accumulator" and not restart:
                value = self.arrays[array] + value
            self.arrays[array] = value

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
        if self.host_optimizer is not None:
            self._host_step()
            return float(np.mean(losses))
        scalars = self.optimizer.step_scalars(self.steps)
        for queue, feed in self.queues.items():
            if feed.kind == "optimizer_parameter":
                entry = self.sim.queue_shape(queue)
                self.sim.push(queue, np.full(entry, scalars[queue.rsplit(".", 1)[1]], dtype=np.float32))
        for node, role in self.host_roles.items():
            if role == "optimizer_parameter":
                array = HOST_ARRAY_PREFIX + node
                self.arrays[array] = np.full_like(self.arrays[array], scalars[node.rsplit(".", 1)[1]])
        self.sim.run("run_opt")
        for host in self.hosts["optimizer"]:
            self._write_back(host, run_host(host, self.arrays, {}))
        return float(np.mean(losses))

    def _read(self, kind: str) -> dict[str, torch.Tensor]:
        """The device queues and host arrays of training role `kind`, in the framework's layout, by parameter."""
        out = {}
        for queue, feed in self.queues.items():
            if feed.kind == kind:
                value = from_device_layout(self._device_value(queue)[None], feed.logical_shape, ())
                value = apply_host_transforms(value.reshape(feed.logical_shape), feed.host_transforms)
                out[accumulated_parameter(queue)] = torch.from_numpy(np.ascontiguousarray(value))
        for node, role in self.host_roles.items():
            if role == kind:
                value = self.arrays[HOST_ARRAY_PREFIX + node]
                if residual_of(node) in self.host_roles:   # the host's compensated value (exact float32 reads)
                    value = value + self.arrays[HOST_ARRAY_PREFIX + residual_of(node)]
                value = apply_host_transforms(value, self.host_transforms.get(node, ()))
                out[accumulated_parameter(node)] = torch.from_numpy(np.ascontiguousarray(value))
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
            self._perf = training_step_perf(self.netlist, self.manifest)
        return self._perf


def _samples(batch: np.ndarray) -> list[np.ndarray]:
    return [batch[i:i + 1] for i in range(len(batch))]


def training_step_perf(netlist: Netlist, manifest: RunManifest) -> ModelPerf:
    """One training step of one microbatch (run_fwd, run_bwd, run_opt), each program a part of the estimate; the
    host programs' ops are listed. Without run_opt (optimizer_on_host) the step also moves every trained
    parameter's gradient accumulator to the host and the parameter back over PCIe."""
    programs = _programs(netlist)
    transfer = 0
    if "run_opt" not in programs:
        trained = [q for q, feed in manifest.device_parts[0].queues.items() if feed.kind == "trained"]
        moved = sum(_queue_bytes(netlist.queues[name]) for q in trained for name in (q, accumulator_of(q)))
        transfer = math.ceil(moved / select_device(netlist, manifest.device)[1].pcie_bw_bytes_per_cycle)
    return ModelPerf(tuple(estimate(netlist, device=manifest.device, program=p) for p in programs),
                     tuple(op.name for op in manifest.host_ops()), manifest.microbatch, transfer)


def _queue_bytes(queue) -> int:
    """Bytes of all of a queue's buffers (one per grid core)."""
    return queue_buffer_bytes(queue) * queue.grid_size[0] * queue.grid_size[1]


def epoch_counts(netlist: Netlist) -> str:
    """'forward F, backward B, optimizer O' epochs of a training netlist."""
    kinds = [name.split("_")[0] for name in netlist.graphs]
    return ", ".join(f"{label} {kinds.count(prefix)}" for prefix, label in
                     (("fwd", "forward"), ("bwd", "backward"), ("opt", "optimizer")))
