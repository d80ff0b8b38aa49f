"""What a training compile is given (loss, optimizer, sample targets), checked before any work, and the loss on
the host: like the legacy compiler's CPU loss device, the loss and its gradient with respect to the model's outputs
are computed in PyTorch, and the gradient is pushed to the backward program's `loss_<output>` queues."""
from __future__ import annotations

import dataclasses

import numpy as np
import torch

from .optimizers import Optimizer

# losses that compare output and target element by element: torch broadcasts mismatched shapes with a warning,
# which would train on the wrong target
ELEMENTWISE_LOSSES = (torch.nn.MSELoss, torch.nn.L1Loss, torch.nn.SmoothL1Loss, torch.nn.HuberLoss,
                      torch.nn.BCELoss, torch.nn.BCEWithLogitsLoss)


class TrainingError(ValueError):
    """A training compile given inconsistent loss, optimizer, targets or outputs; the message names them."""


@dataclasses.dataclass(frozen=True)
class TrainingSetup:
    loss: torch.nn.Module
    optimizer: Optimizer
    sample_targets: tuple


def _tensors(value) -> list[torch.Tensor]:
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
    targets = tuple(sample_targets) if isinstance(sample_targets, (tuple, list)) else (sample_targets,)
    targets = tuple(t if isinstance(t, torch.Tensor) else torch.as_tensor(t) for t in targets)
    with torch.no_grad():
        outputs = _tensors(model(*sample_inputs)) if isinstance(model, torch.nn.Module) else None
    if outputs is not None:
        host_loss(loss, outputs, targets, requires_grad=False)
    return TrainingSetup(loss, optimizer, targets)


def host_loss(loss, outputs: list[torch.Tensor], targets: tuple, requires_grad: bool = True):
    """The loss of the model's outputs against the targets (one output per target); with `requires_grad`, also its
    gradient with respect to each output. TrainingError naming both shapes when they do not fit the loss."""
    if len(outputs) != len(targets):
        raise TrainingError(f"the model has {len(outputs)} output(s) but {len(targets)} target(s) were given")
    outs = [o.detach().float().clone().requires_grad_(requires_grad) for o in outputs]
    total = None
    for k, (out, target) in enumerate(zip(outs, targets)):
        where = f"output {k} of shape {tuple(out.shape)} and target of shape {tuple(target.shape)}"
        if isinstance(loss, ELEMENTWISE_LOSSES) and tuple(out.shape) != tuple(target.shape):
            raise TrainingError(f"loss {type(loss).__name__} compares element by element, but {where} differ")
        try:
            value = loss(out, target)
        except (RuntimeError, ValueError, IndexError) as e:
            raise TrainingError(f"loss {type(loss).__name__} cannot compare {where}: {e}") from None
        if value.dim() != 0:
            raise TrainingError(f"loss {type(loss).__name__} of {where} is not a scalar (shape "
                                f"{tuple(value.shape)}); use reduction='mean' or 'sum'")
        total = value if total is None else total + value
    if not requires_grad:
        return float(total), []
    total.backward()
    return float(total), [np.asarray(o.grad.numpy(), dtype=np.float32) for o in outs]
