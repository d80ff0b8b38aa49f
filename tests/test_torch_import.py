"""Tests of the PyTorch frontend (torch.export -> TVM Relax -> pybuda Graph)."""
from __future__ import annotations

import math
import time

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from pybuda.frontend.torch_import import UnsupportedOpError, import_torch
from pybuda.ir import Graph
from pybuda.ops import registry
from pybuda.tools.models import MNISTCNN


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(32, 64)
        self.fc2 = nn.Linear(64, 16)

    def forward(self, x):
        return torch.softmax(self.fc2(F.gelu(self.fc1(x))), dim=-1)


class Attention(nn.Module):
    def __init__(self, hidden: int = 64):
        super().__init__()
        self.q, self.k, self.v = nn.Linear(hidden, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, hidden)
        self.norm = nn.LayerNorm(hidden)
        self.scale = 1.0 / math.sqrt(hidden)

    def forward(self, x):
        q, k, v = self.q(x), self.k(x), self.v(x)
        attn = torch.softmax(q @ k.transpose(-1, -2) * self.scale, dim=-1)
        return self.norm(self.out(attn @ v) + x)


class Misc(nn.Module):
    """Assorted mapped ops, a named buffer and a tuple output."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.register_buffer("gain", torch.linspace(0.5, 1.5, 16))

    def forward(self, x):
        y = self.fc(x) * self.gain
        y = y + torch.rsqrt(x * x + 1.0) + x.pow(2) - x.mean(dim=(-1, -2), keepdim=True)
        y = torch.maximum(y, -y) + torch.minimum(y, x) / 3.0 + F.gelu(y, approximate="tanh")
        z = torch.sigmoid(y).unsqueeze(1).sum(dim=-1) + torch.tanh(y).max()
        return y, z.squeeze(1), torch.exp(-y.abs()).sum(dim=(1, 2))


class Flip(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x):
        return torch.flip(self.fc(x), dims=[1])


class Sort(nn.Module):
    def forward(self, x):
        return torch.sort(x, dim=-1).values * 2.0


class Block(nn.Module):
    def __init__(self, inner: nn.Module):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x) + 1.0


def evaluate(graph: Graph, inputs: list[np.ndarray]) -> list[np.ndarray]:
    """Reference evaluation of an imported graph (which has no edge TMs) with the registry's golden evals."""
    values: dict[str, np.ndarray] = dict(zip(graph.input_names, inputs))
    for name in graph.topo_order():
        node = graph.node(name)
        operands = graph.operands(name)
        assert all(not o.tms for o in operands), f"imported graph has edge TMs on {name}"
        if node.kind in ("parameter", "constant"):
            values[name] = node.value
        elif node.kind == "op":
            values[name] = registry.evaluate(node.op_type, [values[o.src] for o in operands], node.attrs)
            assert values[name].shape == node.shape, name
        elif node.kind == "output":
            values[name] = values[operands[0].src]
    return [values[n] for n in graph.output_names]


def check_numerics(model: nn.Module, inputs: tuple[torch.Tensor, ...], rtol: float = 1e-4) -> Graph:
    graph = import_torch(model, inputs)
    with torch.no_grad():
        ref = model(*(x[:1] for x in inputs))
    refs = [r.numpy() for r in (ref if isinstance(ref, tuple) else (ref,))]
    outs = evaluate(graph, [x[:1].numpy() for x in inputs])
    assert len(outs) == len(refs)
    for out, r in zip(outs, refs):
        assert out.shape == r.shape
        np.testing.assert_allclose(out, r, rtol=rtol, atol=rtol * max(1.0, float(np.abs(r).max())))
    return graph


