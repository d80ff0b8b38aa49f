"""Frontends: PyBudaModule tracing and torch.nn.Module import (torch.export + TVM Relax)."""
