"""What a training compile is given (loss, optimizer, sample targets), checked before any work, and torch's side of
its verification (`TrainingReference`: gradients and one optimizer step to compare the stages and the netlist with)."""
from __future__ import annotations

import copy
import dataclasses
import warnings

import numpy as np
import torch

from .dataformat import DataFormat
from .ir import loss_gradient_input
from .module import to_numpy
from .optimizers import Optimizer
from .runtime.loss import TrainingError, host_loss
from .runtime.training import TrainingRuntime
from .verify import StageCheck, VerificationError, netlist_pcc_threshold, pcc


@dataclasses.dataclass(frozen=True)
class TrainingSetup:
    loss: torch.nn.Module
    optimizer: Optimizer
    sample_targets: tuple


def tensors(value) -> list[torch.Tensor]:
    """The tensors among a model's outputs (any nesting), in order."""
    return [t for t in torch.utils._pytree.tree_leaves(value) if isinstance(t, torch.Tensor)]


def check_training(model, sample_inputs: tuple, loss, optimizer, sample_targets) -> TrainingSetup | None:
    """None for inference (no loss, optimizer or targets); else the checked setup. TrainingError if one is missing,
    the optimizer is not a pybuda optimizer, or the loss cannot compare the model's outputs with the targets
    (naming both shapes)."""
    given = {"loss": loss, "optimizer": optimizer, "sample_targets": sample_targets}
    if all(v is None for v in given.values()):
        return None
    missing = [k for k, v in given.items() if v is None]
    if missing:
        raise TrainingError(f"training needs loss=, optimizer= and sample_targets=; missing: {', '.join(missing)}")
    if not isinstance(optimizer, Optimizer):
        raise TrainingError(f"optimizer must be a pybuda.optimizers optimizer (SGD, Adam, AdamW), got "
                            f"{type(optimizer).__name__}")
    if not callable(loss):
        raise TrainingError(f"loss must be a torch loss module (e.g. torch.nn.CrossEntropyLoss()), got "
                            f"{type(loss).__name__}")
    if isinstance(model, torch.nn.Module):
        dropouts = [name for name, m in model.named_modules() if isinstance(m, torch.nn.modules.dropout._DropoutNd)
                    and m.p > 0 and m.training]
        if dropouts:
            warnings.warn(f"dropout is not applied in training yet: the model trains as in eval mode (dropout modules "
                          f"{', '.join(dropouts[:4])}{' ...' if len(dropouts) > 4 else ''}); compare it with the torch "
                          "model in eval mode", stacklevel=3)
    targets = tuple(sample_targets) if isinstance(sample_targets, (tuple, list)) else (sample_targets,)
    targets = tuple(t if isinstance(t, torch.Tensor) else torch.as_tensor(t) for t in targets)
    with torch.no_grad():
        outputs = tensors(model(*sample_inputs)) if isinstance(model, torch.nn.Module) else None
    if outputs is not None:
        host_loss(loss, outputs, targets, requires_grad=False)
    return TrainingSetup(loss, optimizer, targets)


# how far a gradient's or an updated parameter's norm may be from torch's: a graph evaluates in float32, a netlist in
# its data formats
NORM_TOLERANCE = {"graph": 1e-3, "netlist": 0.1}


