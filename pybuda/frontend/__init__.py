"""Frontends: PyBudaModule tracing and torch.nn.Module import (torch.export + TVM Relax)."""
from .torchvision_ops import declare_torchvision_ops

declare_torchvision_ops()
