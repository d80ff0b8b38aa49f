"""`FnModule`: a PyBudaModule whose forward is a function of the module and its inputs, for tests of op surfaces."""
from __future__ import annotations

import pybuda


class FnModule(pybuda.PyBudaModule):
    """forward(*inputs) = fn(self, *inputs); each keyword a frozen parameter of that name."""

    def __init__(self, fn, name: str = "fn", **parameters):
        super().__init__(name)
        self.fn = fn
        for key, value in parameters.items():
            setattr(self, key, pybuda.Parameter(value, requires_grad=False))

    def forward(self, *acts):
        return self.fn(self, *acts)
