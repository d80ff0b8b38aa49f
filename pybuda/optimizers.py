"""Optimizers (pybuda-api.md §1.4): SGD (momentum, dampening, Nesterov, weight decay), Adam and AdamW, with torch's
update rules. Each builds, per trained parameter, the optimizer ops that run in the optimizer epochs: they read the
parameter, its gradient accumulator and its state, and write the new parameter and state back (loopback). Scalars
that change from step to step (Adam's bias corrections, SGD's first-step dampening) are per-step optimizer
parameters the host writes before each step (`step_scalars`)."""
from __future__ import annotations

import abc
import math

from .errors import UserInputError


class Optimizer(abc.ABC):
    """Base class: `build` adds one parameter's update ops (through a pybuda.passes.autograd.OptimizerContext);
    `step_scalars(step)` gives the per-step scalars of step 1, 2, ..."""

    def __init__(self, learning_rate: float, weight_decay: float = 0.0):
        if not learning_rate > 0:
            raise UserInputError(f"{type(self).__name__}: learning_rate must be > 0, got {learning_rate}")
        if weight_decay < 0:
            raise UserInputError(f"{type(self).__name__}: weight_decay must be >= 0, got {weight_decay}")
        self.learning_rate = float(learning_rate)
        self.weight_decay = float(weight_decay)

    @abc.abstractmethod
    def step_scalars(self, step: int) -> dict[str, float]:
        """The per-step scalars of step `step` (1, 2, ...) by name."""

    @abc.abstractmethod
    def build(self, ctx, param: str, grad: str) -> None:
        """Add the update of `param` from its accumulated gradient `grad` (ctx: an OptimizerContext; the new
        parameter through `ctx.update`, new state through `ctx.write`)."""

    @abc.abstractmethod
    def torch_optimizer(self, params):
        """The same optimizer in torch, for verification."""

    def _decayed(self, ctx, param: str, grad: str) -> str:
        """grad + weight_decay * param (L2 penalty; torch's `weight_decay` of SGD and Adam)."""
        if not self.weight_decay:
            return grad
        return ctx.op("add", [grad, ctx.op("multiply", [param, ctx.constant(self.weight_decay)])])


class SGD(Optimizer):
    """torch.optim.SGD: p -= lr * g, with momentum buffer b = momentum * b + (1 - dampening) * g (b = g on the first
    step), Nesterov g + momentum * b, and weight decay added to the gradient."""

    def __init__(self, learning_rate: float, momentum: float = 0.0, dampening: float = 0.0, nesterov: bool = False,
                 weight_decay: float = 0.0):
        super().__init__(learning_rate, weight_decay)
        if momentum < 0:
            raise UserInputError(f"SGD: momentum must be >= 0, got {momentum}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise UserInputError("SGD: Nesterov momentum needs momentum > 0 and dampening 0 (as torch.optim.SGD)")
        self.momentum, self.dampening, self.nesterov = float(momentum), float(dampening), bool(nesterov)

    def step_scalars(self, step: int) -> dict[str, float]:
        scalars = {"lr": self.learning_rate}
        if self.momentum:
            scalars["dampening"] = 1.0 if step == 1 else 1.0 - self.dampening
        return scalars

    def build(self, ctx, param: str, grad: str) -> None:
        g = self._decayed(ctx, param, grad)
        if self.momentum:
            buf = ctx.state("momentum")
            new_buf = ctx.op("add", [ctx.op("multiply", [buf, ctx.constant(self.momentum)]),
                                     ctx.op("multiply", [g, ctx.scalar("dampening")])])
            ctx.write(buf, new_buf)
            g = ctx.op("add", [g, ctx.op("multiply", [new_buf, ctx.constant(self.momentum)])]) if self.nesterov \
                else new_buf
        ctx.update(ctx.op("multiply", [g, ctx.scalar("lr")]))

    def torch_optimizer(self, params):
        import torch
        return torch.optim.SGD(params, lr=self.learning_rate, momentum=self.momentum, dampening=self.dampening,
                               nesterov=self.nesterov, weight_decay=self.weight_decay)


class Adam(Optimizer):
    """torch.optim.Adam: m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2, p -= lr_t m / (sqrt(v) + eps_t) with the
    bias corrections folded into the per-step lr_t = lr sqrt(1 - b2^t) / (1 - b1^t) and eps_t = eps sqrt(1 - b2^t)
    (the same value as torch's m_hat / (sqrt(v_hat) + eps)); weight decay is added to the gradient (L2)."""

    decoupled = False

    def __init__(self, learning_rate: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0):
        super().__init__(learning_rate, weight_decay)
        b1, b2 = (float(b) for b in betas)
        if not (0 <= b1 < 1 and 0 <= b2 < 1):
            raise UserInputError(f"{type(self).__name__}: betas must be in [0, 1), got {betas}")
        if not eps > 0:
            raise UserInputError(f"{type(self).__name__}: eps must be > 0, got {eps}")
        self.betas, self.eps = (b1, b2), float(eps)

    def step_scalars(self, step: int) -> dict[str, float]:
        b1, b2 = self.betas
        root = math.sqrt(1.0 - b2 ** step)
        return {"lr": self.learning_rate * root / (1.0 - b1 ** step), "eps": self.eps * root}

    def build(self, ctx, param: str, grad: str) -> None:
        b1, b2 = self.betas
        decoupled = self.decoupled and self.weight_decay
        g = grad if decoupled else self._decayed(ctx, param, grad)
        m, v = ctx.state("exp_avg"), ctx.state("exp_avg_sq")
        new_m = ctx.op("add", [ctx.op("multiply", [m, ctx.constant(b1)]),
                               ctx.op("multiply", [g, ctx.constant(1.0 - b1)])])
        new_v = ctx.op("add", [ctx.op("multiply", [v, ctx.constant(b2)]),
                               ctx.op("multiply", [ctx.op("square", [g]), ctx.constant(1.0 - b2)])])
        denom = ctx.op("add", [ctx.op("sqrt", [new_v]), ctx.scalar("eps")])
        step = ctx.op("multiply", [ctx.op("multiply", [new_m, ctx.op("reciprocal", [denom])]), ctx.scalar("lr")])
        ctx.write(m, new_m)
        ctx.write(v, new_v)
        if decoupled:   # p (1 - lr wd) - step = p - (step + lr wd p)
            decay = ctx.constant(self.learning_rate * self.weight_decay)
            step = ctx.op("add", [step, ctx.op("multiply", [param, decay])])
        ctx.update(step)

    def torch_optimizer(self, params):
        import torch
        return torch.optim.Adam(params, lr=self.learning_rate, betas=self.betas, eps=self.eps,
                                weight_decay=self.weight_decay)


class AdamW(Adam):
    """torch.optim.AdamW: Adam with decoupled weight decay, p *= 1 - lr * weight_decay before the update."""

    decoupled = True

    def __init__(self, learning_rate: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2):
        super().__init__(learning_rate, betas, eps, weight_decay)

    def torch_optimizer(self, params):
        import torch
        return torch.optim.AdamW(params, lr=self.learning_rate, betas=self.betas, eps=self.eps,
                                 weight_decay=self.weight_decay)
