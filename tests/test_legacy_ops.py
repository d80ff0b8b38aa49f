"""The legacy `pybuda.op` surface (issue 35): each op with its legacy signature and keyword names, compiled in a
PyBudaModule, simulated and compared with torch."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from fn_module import FnModule

import pybuda
from pybuda.errors import UserInputError
from pybuda.verify import pcc

op = pybuda.op
SHAPE = (1, 2, 32, 64)


def _x(seed: int = 0, shape=SHAPE) -> torch.Tensor:
    """Values on a 1/8 grid (comparisons see exact ties), none within 1/16 of 0 unless 0 itself."""
    return torch.round(torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * 8) / 8


def _const(values) -> pybuda.Tensor:
    """An integer index as a constant tensor of the module."""
    return pybuda.Tensor.create_from_torch(torch.tensor(values, dtype=torch.float32), constant=True)


POSITIVE = {"x": lambda: _x().abs() + 0.5}
MASK = {"x": lambda: (_x() > 0).float()}

DEFAULTS = {"x": _x, "y": lambda: _x(1)}
# (id, the pybuda forward, the torch reference, inputs: name -> maker, in order (default: DEFAULTS))
CASES = [
    ("Abs", lambda m, x: op.Abs("abs", x), torch.abs, None),
    ("Exp", lambda m, x: op.Exp("", operandA=x), lambda x: torch.exp(x), None),
    ("Log", lambda m, x: op.Log("log", x), torch.log, POSITIVE),
    ("Reciprocal", lambda m, x: op.Reciprocal("r", x), torch.reciprocal, POSITIVE),
    ("Sqrt", lambda m, x: op.Sqrt("s", x), torch.sqrt, POSITIVE),
    ("Sigmoid", lambda m, x: op.Sigmoid("s", x), torch.sigmoid, None),
    ("Sine", lambda m, x: op.Sine("s", x), torch.sin, None),
    ("Cosine", lambda m, x: op.Cosine("c", x), torch.cos, None),
    ("Tanh", lambda m, x: op.Tanh("t", x), torch.tanh, None),
    ("LogicalNot", lambda m, x: op.LogicalNot("n", x), lambda x: (x == 0).float(), MASK),
    ("Relu", lambda m, x: op.Relu("r", x), torch.relu, None),
    ("LeakyRelu", lambda m, x: op.LeakyRelu("lr", x, alpha=0.1), lambda x: torch.nn.functional.leaky_relu(x, 0.1),
     None),
    ("Gelu", lambda m, x: op.Gelu("g", x), torch.nn.functional.gelu, None),
    ("Clip", lambda m, x: op.Clip("c", x, min=-0.5, max=0.75), lambda x: torch.clamp(x, -0.5, 0.75), None),
    ("Pow", lambda m, x: op.Pow("p", x, 3), lambda x: x ** 3, None),
    ("Identity", lambda m, x: op.Relu("r", op.Identity("i", x)), torch.relu, None),
    ("Identity-unsqueeze", lambda m, x: op.Identity("i", x, unsqueeze="unsqueeze", unsqueeze_dim=2),
     lambda x: x.unsqueeze(2), None),
    ("Buffer", lambda m, x: op.Buffer("b", op.Exp("e", x)), torch.exp, None),
    ("Argmax-dim", lambda m, x: op.Argmax("a", x, dim=-1), lambda x: torch.argmax(x, -1, keepdim=True).float(), None),
    ("Argmax-all", lambda m, x: op.Argmax("a", x),
     lambda x: torch.argmax(x.reshape(1, -1), -1).float().reshape(1, 1, 1, 1), None),
    ("Add", lambda m, x, y: op.Add("a", operandA=x, operandB=y), torch.add, None),
    ("Subtract", lambda m, x, y: op.Subtract("s", x, y), torch.sub, None),
    ("Multiply", lambda m, x, y: op.Multiply("m", x, y), torch.mul, None),
    ("Divide", lambda m, x, y: op.Divide("d", x, y), torch.div, {"y": POSITIVE["x"]}),
    ("Max", lambda m, x, y: op.Max("m", x, y), torch.maximum, None),
    ("Min", lambda m, x, y: op.Min("m", x, y), torch.minimum, None),
    ("Power", lambda m, x, y: op.Power("p", x, y), torch.pow, {"x": POSITIVE["x"]}),
    ("Equal", lambda m, x, y: op.Equal("e", x, y), lambda x, y: (x == y).float(), None),
    ("NotEqual", lambda m, x, y: op.NotEqual("e", x, y), lambda x, y: (x != y).float(), None),
    ("Greater", lambda m, x, y: op.Greater("g", x, y), lambda x, y: (x > y).float(), None),
    ("GreaterEqual", lambda m, x, y: op.GreaterEqual("g", x, y), lambda x, y: (x >= y).float(), None),
    ("Less", lambda m, x, y: op.Less("l", x, y), lambda x, y: (x < y).float(), None),
    ("LessEqual", lambda m, x, y: op.LessEqual("l", x, y), lambda x, y: (x <= y).float(), None),
    ("LogicalAnd", lambda m, x, y: op.LogicalAnd("a", x, y), lambda x, y: ((x != 0) & (y != 0)).float(),
     {"x": MASK["x"], "y": lambda: (_x(1) > 0).float()}),
    ("Heaviside", lambda m, x, y: op.Heaviside("h", x, y), torch.heaviside, None),
    ("HStack-all", lambda m, x: op.HStack("h", x), lambda x: torch.cat(list(x.unbind(1)), -1).unsqueeze(1), None),
    ("VStack-all", lambda m, x: op.VStack("v", x), lambda x: torch.cat(list(x.unbind(1)), -2).unsqueeze(1), None),
    ("Transpose-keywords", lambda m, x: op.Transpose("t", operandA=x, dim0=-2, dim1=-1),
     lambda x: x.transpose(-2, -1), None),
    ("Index", lambda m, x: op.Index("i", x, dim=-1, start=8, stop=40), lambda x: x[..., 8:40], None),
    ("Index-stride", lambda m, x: op.Index("i", x, -2, 1, -1, 2), lambda x: x[..., 1:31:2, :], None),
    ("Broadcast", lambda m, x: op.Broadcast("b", op.ReduceSum("r", x, -2), -2, 64),
     lambda x: x.sum(-2, keepdim=True).expand(1, 2, 64, 64), None),
    ("CumSum", lambda m, x: op.CumSum("c", x, axis=-2), lambda x: torch.cumsum(x, -2), None),
    ("Repeat", lambda m, x: op.Repeat("r", x, [1, 1, 2, 1]), lambda x: x.repeat(1, 1, 2, 1), None),
    ("Unsqueeze-Squeeze", lambda m, x: op.Squeeze("s", op.Exp("e", op.Unsqueeze("u", x, 1)), 1), torch.exp, None),
    ("Concatenate", lambda m, x, y: op.Concatenate("c", x, op.Index("i", y, -1, 0, 24), x, axis=-1),
     lambda x, y: torch.cat([x, y[..., :24], x], -1), None),
    ("Stack", lambda m, x, y: op.Stack("s", x, y, axis=1), lambda x, y: torch.stack([x, y], 1), None),
    ("Where", lambda m, c, x, y: op.Where("w", c, x, y), lambda c, x, y: torch.where(c != 0, x, y),
     {"c": MASK["x"], "x": lambda: _x(1), "y": lambda: _x(2)}),
    ("AdvIndex-rows", lambda m, x: op.AdvIndex("ai", x, _const([5, 0, 17, 3]), dim=-2),
     lambda x: x[..., [5, 0, 17, 3], :], None),
    ("AdvIndex-parameter", lambda m, x: op.Matmul("mm", x, op.AdvIndex("ai", m.w, _const(ROWS))),
     lambda x: x @ W[ROWS], {"x": lambda: _x(shape=(1, 32, len(ROWS)))}),
    ("AdvIndex-runtime", lambda m, x, i: op.Exp("e", op.AdvIndex("ai", x, i, dim=-2)),
     lambda x, i: torch.exp(x[..., i[0].long(), :]), {"x": _x, "i": lambda: torch.tensor([[3.0, 5.0, 31.0]])}),
    ("IndexCopy-rows", lambda m, x, y: op.IndexCopy("ic", x, _const([30, 2]), op.Index("i", y, -2, 0, 2), dim=-2),
     lambda x, y: x.index_copy(-2, torch.tensor([30, 2]), y[..., 0:2, :]), None),
    ("IndexCopy-cols", lambda m, x, y: op.IndexCopy("ic", x, _const([1]), op.Index("i", y, -1, 5), dim=-1),
     lambda x, y: x.index_copy(-1, torch.tensor([1]), y[..., 5:6]), None),
    ("IndexCopy-runtime", lambda m, x, i, y: op.IndexCopy("ic", x, i, y, dim=-1),
     lambda x, i, y: x.index_copy(-1, i[0].long(), y),
     {"x": _x, "i": lambda: torch.tensor([[9.0, 4.0]]), "y": lambda: _x(1, shape=(1, 2, 32, 2))}),
    ("Narrow", lambda m, x: op.Narrow("n", x, -1, 3, 40, 64), lambda x: x[..., 3:43], None),
    ("PadTile", lambda m, x: op.PadTile("p", op.Index("i", x, -1, 0, 40), -1, 40),
     lambda x: torch.nn.functional.pad(x[..., :40], (0, 24)), None),
    ("PixelShuffle", lambda m, x: op.PixelShuffle("ps", x, 2), lambda x: torch.nn.functional.pixel_shuffle(x, 2),
     {"x": lambda: _x(shape=(1, 8, 8, 16))}),
    ("BinaryStack-cols", lambda m, x, y: op.BinaryStack("bs", x, y, -1),
     lambda x, y: torch.stack([x, y], -1).flatten(-2), None),
    ("BinaryStack-rows", lambda m, x, y: op.BinaryStack("bs", x, y, -2),
     lambda x, y: torch.stack([x, y], -2).flatten(-3, -2), None),
    ("Tilize", lambda m, x: op.Exp("e", op.Tilize("t", x)), torch.exp, None),
    ("GroupedReduceAvg", lambda m, x: op.GroupedReduceAvg("g", x, -2, 4),
     lambda x: x.reshape(1, 2, 4, 8, 64).mean(-2), None),
    ("GroupedReduceAvg-keep", lambda m, x: op.GroupedReduceAvg("g", x, -1, 8, keep_dims=True),
     lambda x: x.reshape(1, 2, 32, 8, 8).mean(-1, keepdim=True).expand(1, 2, 32, 8, 8).reshape(SHAPE), None),
    ("Matmul-bias", lambda m, x: op.Matmul("mm", x, m.w, bias=m.b), lambda x: x @ W + B, None),
    ("Embedding", lambda m, i: op.Embedding("emb", m.table, i), lambda i: TABLE[i.long()],
     {"i": lambda: torch.randint(0, 40, (1, 32), generator=torch.Generator().manual_seed(3)).float()}),
]
W = torch.randn(64, 32, generator=torch.Generator().manual_seed(4)) / 8
ROWS = [3, 60, 7, 8, 1, 33]
B = torch.randn(32, generator=torch.Generator().manual_seed(5))
TABLE = torch.randn(40, 64, generator=torch.Generator().manual_seed(6))


@pytest.mark.parametrize("forward, reference, inputs", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_legacy_op_matches_torch(forward, reference, inputs):
    arity = forward.__code__.co_argcount - 1
    makers = inputs if inputs and len(inputs) == arity else {**dict(list(DEFAULTS.items())[:arity]), **(inputs or {})}
    values = [make() for make in makers.values()]
    model = FnModule(forward, w=W, b=B, table=TABLE)
    compiled = pybuda.compile(model, *values, config=pybuda.CompilerConfig(default_df_override="Float32"),
                              output_dir=None)
    out = compiled(*values)
    out = out[0] if isinstance(out, (tuple, list)) else out
    expected = reference(*values)
    assert tuple(out.shape) == tuple(expected.shape)
    assert pcc(out.numpy(), expected.numpy()) >= 0.999
    assert np.allclose(out.numpy(), expected.numpy(), atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("build, message", [
    (lambda x: op.CumSum("c", x, -1, exclusive=True), "exclusive=True is not supported"),
    (lambda x: op.Index("i", x, -1, 70), "legal: 0 <= start < stop <= 64"),
    (lambda x: op.Squeeze("s", x, -1), "dim -1 has size 64"),
    (lambda x: op.Repeat("r", x, [2, 2]), "2 factors for a 4-D tensor"),
    (lambda x: op.Transpose("t", x, -2, -1, z_dim_slice=4), "z_dim_slice=4"),
    (lambda x: op.Identity("i", x, unsqueeze="squeeze", unsqueeze_dim=0), "unsqueeze='squeeze'"),
    (lambda x: op.BudaPad("p", x, (1, 1), 0.0), "BudaPad 'p': a legacy Buda-IR internal"),
    (lambda x: op.PadTile("p", x, -1, 40), "dim -1 has length 64, original_length is 40"),
    (lambda x: op.PixelShuffle("ps", x, 2), "2 channels, upscale_factor 2"),
    (lambda x: op.GroupedReduceAvg("g", x, -2, 5), "dim -2, groups 5"),
    (lambda x: op.IndexCopy("ic", x, _const([1, 2]), x, dim=-1), r"legal: value shape \(1, 2, 32, 2\)"),
    (lambda x: op.AdvIndex("ai", x, op.Reshape("r", x, (2, 2048)), dim=-1), "holds one list per sample"),
])
def test_legacy_op_misuse_names_the_op_and_what_is_legal(build, message):
    model = FnModule(lambda m, x: build(x))
    with pytest.raises(UserInputError, match=message):
        pybuda.compile(model, _x(), output_dir=None)


def test_torch_leaky_relu_compiles_through_the_same_registry_op():
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.LeakyReLU(0.2)).eval()
    x = _x(shape=(2, 32, 64))
    compiled = pybuda.compile(model, x, config=pybuda.CompilerConfig(default_df_override="Float32"), output_dir=None)
    out = compiled(x)
    out = out[0] if isinstance(out, (tuple, list)) else out
    with torch.no_grad():
        expected = model(x)
    assert pcc(out.numpy(), expected.numpy()) >= 0.999
    assert np.allclose(out.numpy(), expected.numpy(), atol=2e-2, rtol=2e-2)


def test_buffer_stays_an_op_of_its_own_in_the_netlist():
    """Legacy Buffer: a nop the compiler neither removes nor fuses (the ops around it would fuse without it)."""
    def forward(m, x):
        e = op.Exp("e", x)
        return op.Add("a", op.Buffer("buf", e), op.Sqrt("s", e))

    x = _x().abs()
    compiled = pybuda.compile(FnModule(forward), x, output_dir=None)
    ops = next(iter(compiled.netlist.graphs.values())).ops
    assert ops["buf"].type == "nop"
    out = compiled(x)
    out = out[0] if isinstance(out, (tuple, list)) else out
    assert pcc(out.numpy(), (torch.exp(x) + torch.sqrt(torch.exp(x))).numpy()) >= 0.99
    def unbuffered_forward(m, x):
        e = op.Exp("e", x)
        return op.Add("a", e, op.Sqrt("s", e))

    unbuffered = pybuda.compile(FnModule(unbuffered_forward), x, output_dir=None)
    assert any(o.type == "fused_op" for o in next(iter(unbuffered.netlist.graphs.values())).ops.values())


def _run(model, *inputs):
    compiled = pybuda.compile(model, *inputs, config=pybuda.CompilerConfig(default_df_override="Float32"),
                              output_dir=None)
    out = compiled(*inputs)
    return compiled, (out[0] if isinstance(out, (tuple, list)) else out)


def test_ops_on_parameters_and_constants_only_are_folded_before_the_device():
    """Legacy consteval subgraphs: ops without a traced operand (a Parameter times a number, a Constant, Parameter
    arithmetic) are traced into the graph and evaluated at compile time."""
    def forward(m, x):
        scaled = op.Multiply("scale", m.w, 0.5)                  # operands: a Parameter and a number
        shifted = scaled + op.Constant("one", constant=1.0)       # Parameter-derived + a Constant op
        bias = 2.0 * m.b - m.b                                    # arithmetic on a Parameter
        return op.Add("out", op.Matmul("mm", x, shifted), bias)

    x = _x(shape=(1, 32, 64))
    compiled, out = _run(FnModule(forward, w=W, b=B), x)
    assert pcc(out.numpy(), (x @ (W * 0.5 + 1.0) + B).numpy()) >= 0.999
    ops = next(iter(compiled.netlist.graphs.values())).ops
    assert {o.type for o in ops.values()} <= {"matmul", "add", "fused_op", "nop"}     # scale and one were folded
    assert "scale" not in ops and "one" not in ops


def test_module_constants_and_constant_tensors():
    class WithConstants(pybuda.PyBudaModule):
        def __init__(self):
            super().__init__("consts")
            self.add_constant("offset")
            self.set_constant("offset", torch.full((1, 64), 0.25))
            self.scale = pybuda.Tensor.create_from_torch(torch.full((1, 64), 3.0), constant=True)

        def forward(self, x):
            return op.Multiply("m", op.Add("a", x, self.get_constant("offset")), self.scale)

    x = _x(shape=(1, 32, 64))
    _, out = _run(WithConstants(), x)
    assert np.allclose(out.numpy(), ((x + 0.25) * 3.0).numpy(), atol=1e-3)
    module = WithConstants()
    module.add_constant("later", shape=(2, 2))
    assert module.get_constant("later").shape == (2, 2)
    with pytest.raises(UserInputError, match="constant 'missing' is not declared"):
        module.get_constant("missing")
    with pytest.raises(UserInputError, match="constant 'offset' already exists"):
        module.add_constant("offset")


def test_legacy_spellings_of_parameters_and_inputs():
    p = pybuda.Parameter.create_from_torch(torch.ones(2, 3))
    assert p.shape == (2, 3) and p.requires_grad
    x = torch.ones(2, 3)
    assert pybuda.Tensor.create_from_torch(x) is x             # an input is the torch tensor itself
    with pytest.raises(UserInputError, match="dev_data_format=.*configure_mixed_precision"):
        pybuda.Parameter(2, 3, dev_data_format="Float16_b")
    with pytest.raises(UserInputError, match="dev_data_format"):
        pybuda.Tensor.create_from_torch(x, dev_data_format="Bfp8_b")
    with pytest.raises(pybuda.errors.UserTypeError, match="outside a PyBudaModule's forward"):
        op.Multiply("m", p, 2.0)


F = torch.nn.functional
IMAGE = (1, 8, 16, 16)
KERNEL3 = torch.randn(16, 8, 3, 3, generator=torch.Generator().manual_seed(7)) / 8
KERNEL2 = torch.randn(16, 8, 2, 2, generator=torch.Generator().manual_seed(8)) / 8
CONV_BIAS = torch.randn(16, generator=torch.Generator().manual_seed(9))


@pytest.mark.parametrize("forward, reference", [
    (lambda m, x: op.Conv2d("c", x, m.k3, m.cb), lambda x: F.conv2d(x, KERNEL3, CONV_BIAS, padding=1)),
    (lambda m, x: op.Conv2d("c", x, m.k2), lambda x: F.conv2d(F.pad(x, (1, 0, 1, 0)), KERNEL2)),    # legacy "same"
    (lambda m, x: op.Conv2d("c", x, m.k3, stride=2, padding=[0, 1, 1, 0]),        # [left, right, top, bottom]
     lambda x: F.conv2d(F.pad(x, (0, 1, 1, 0)), KERNEL3, stride=2)),
    (lambda m, x: op.Conv2d("c", x, m.k3, padding=(2, 1), dilation=2),
     lambda x: F.conv2d(x, KERNEL3, padding=(2, 1), dilation=2)),
    (lambda m, x: op.Conv2d("c", op.Transpose("t", op.Transpose("t2", x, -3, -2), -2, -1), m.k3, channel_last=True),
     lambda x: F.conv2d(x, KERNEL3, padding=1).permute(0, 2, 3, 1)),
    (lambda m, x: op.MaxPool2d("p", x, 3), lambda x: F.max_pool2d(x, 3, stride=1, padding=1)),
    (lambda m, x: op.MaxPool2d("p", x, 2, stride=2, padding=0), lambda x: F.max_pool2d(x, 2)),
    (lambda m, x: op.AvgPool2d("p", x, 3, count_include_pad=False),
     lambda x: F.avg_pool2d(x, 3, stride=1, padding=1, count_include_pad=False)),
    (lambda m, x: op.AvgPool2d("p", x, 3, stride=2, padding=0, ceil_mode=True),
     lambda x: F.avg_pool2d(x, 3, stride=2, ceil_mode=True)),
], ids=["same-odd", "same-even", "lrtb-stride", "pair-dilation", "channel-last", "maxpool-default",
        "maxpool-2x2", "avgpool-same", "avgpool-ceil"])
def test_legacy_conv_and_pool_defaults_and_padding(forward, reference):
    x = _x(shape=IMAGE)
    _, out = _run(FnModule(forward, k3=KERNEL3, k2=KERNEL2, cb=CONV_BIAS), x)
    expected = reference(x)
    assert tuple(out.shape) == tuple(expected.shape)
    assert pcc(out.numpy(), expected.numpy()) >= 0.999


def test_legacy_nn_modules_match_torch():
    torch.manual_seed(0)

    class Net(pybuda.PyBudaModule):
        def __init__(self):
            super().__init__("net")
            self.conv = pybuda.op.nn.Conv2dModule("conv", 8, 16, (3, 3))
            self.pool = pybuda.op.nn.MaxPool2dModule("pool", 2, stride=2, padding=0)
            self.avg = pybuda.op.nn.AvgPool2dModule("avg", 2, stride=2, padding=0)
            self.fc = pybuda.op.nn.Linear("fc", 4, 10)

        def forward(self, x):
            return self.fc(self.avg(op.Relu("relu", self.pool(self.conv(x)))))

    net = Net()
    p = {name: v.value() for name, v in net.get_parameters().items()}
    assert set(p) == {"conv.weights", "conv.bias", "fc.weights", "fc.bias"}
    x = _x(shape=IMAGE)
    _, out = _run(net, x)
    h = F.avg_pool2d(F.relu(F.max_pool2d(F.conv2d(x, p["conv.weights"], p["conv.bias"], padding=1), 2)), 2)
    expected = h @ p["fc.weights"] + p["fc.bias"]
    assert pcc(out.numpy(), expected.numpy()) >= 0.999


@pytest.mark.parametrize("reduce, reference", [
    (op.ReduceSum, lambda x: x.sum(-3, keepdim=True)),
    (op.ReduceAvg, lambda x: x.mean(-3, keepdim=True)),
    (op.ReduceMax, lambda x: x.amax(-3, keepdim=True)),
], ids=["sum", "avg", "max"])
@pytest.mark.parametrize("shape", [(1, 6, 32, 64), (1, 40, 1, 1), (1, 3, 5, 7)], ids=["tiles", "vector", "odd"])
def test_reduce_over_z_runs_on_the_device(reduce, reference, shape):
    """A reduction over dim -3 (legacy tests reduce z) goes through the (R*C, Z) layout; no host fallback."""
    x = _x(shape=shape)
    compiled, out = _run(FnModule(lambda m, x: reduce("r", x, -3)), x)
    assert tuple(out.shape) == tuple(reference(x).shape)
    assert out.numel() == 1 or pcc(out.numpy(), reference(x).numpy()) >= 0.999
    assert np.allclose(out.numpy(), reference(x).numpy(), atol=2e-2, rtol=2e-2)
    assert compiled.host_ops == []


RUNNING = {"gamma": torch.rand(8) + 0.5, "beta": torch.randn(8), "mean": torch.randn(8), "var": torch.rand(8) + 0.5}


@pytest.mark.parametrize("forward, reference", [
    (lambda m, x: op.Pad("p", x, (1, 2)), lambda x: F.pad(x, (1, 2))),
    (lambda m, x: op.Pad("p", x, (1, 2, 3, 0), mode="replicate"), lambda x: F.pad(x, (1, 2, 3, 0), mode="replicate")),
    (lambda m, x: op.Pad("p", x, (2, 1, 1, 2), mode="reflect"), lambda x: F.pad(x, (2, 1, 1, 2), mode="reflect")),
    (lambda m, x: op.Resize2d("r", x, (32, 32)), lambda x: F.interpolate(x, size=(32, 32), mode="nearest")),
    (lambda m, x: op.Resize2d("r", x, (24, 40), method="bilinear"),
     lambda x: F.interpolate(x, size=(24, 40), mode="bilinear", align_corners=False)),
    (lambda m, x: op.Resize2d("r", x, (32, 32), method="bilinear", align_corners=True),
     lambda x: F.interpolate(x, size=(32, 32), mode="bilinear", align_corners=True)),
    (lambda m, x: op.Batchnorm("bn", x, m.gamma, m.beta, m.mean, m.var),
     lambda x: F.batch_norm(x, RUNNING["mean"], RUNNING["var"], RUNNING["gamma"], RUNNING["beta"], eps=1e-5)),
], ids=["pad-constant", "pad-replicate", "pad-reflect", "resize-nearest", "resize-bilinear", "resize-corners",
        "batchnorm"])
def test_legacy_pad_resize_and_batchnorm(forward, reference):
    x = _x(shape=IMAGE)
    compiled, out = _run(FnModule(forward, **RUNNING), x)
    expected = reference(x)
    assert tuple(out.shape) == tuple(expected.shape)
    assert pcc(out.numpy(), expected.numpy()) >= 0.999
    assert np.allclose(out.numpy(), expected.numpy(), atol=3e-2, rtol=3e-2)


def test_inputs_follow_the_legacy_microbatch_rule():
    """The leading dim of every input is the microbatch (a 2-D input is a microbatch of rows, as in legacy); an input
    of a different microbatch fails saying what to pass."""
    x = _x(shape=(32, 64))
    _, out = _run(FnModule(lambda m, a, b: op.Add("a", a, b)), x, x)
    assert tuple(out.shape) == (32, 64) and np.allclose(out.numpy(), (2 * x).numpy())
    with pytest.raises(UserInputError, match=r"sample input 1 has leading \(microbatch\) dim 1, input 0 has 4.*"
                                             r"input.expand\(4, \*input.shape\[1:\]\)"):
        pybuda.compile(FnModule(lambda m, a, b: op.Add("a", a, b)), _x(shape=(4, 32, 32)), _x(shape=(1, 32, 32)),
                       output_dir=None)


def test_pytorch_module_wraps_a_torch_module_under_its_name():
    torch.manual_seed(0)
    inner = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU()).eval()
    x = _x(shape=(2, 32, 64))
    compiled, out = _run(pybuda.PyTorchModule("wrapped", inner), x)
    assert compiled.name == "wrapped"
    with torch.no_grad():
        assert pcc(out.numpy(), inner(x).numpy()) >= 0.999
    with pytest.raises(pybuda.UserTypeError, match="PyTorchModule 'bad': expected a torch.nn.Module"):
        pybuda.PyTorchModule("bad", lambda t: t)


@pytest.mark.parametrize("forward, reference", [
    (lambda m, x: op.Select("s", x, -1, (8, 16), stride=32), lambda x: torch.cat([x[..., 8:24], x[..., 40:56]], -1)),
    (lambda m, x: op.Select("s", x, -2, 3), lambda x: x[..., 3:4, :]),
    (lambda m, x: op.Select("s", x, -3, (0, 2), stride=4), lambda x: x[:, [0, 1, 4, 5]]),
    (lambda m, x, y: op.Interleave("i", x, y, axis=-3, stride=1),
     lambda x, y: torch.stack([x, y], 2).reshape(1, 16, 32, 64)),
], ids=["select-c", "select-r", "select-z", "interleave-z"])
def test_legacy_select_and_interleave(forward, reference):
    values = [_x(seed=k, shape=(1, 8, 32, 64)) for k in range(forward.__code__.co_argcount - 1)]
    compiled, out = _run(FnModule(forward), *values)
    expected = reference(*values)
    assert tuple(out.shape) == tuple(expected.shape)
    assert np.allclose(out.numpy(), expected.numpy(), atol=1e-3)
    assert compiled.host_ops == []


TKERNEL = torch.randn(8, 4, 3, 3, generator=torch.Generator().manual_seed(10)) / 8


@pytest.mark.parametrize("forward, reference, shape", [
    (lambda m, x: op.Conv2dTranspose("t", x, m.tk, stride=2, output_padding=1),
     lambda x: F.conv_transpose2d(x, TKERNEL, stride=2, padding=1, output_padding=1), IMAGE),
    (lambda m, x: op.Conv2dTranspose("t", x, m.tk, padding=0), lambda x: F.conv_transpose2d(x, TKERNEL), IMAGE),
    (lambda m, x: op.MaxPool1d("p", x, 3, stride=2, padding=1), lambda x: F.max_pool1d(x, 3, 2, 1), (1, 8, 64)),
    (lambda m, x: op.AvgPool1d("p", x, 3), lambda x: F.avg_pool1d(x, 3, 1, 1), (1, 8, 64)),
], ids=["transpose-stride2", "transpose-valid", "maxpool1d", "avgpool1d"])
def test_legacy_transposed_convolution_and_1d_pooling(forward, reference, shape):
    x = _x(shape=shape)
    _, out = _run(FnModule(forward, tk=TKERNEL), x)
    expected = reference(x)
    assert tuple(out.shape) == tuple(expected.shape)
    assert pcc(out.numpy(), expected.numpy()) >= 0.999


def test_conv_transpose2d_module_matches_torch():
    torch.manual_seed(0)
    module = pybuda.op.nn.ConvTranspose2dModule("up", 8, 4, 2, stride=2, padding=0)
    p = {name: v.value() for name, v in module.get_parameters().items()}
    x = _x(shape=IMAGE)
    _, out = _run(module, x)
    expected = F.conv_transpose2d(x, p["up.weights"], p["up.bias"], stride=2)
    assert tuple(out.shape) == (1, 4, 32, 32) and pcc(out.numpy(), expected.numpy()) >= 0.999


def test_dram_queue_is_read_through_a_dram_queue_in_the_netlist():
    """Legacy DRAMQueue: its reader reads it from a DRAM queue (an `e2e_` queue) instead of core to core."""
    def forward(m, x):
        return op.Sqrt("s", op.DRAMQueue("q", op.Exp("e", x), num_entries=2))

    x = _x()
    compiled, out = _run(FnModule(forward), x)
    assert np.allclose(out.numpy(), torch.sqrt(torch.exp(x)).numpy(), atol=1e-2, rtol=1e-2)
    graph = next(iter(compiled.netlist.graphs.values()))
    assert graph.ops["q"].type == "nop" and graph.ops["s"].inputs[0].startswith("e2e_")
    assert compiled.netlist.queues[graph.ops["s"].inputs[0]].input == "q"
    with pytest.raises(UserInputError, match="num_entries=0"):
        pybuda.compile(FnModule(lambda m, x: op.DRAMQueue("q", x, num_entries=0)), x, output_dir=None)


class _Projection(pybuda.PyBudaModule):
    """a @ w, w a Parameter made from a shape (legacy: a parameter without a value)."""

    def __init__(self):
        super().__init__("projection")
        self.w = pybuda.Parameter(64, 64)

    def forward(self, a):
        return op.Matmul("mm", a, self.w)


def test_verify_module_compiles_runs_and_checks_against_the_framework():
    from pybuda.verify import TestKind, VerifyConfig, verify_module
    module = _Projection()
    (out,) = verify_module(module, [(1, 32, 64)], VerifyConfig(test_kind=TestKind.INFERENCE, arch="grayskull"),
                           input_params=[{"requires_grad": False}], params_centered_on_zero=True)
    w = module.w.value()
    assert out.shape == (1, 32, 64) and -0.5 <= float(w.min()) and float(w.max()) < 0.5     # drawn again
    torch_model = torch.nn.Sequential(torch.nn.Linear(64, 32), torch.nn.ReLU())
    (out,) = verify_module(torch_model, [(2, 32, 64)], VerifyConfig(arch="wormhole_b0"))
    assert out.shape == (2, 32, 32)


def test_verify_module_fails_a_model_below_the_legacy_tolerance():
    """At Bfp2_b the compile's own netlist check passes (its threshold for that format is 0.1), the legacy
    comparison (PCC 0.99 or allclose at 0.1 x the largest value) does not."""
    from pybuda.verify import VerifyConfig, verify_module
    pybuda.set_configuration_options(default_df_override="Bfp2_b")
    x = _x(shape=(1, 32, 64))
    with pytest.raises(pybuda.VerificationError, match=r"projection output 0: PCC 0\.\d+ < 0\.99"):
        verify_module(_Projection(), [], VerifyConfig(graph_name="projection"), inputs=[x])
    with pytest.raises(UserInputError, match="only 'TTDevice'"):
        verify_module(_Projection(), [(1, 32, 64)], device_type="CPUDevice")
