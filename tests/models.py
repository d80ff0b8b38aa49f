"""Test models: PyBudaModule MLP and attention block, a torch model with a host op between two device parts (the
MNIST CNN lives in pybuda.tools.models)."""
from __future__ import annotations

import torch

import pybuda


class MLP(pybuda.PyBudaModule):
    """Two linear layers with GELU and a softmax head."""

    def __init__(self, name: str = "mlp", d_in: int = 64, hidden: int = 128, d_out: int = 10):
        super().__init__(name)
        g = torch.Generator().manual_seed(1)
        self.w1 = pybuda.Parameter(torch.randn(d_in, hidden, generator=g) / d_in ** 0.5)
        self.b1 = pybuda.Parameter(torch.randn(hidden, generator=g) * 0.1)
        self.w2 = pybuda.Parameter(torch.randn(hidden, d_out, generator=g) / hidden ** 0.5)

    def forward(self, x):
        h = pybuda.op.Matmul("mm1", x, self.w1)
        h = pybuda.op.Gelu("gelu1", pybuda.op.Add("bias1", h, self.b1))
        return pybuda.op.Softmax("softmax", pybuda.op.Matmul("mm2", h, self.w2), dim=-1)


class Attention(pybuda.PyBudaModule):
    """One multi-head self-attention block with a residual and layernorm; heads via hslice/hstack."""

    def __init__(self, name: str = "attn", hidden: int = 64, heads: int = 2):
        super().__init__(name)
        g = torch.Generator().manual_seed(2)
        self.heads = heads
        self.scale = (hidden // heads) ** -0.5
        for p in ("q", "k", "v", "o"):
            setattr(self, f"w{p}", pybuda.Parameter(torch.randn(hidden, hidden, generator=g) / hidden ** 0.5))
            setattr(self, f"b{p}", pybuda.Parameter(torch.randn(hidden, generator=g) * 0.1))
        self.gamma = pybuda.Parameter(1.0 + 0.1 * torch.randn(hidden, generator=g))
        self.beta = pybuda.Parameter(0.1 * torch.randn(hidden, generator=g))

    def forward(self, x):
        op = pybuda.op

        def proj(p, a):
            return op.Add(f"{p}_bias", op.Matmul(f"{p}_mm", a, getattr(self, f"w{p}")), getattr(self, f"b{p}"))

        q = op.HSlice("q_heads", proj("q", x), self.heads)
        k = op.HSlice("k_heads", proj("k", x), self.heads)
        v = op.HSlice("v_heads", proj("v", x), self.heads)
        scores = op.Multiply("scale", op.Matmul("qk", q, op.Transpose("kt", k, -2, -1)), self.scale)
        probs = op.Softmax("attn_softmax", scores, dim=-1)
        ctx = op.HStack("ctx", op.Matmul("pv", probs, v), self.heads)
        out = op.Add("residual", proj("o", ctx), x)
        return op.Layernorm("ln", out, self.gamma, self.beta)


def torch_attention(module: Attention, x: torch.Tensor) -> torch.Tensor:
    """The same block in plain torch, from the module's parameter values (an independent reference)."""
    p = {k.split(".")[-1]: v.value() for k, v in module.get_parameters().items()}
    b, s, h = x.shape
    d = h // module.heads

    def heads(t):
        return t.reshape(b, s, module.heads, d).permute(0, 2, 1, 3)

    q, k, v = (heads(x @ p[f"w{n}"] + p[f"b{n}"]) for n in "qkv")
    probs = torch.softmax(q @ k.transpose(-2, -1) * module.scale, dim=-1)
    ctx = (probs @ v).permute(0, 2, 1, 3).reshape(b, s, h)
    out = ctx @ p["wo"] + p["bo"] + x
    return torch.nn.functional.layer_norm(out, (h,), p["gamma"], p["beta"])


def torch_mlp(module: MLP, x: torch.Tensor) -> torch.Tensor:
    p = {k.split(".")[-1]: v.value() for k, v in module.get_parameters().items()}
    h = torch.nn.functional.gelu(x @ p["w1"] + p["b1"])
    return torch.softmax(h @ p["w2"], dim=-1)


class CumsumMiddle(torch.nn.Module):
    """A cumsum (no device lowering: a CPU fallback op) between two linear layers, so between two device parts."""

    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(32, 64)
        self.b = torch.nn.Linear(64, 32)

    def forward(self, x):
        return self.b(torch.cumsum(torch.relu(self.a(x)), dim=-1))
