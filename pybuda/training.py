"""What a training compile is given (loss, optimizer, sample targets), checked before any work."""
from __future__ import annotations

import dataclasses
import warnings

import torch

from .optimizers import Optimizer
from .runtime.loss import TrainingError, host_loss


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