@dataclasses.dataclass
class TrainingReference:
    """torch's side of a training compile's verification: the loss gradient of the framework outputs, every
    parameter's gradient and its value after one optimizer step (eval mode: dropout off, as compiled)."""

    outputs: list
    targets: tuple
    loss: object
    gradients: dict
    stepped: dict

    @classmethod
    def of(cls, model, sample_inputs: tuple, training) -> "TrainingReference | None":
        if not isinstance(model, torch.nn.Module):
            return None   # a PyBudaModule: its forward outputs are verified, its gradients are not
        ref = copy.deepcopy(model).eval()
        outputs = tensors(ref(*sample_inputs))
        total = sum(training.loss(o, t) for o, t in zip(outputs, training.sample_targets))
        total.backward()
        gradients = {n: to_numpy(p.grad) for n, p in ref.named_parameters() if p.grad is not None}
        training.optimizer.torch_optimizer(ref.parameters()).step()
        stepped = {n: to_numpy(p.detach()) for n, p in ref.named_parameters()}
        return cls([o.detach() for o in outputs], training.sample_targets, training.loss, gradients, stepped)

    def loss_gradients(self, output_names: list[str]) -> dict[str, np.ndarray]:
        _, grads = host_loss(self.loss, self.outputs, self.targets)
        return {loss_gradient_input(name): g for name, g in zip(output_names, grads)}

    def _compare(self, stage: str, got: dict, want: dict, threshold: float, what: str,
                 rounding: dict[str, float] | None = None) -> StageCheck:
        """The worst parameter's PCC (and its norm within `NORM_TOLERANCE` of torch's: PCC is blind to scale); a
        parameter whose reference is constant (a gradient that is 0 in exact arithmetic, e.g. an attention key
        bias's) is left out: its PCC measures noise. `rounding` (relative, by parameter) accepts a value that is
        torch's up to its stored format's rounding step (an update below it is lost on the device, as on the
        hardware; a parameter near-constant like a layernorm weight then has no PCC to speak of)."""
        worst = StageCheck(stage, 1.0, 0.0, threshold=threshold)
        for name, expected in want.items():
            if name not in got or np.ptp(expected) <= 1e-6 * max(np.abs(expected).max(), 1e-30) \
                    or np.abs(expected).max() < 1e-9:
                continue
            value = np.asarray(got[name]).reshape(expected.shape)
            check = dataclasses.replace(worst, pcc=pcc(value, expected),
                                        max_abs_error=float(np.max(np.abs(value - expected))))
            ratio = float(np.linalg.norm(value) / np.linalg.norm(expected))
            tolerance = NORM_TOLERANCE["netlist" if stage.startswith("netlist") else "graph"]
            close = check.pcc >= threshold and abs(ratio - 1.0) <= tolerance
            if close:
                worst = check if check.pcc < worst.pcc else worst
                continue
            if rounding is not None and check.max_abs_error <= rounding[name] * float(np.abs(expected).max()):
                continue
            raise VerificationError(f"stage {stage!r}: the {what} of parameter {name!r} diverges from torch's: pcc "
                                    f"{check.pcc:.6f} (threshold {threshold}), norm {ratio:.4f}x torch's "
                                    f"(tolerance {tolerance}), max abs error {check.max_abs_error:.3g}")
        return worst

    def check_gradients(self, stage: str, gradients: dict, threshold: float) -> StageCheck:
        return self._compare(f"{stage} gradients", gradients, self.gradients, threshold, "gradient")

    def check_step(self, state, training) -> list[StageCheck]:
        """One training step of the netlist in a simulator of its own: gradients and updated parameters against
        torch's, with the threshold of the netlist's least precise format."""
        fmt, _, threshold = netlist_pcc_threshold(state.netlists[0])
        runtime = TrainingRuntime(state.netlists[0], state.manifest, state.arrays, training.loss, training.optimizer)
        inputs = tuple(torch.as_tensor(x) for x in state.sample_inputs)
        runtime.train_step(inputs, self.targets)
        grads = {k: v.numpy() for k, v in runtime.gradients().items()}
        params = {k: v.numpy() for k, v in runtime.state_dict().items()}
        queues = state.netlists[0].queues   # a parameter trained or updated on the host is Float32
        on_device = {name for name in params if name in queues and runtime.host_optimizer is None}
        rounding = {name: 2.0 ** -(queues[name].df if name in on_device else DataFormat.Float32).mantissa_bits
                    for name in params}
        return [dataclasses.replace(self._compare("netlist gradients", grads, self.gradients, threshold, "gradient"),
                                    data_format=fmt.value),
                dataclasses.replace(self._compare("netlist step", params, self.stepped, threshold, "updated value",
                                                  rounding), data_format=fmt.value)]