def signature(graph: Graph) -> list:
    return [(n.name, n.kind, n.op_type, n.shape, n.attrs, [o.src for o in graph.operands(n.name)])
            for n in graph.nodes()]


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def test_mnist_numerics_and_structure():
    graph = check_numerics(MNISTCNN(), (torch.randn(4, 1, 28, 28),))
    assert graph.name == "model"
    assert graph.input_names == ["x"] and graph.node("x").shape == (1, 1, 28, 28)
    assert graph.output_names == ["output_0"] and graph.node("output_0").shape == (1, 10)
    ops = graph.op_names()
    assert ops[:4] == ["conv2d_0", "reshape_1", "add_2", "relu_3"]
    assert [graph.node(n).op_type for n in ops].count("conv2d") == 2
    assert graph.node("conv2d_0").attrs == {"stride": [1, 1], "padding": [0, 0, 0, 0], "dilation": [1, 1],
                                            "groups": 1}
    pool = next(graph.node(n) for n in ops if graph.node(n).op_type == "max_pool2d")
    assert pool.attrs["kernel"] == [2, 2] and pool.shape == (1, 64, 12, 12)


def test_mnist_parameter_names_and_values():
    model = MNISTCNN()
    graph = import_torch(model, (torch.randn(2, 1, 28, 28),))
    params = graph.nodes("parameter")
    state = model.state_dict()
    assert [p.name for p in params] == list(state)
    for p in params:
        np.testing.assert_array_equal(p.value, state[p.name].numpy())
    assert not model.training


def test_import_is_deterministic():
    model = MNISTCNN()
    x = torch.randn(2, 1, 28, 28)
    assert signature(import_torch(model, (x,))) == signature(import_torch(model, (x,)))


def test_mlp_gelu_softmax():
    graph = check_numerics(MLP(), (torch.randn(8, 32),))
    types = [graph.node(n).op_type for n in graph.op_names()]
    assert "gelu" in types and "softmax" in types
    assert graph.node(graph.output_source("output_0")).op_type == "softmax"


def test_attention_block():
    graph = check_numerics(Attention(64), (torch.randn(2, 32, 64),))
    types = [graph.node(n).op_type for n in graph.op_names()]
    assert types.count("matmul") == 6 and "layernorm" in types and "softmax" in types
    assert graph.node("output_0").shape == (1, 32, 64)
    assert {p.name for p in graph.nodes("parameter")} == set(Attention(64).state_dict())


def test_misc_ops_buffers_and_tuple_outputs():
    model = Misc()
    graph = check_numerics(model, (torch.randn(3, 4, 16),))
    assert graph.output_names == ["output_0", "output_1", "output_2"]
    assert graph.node("gain").kind == "parameter"
    np.testing.assert_array_equal(graph.node("gain").value, model.gain.numpy())
    assert all(n.name.startswith("const_") for n in graph.nodes("constant"))


@pytest.mark.parametrize("inner, relax_op", [(Flip(), "relax.flip"), (Sort(), "relax.argsort")])
def test_unmapped_relax_op_raises(inner, relax_op):
    start = time.perf_counter()
    with pytest.raises(UnsupportedOpError) as info:
        import_torch(Block(inner), (torch.randn(2, 6, 8),))
    assert time.perf_counter() - start < 10.0
    msg = str(info.value)
    assert relax_op in msg and "'inner'" in msg and "neither on the device nor on the host" in msg
    assert "test_torch_import.py" in msg  # the model source line
    assert isinstance(info.value, ValueError)


def test_op_unsupported_by_tvm_raises():
    class Median(nn.Module):
        def forward(self, x):
            return torch.median(x, dim=-1).values

    with pytest.raises(UnsupportedOpError, match=r"median.*neither on the device nor on the host"):
        import_torch(Median(), (torch.randn(1, 4, 4),))


def test_amax_which_tvm_lacks_imports_as_a_max_reduction():
    class AMax(nn.Module):
        def forward(self, x):
            return torch.amax(x, dim=-1, keepdim=True) - x

    x = torch.randn(1, 4, 6)
    graph = import_torch(AMax(), (x,))
    assert "reduce_max" in {n.op_type for n in graph.nodes("op")}
