"""The optimizer on the host (`CompilerConfig.optimizer_on_host`, as legacy PyBuda's CPU-side optimizers): float32
master copies of the trained parameters, updated once per step by the torch optimizer that matches the compile's
`pybuda.optimizers` optimizer, from the gradients the device's backward epochs accumulate. The device keeps a copy
of each parameter in its queue's format; the runtime writes the new values there after every step.

The masters are in the parameter queues' element layout (t, R, C, tile padded): the optimizers are elementwise,
and the padding stays zero (a zero gradient moves a zero parameter by nothing)."""
from __future__ import annotations

import numpy as np
import torch


class HostOptimizer:
    """Master parameters by name and the torch optimizer over them."""

    def __init__(self, optimizer, masters: dict[str, np.ndarray]):
        self.params = {name: torch.tensor(np.asarray(value, dtype=np.float32), requires_grad=True)
                       for name, value in masters.items()}
        self.torch_optimizer = optimizer.torch_optimizer(list(self.params.values()))

    def value(self, name: str) -> np.ndarray:
        return self.params[name].detach().numpy()

    def step(self, gradients: dict[str, np.ndarray]) -> None:
        """One optimizer step from each parameter's summed gradient (same layout as its master)."""
        for name, param in self.params.items():
            param.grad = torch.from_numpy(np.asarray(gradients[name], dtype=np.float32).reshape(param.shape))
        self.torch_optimizer.step()
