"""The loss on the host: like the legacy compiler's CPU loss device, the loss of the model's outputs and its
gradient with respect to them are computed in PyTorch; the gradient feeds the backward program's
`loss_<output>` queues."""
from __future__ import annotations

import numpy as np
import torch

from ..errors import UserInputError

# losses that compare output and target element by element: torch broadcasts mismatched shapes with a warning,
# which would train on the wrong target
ELEMENTWISE_LOSSES = (torch.nn.MSELoss, torch.nn.L1Loss, torch.nn.SmoothL1Loss, torch.nn.HuberLoss,
                      torch.nn.BCELoss, torch.nn.BCEWithLogitsLoss)


class TrainingError(UserInputError):
    """A training compile or step given inconsistent loss, optimizer, targets or outputs; the message names them."""


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
    return float(total.detach()), [np.asarray(o.grad.numpy(), dtype=np.float32) for o in outs]
