"""Models whose weights are on torch's meta device: they compile shape-only (`pybuda.ir.ShapeOnly` parameters:
netlist, placement and estimate, no numbers; docs/user_guide.md, "Estimate a model without its weights"). Kept apart
from `torch_import` so that checking a model does not import TVM."""
from __future__ import annotations

import itertools

import torch


def holds_meta_weights(model: torch.nn.Module) -> bool:
    """Whether some parameter or buffer of `model` is on torch's meta device."""
    return any(t.is_meta for t in itertools.chain(model.parameters(), model.buffers()))
