"""Losses by their legacy names (`pybuda.op.loss.CrossEntropyLoss`, ...). The loss runs on the host, as the legacy
compiler's CPU loss device ran it: these are torch's loss modules, and `pybuda.compile(..., loss=...)` takes them
(or any torch loss module) alike."""
from __future__ import annotations

from torch.nn import CrossEntropyLoss, L1Loss, MSELoss

__all__ = ["CrossEntropyLoss", "L1Loss", "MSELoss"]
