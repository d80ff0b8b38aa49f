"""CNN path: batchnorm, clip, constant pad, grouped/depthwise conv, average pools, max pools in ceil mode (each op
against torch through every compiler stage), the conv folds and layout rewrites, and small ResNet / MobileNetV2
models end to end (compile, simulate, compare with PyTorch)."""
from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import pybuda
from pybuda.config import CompilerConfig
from pybuda.ir import Graph
from pybuda.ops import add_op, registry
from pybuda.passes.data_formats import assign_data_formats
from pybuda.passes.decompose import decompose
from pybuda.passes.fuse_pad import fuse_into_conv
from pybuda.passes.host_io import hoist_io_transforms
from pybuda.passes.lower import lower
from pybuda.passes.optimize import optimize
from pybuda.stages import STAGES
from pybuda.verify import evaluate_sample, host_inputs, host_outputs, pcc

FLOAT32 = {"default_df_override": "Float32"}
RNG = np.random.default_rng(0)


# ---- single ops through every stage ----------------------------------------------------------------

def _graph(op_type, inputs, params, attrs):
    """One op reading graph inputs `inputs` (name -> shape) and parameters `params` (name -> array), in order."""
    g = Graph("g")
    operands = [g.add_input(n, s) for n, s in inputs.items()] + [g.add_parameter(n, v) for n, v in params.items()]
    g.add_output("out", add_op(g, "op", op_type, operands, attrs))
    return g


def _golden(g, feeds):
    return host_outputs(g, evaluate_sample(g, host_inputs(g, feeds)))[0]


def _check_stages(g, feeds, expected, atol=1e-4):
    """The op's own golden and each stage's graph (decompose, optimize, lower) reproduce `expected`."""
    cfg = CompilerConfig()
    np.testing.assert_allclose(_golden(g, feeds), expected, rtol=1e-4, atol=atol)
    stage = decompose(g.copy(), cfg)
    assert not {n.op_type for n in stage.nodes("op")} & {"batchnorm", "constant_pad", "conv2d", "avg_pool2d",
                                                         "adaptive_avg_pool2d"}
    np.testing.assert_allclose(_golden(stage, feeds), expected, rtol=1e-4, atol=atol)
    stage = hoist_io_transforms(optimize(stage, cfg))
    np.testing.assert_allclose(_golden(stage, feeds), expected, rtol=1e-4, atol=atol)
    low = assign_data_formats(lower(stage, cfg), cfg, "grayskull")
    assert all(registry.get(n.op_type).buda for n in low.nodes("op"))
    np.testing.assert_allclose(_golden(low, feeds), expected, rtol=1e-4, atol=atol)
    return stage, low


def _t(a):
    return torch.from_numpy(np.asarray(a, dtype=np.float32))


def test_batchnorm_matches_torch():
    x = RNG.standard_normal((1, 5, 6, 7)).astype(np.float32)
    p = {"gamma": RNG.uniform(0.5, 1.5, 5), "beta": RNG.standard_normal(5), "mean": RNG.standard_normal(5),
         "var": RNG.uniform(0.5, 2.0, 5)}
    p = {k: v.astype(np.float32) for k, v in p.items()}
    expected = F.batch_norm(_t(x), _t(p["mean"]), _t(p["var"]), _t(p["gamma"]), _t(p["beta"]), eps=1e-3).numpy()
    g = _graph("batchnorm", {"x": x.shape}, p, {"dim": -3, "epsilon": 1e-3})
    _check_stages(g, {"x": x}, expected)


@pytest.mark.parametrize("lo, hi, device_op", [(0.0, 6.0, "nop"), (-1.0, 2.0, "maximum"), (0.0, None, "nop"),
                                               (None, 1.5, "maximum")], ids=["relu6", "both", "relu", "max_only"])
def test_clip_matches_torch(lo, hi, device_op):
    x = (RNG.standard_normal((1, 40, 50)) * 4).astype(np.float32)
    attrs = {k: v for k, v in (("min", lo), ("max", hi)) if v is not None}
    g = _graph("clip", {"x": x.shape}, {}, attrs)
    _, low = _check_stages(g, {"x": x}, torch.clamp(_t(x), lo, hi).numpy())
    assert device_op in {n.op_type for n in low.nodes("op")}
    if (lo, hi) == (0.0, 6.0):  # ReLU6 is one nop with the packer relu clamping to [0, 6]
        (nop,) = low.nodes("op")
        assert nop.attrs == {"relu_en": True, "relu_mode": "max", "relu_threshold": 6.0}


@pytest.mark.parametrize("widths, value", [((1, 2, 0, 1), 0.0), ((0, 1, 3, 0), 0.5)], ids=["zero", "value"])
def test_constant_pad_matches_torch(widths, value):
    x = RNG.standard_normal((1, 3, 5, 6)).astype(np.float32)
    left, right, top, bottom = widths
    g = _graph("constant_pad", {"x": x.shape}, {}, {"pad_width": [0, 0, 0, 0, top, bottom, left, right],
                                                     "value": value})
    _check_stages(g, {"x": x}, F.pad(_t(x), widths, value=value).numpy())


CONVS = [
    # (cin, cout, groups, kernel, stride, padding, image): grouped; depthwise with C <= rows (dense
    # block-diagonal weights); depthwise with C > rows (tap multiply + tap-sum matmul); depthwise 1x1
    (8, 12, 4, 3, 1, 1, 6),
    (16, 16, 16, 3, 2, 1, 9),
    (48, 48, 48, 3, 1, 1, 5),
    (40, 40, 40, 5, 2, (2, 1), 7),
    (8, 8, 8, 1, 1, 0, 4),
]


@pytest.mark.parametrize("cin, cout, groups, kernel, stride, padding, image", CONVS,
                         ids=["grouped", "depthwise_dense", "depthwise_tapsum", "depthwise_5x5_s2", "depthwise_1x1"])
def test_grouped_and_depthwise_conv_match_torch(cin, cout, groups, kernel, stride, padding, image):
    x = RNG.standard_normal((1, cin, image, image)).astype(np.float32)
    w = RNG.standard_normal((cout, cin // groups, kernel, kernel)).astype(np.float32)
    b = RNG.standard_normal(cout).astype(np.float32)
    expected = F.conv2d(_t(x), _t(w), _t(b), stride=stride, padding=padding, groups=groups).numpy()
    g = _graph("conv2d", {"x": x.shape}, {"w": w, "b": b},
               {"stride": stride, "padding": padding if isinstance(padding, int) else list(padding), "groups": groups})
    stage, _ = _check_stages(g, {"x": x}, expected, atol=1e-3)
    tapsum = cout > 32 and kernel > 1
    assert ("multiply" in {n.op_type for n in stage.nodes("op")}) == tapsum


POOLS = [
    ("avg_pool2d", {"kernel": 3, "stride": 2, "padding": 1, "count_include_pad": True}, 9,
     lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=True)),
    ("avg_pool2d", {"kernel": 3, "stride": 2, "padding": 1, "count_include_pad": False}, 9,
     lambda x: F.avg_pool2d(x, 3, 2, 1, count_include_pad=False)),
    ("avg_pool2d", {"kernel": 2, "stride": 2, "ceil_mode": True, "count_include_pad": False}, 7,
     lambda x: F.avg_pool2d(x, 2, 2, ceil_mode=True, count_include_pad=False)),
    ("adaptive_avg_pool2d", {"output_size": [3, 3]}, 7, lambda x: F.adaptive_avg_pool2d(x, 3)),
    ("adaptive_avg_pool2d", {"output_size": [1, 1]}, 6, lambda x: x.mean((2, 3), keepdim=True)),
]


@pytest.mark.parametrize("op_type, attrs, image, reference", POOLS,
                         ids=["avg_incl_pad", "avg_excl_pad", "avg_ceil", "adaptive_3x3", "global_mean"])
def test_average_pools_match_torch(op_type, attrs, image, reference):
    x = RNG.standard_normal((1, 6, image, image)).astype(np.float32)
    g = _graph(op_type, {"x": x.shape}, {}, attrs)
    stage, _ = _check_stages(g, {"x": x}, reference(_t(x)).numpy())
    if attrs.get("output_size") == [1, 1]:  # a global pool of an NCHW input: means over W and H, no layout change
        assert [n.op_type for n in stage.nodes("op")] == ["reduce_avg", "reduce_avg"]


MAX_POOLS = [
    ({"kernel": 3, "stride": 2, "ceil_mode": True}, 8),              # VoVNet's pools: the last window overhangs
    ({"kernel": 3, "stride": 2, "padding": 1, "ceil_mode": True}, 10),
    ({"kernel": 2, "stride": 2, "ceil_mode": True}, 7),
    ({"kernel": 3, "stride": 2, "ceil_mode": True}, 9),              # ceil mode adds no window: as floor
]


@pytest.mark.parametrize("attrs, image", MAX_POOLS, ids=["k3s2", "k3s2p1", "k2s2_odd", "k3s2_exact"])
def test_max_pool_in_ceil_mode_matches_torch(attrs, image):
    x = RNG.standard_normal((1, 6, image, image)).astype(np.float32) - 3.0    # negative: padding must not win
    expected = F.max_pool2d(_t(x), attrs["kernel"], attrs["stride"], attrs.get("padding", 0), ceil_mode=True).numpy()
    g = _graph("max_pool2d", {"x": x.shape}, {}, attrs)
    assert g.node("op").shape == expected.shape
    stage, _ = _check_stages(g, {"x": x}, expected)
    assert "max_pool2d" not in {n.op_type for n in stage.nodes("op")}


class CeilPools(nn.Module):
    """A conv, then a max pool and an average pool in ceil mode (VoVNet's and Inception's downsampling)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.max = nn.MaxPool2d(3, 2, ceil_mode=True)
        self.avg = nn.AvgPool2d(3, 2, padding=1, ceil_mode=True, count_include_pad=False)

    def forward(self, x):
        return self.avg(self.max(torch.relu(self.conv(x))) - 0.5)


def test_ceil_mode_pools_compile_and_match_torch(tmp_path):
    torch.manual_seed(0)
    model, x = CeilPools().eval(), torch.randn(2, 3, 14, 14)
    compiled = pybuda.compile(model, x, output_dir=tmp_path, verify=True)
    with torch.no_grad():
        expected = model(x)
    got = compiled(x)
    assert got.shape == expected.shape == (2, 8, 4, 4)
    assert pcc(got.numpy(), expected.numpy()) >= 0.99


class InceptionBlock(nn.Module):
    """Channel concatenation of three branches with unequal channel counts, none a multiple of 32 (1x1 conv, 3x3
    conv, max pool), read by a strided conv."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 12, 3, padding=1)
        self.a = nn.Conv2d(12, 5, 1)
        self.b = nn.Conv2d(12, 7, 3, padding=1)
        self.pool = nn.MaxPool2d(3, 1, padding=1)
        self.head = nn.Conv2d(5 + 7 + 12, 8, 3, stride=2, padding=1)

    def forward(self, x):
        s = torch.relu(self.stem(x))
        return self.head(torch.cat([torch.relu(self.a(s)), torch.relu(self.b(s)), self.pool(s)], dim=1))


def test_channel_concatenation_compiles_and_matches_torch(tmp_path):
    torch.manual_seed(0)
    model, x = InceptionBlock().eval(), torch.randn(2, 3, 12, 12)
    compiled = pybuda.compile(model, x, output_dir=tmp_path, verify=True)
    assert "concatenate" in {n.op_type for n in compiled.graphs["initial_graph"].nodes("op")}
    assert "concatenate" not in {n.op_type for n in compiled.device_graph.nodes("op")}   # placement matmuls
    with torch.no_grad():
        expected = model(x)
    assert pcc(compiled(x).numpy(), expected.numpy()) >= 0.99


class ChannelSplit(nn.Module):
    """A channel slice on each side of a concatenation (lightweight OpenPose's refinement stages, ShuffleNet's
    split): 20 channels cut at 7 and 13 (neither a multiple of 32), each part through its own conv."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 20, 3, padding=1)
        self.a = nn.Conv2d(7, 6, 3, padding=1)
        self.b = nn.Conv2d(13, 6, 1)

    def forward(self, x):
        s = torch.relu(self.stem(x))
        return torch.cat([self.a(s[:, :7]), self.b(s[:, 7:])], dim=1) * 2


def test_channel_slices_compile_and_match_torch(tmp_path):
    torch.manual_seed(0)
    model, x = ChannelSplit().eval(), torch.randn(2, 3, 10, 10)
    compiled = pybuda.compile(model, x, output_dir=tmp_path, verify=True)
    with torch.no_grad():
        expected = model(x)
    assert pcc(compiled(x).numpy(), expected.numpy()) >= 0.99


def test_unet_skip_concatenation_compiles_and_matches_torch(tmp_path):
    """The published U-Net's constructs, small: transposed 2x2 convs up, skips concatenated along the channels."""
    from pybuda.tools.published import BrainUNet
    torch.manual_seed(0)
    model, x = _randomize_batchnorm(BrainUNet(features=4)).eval(), torch.randn(1, 3, 32, 32)
    with torch.no_grad():
        model.head.weight.mul_(30)      # logits spread over the sigmoid's range, not all near 0.5
    compiled = pybuda.compile(model, x, output_dir=tmp_path, verify=True)
    with torch.no_grad():
        expected = model(x)
    assert pcc(compiled(x).numpy(), expected.numpy()) >= 0.99


# ---- the conv folds and the layout rewrites ----------------------------------------------------------

def test_pad_and_batchnorm_fold_into_the_conv():
    g = Graph("g")
    x = g.add_input("x", (1, 4, 8, 8))
    pad = add_op(g, "pad", "constant_pad", [x], {"pad_width": [0, 0, 0, 0, 0, 1, 0, 1], "value": 0.0})
    conv = add_op(g, "conv", "conv2d", [pad, g.add_parameter("w", RNG.standard_normal((6, 4, 3, 3))),
                                       g.add_parameter("b", RNG.standard_normal(6))], {"stride": 2, "padding": 0})
    bn_params = [g.add_parameter(n, RNG.uniform(0.5, 1.5, 6)) for n in ("gamma", "beta", "mean", "var")]
    g.add_output("out", add_op(g, "bn", "batchnorm", [conv, *bn_params], {"dim": -3, "epsilon": 1e-5}))
    feeds = {"x": RNG.standard_normal((1, 4, 8, 8)).astype(np.float32)}
    expected = _golden(g, feeds)
    fused = fuse_into_conv(g.copy())
    types = [n.op_type for n in fused.nodes("op")]
    assert "constant_pad" not in types and "batchnorm" not in types
    assert fused.node("conv").attrs["padding"] == [0, 0, 1, 1] and len(fused.operands("conv")) == 3
    np.testing.assert_allclose(_golden(fused, feeds), expected, rtol=1e-4, atol=1e-4)
    opt = optimize(decompose(g.copy()))
    # folded weights keep the model's names; no multiply/add on the NCHW view is left
    assert any(n.name.startswith("w.folded") for n in opt.nodes("parameter"))
    assert "multiply" not in {n.op_type for n in opt.nodes("op")}


def test_residual_add_and_channel_scale_move_into_the_conv_layout():
    """conv a -> conv b -> b + a -> per-channel scale -> relu -> (output, global mean): after optimize no layout
    TM is left on device (the residual add and the scale happen on (spatial, channel) matrices)."""
    g = Graph("g")
    x = g.add_input("x", (1, 8, 6, 6))
    a = add_op(g, "a", "conv2d", [x, g.add_parameter("wa", RNG.standard_normal((8, 8, 3, 3)))], {"padding": 1})
    b = add_op(g, "b", "conv2d", [a, g.add_parameter("wb", RNG.standard_normal((8, 8, 3, 3)))], {"padding": 1})
    s = add_op(g, "s", "add", [b, a])
    s = add_op(g, "scale", "multiply", [s, g.add_parameter("k", RNG.standard_normal((8, 1, 1)))])
    r = add_op(g, "r", "relu", [s])
    g.add_output("out0", r)
    g.add_output("out1", add_op(g, "mean", "adaptive_avg_pool2d", [r], {"output_size": [1, 1]}))
    feeds = {"x": RNG.standard_normal((1, 8, 6, 6)).astype(np.float32)}
    expected = host_outputs(g, evaluate_sample(g, host_inputs(g, feeds)))
    opt = hoist_io_transforms(optimize(decompose(g.copy())))
    types = [n.op_type for n in opt.nodes("op")]
    assert not {"reshape", "transpose", "permute"} & set(types)
    assert types.count("reduce_avg") == 1  # the global mean of a conv output is one mean over its spatial rows
    for got, want in zip(host_outputs(opt, evaluate_sample(opt, host_inputs(opt, feeds))), expected):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)
    lower(opt)  # every remaining op has a device lowering


# ---- frontend mappings, end to end ---------------------------------------------------------------

def _randomize_batchnorm(model: nn.Module) -> nn.Module:
    """Non-trivial running statistics and affine parameters, so the batchnorm folds are exercised."""
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.copy_(torch.rand(m.num_features, generator=gen) - 0.5)
                m.running_var.copy_(torch.rand(m.num_features, generator=gen) * 1.5 + 0.5)
                m.weight.copy_(torch.rand(m.num_features, generator=gen) + 0.5)
                m.bias.copy_(torch.rand(m.num_features, generator=gen) - 0.5)
    return model.eval()


class CnnOps(nn.Module):
    """Every CNN mapping: nn.pad with a value, clip, a batchnorm not after a conv, avg_pool2d, grouped conv,
    ReLU6, depthwise conv + batchnorm + residual add, adaptive_avg_pool2d, mean over H and W."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.gconv = nn.Conv2d(8, 16, 3, stride=2, padding=1, groups=4)
        self.dw = nn.Conv2d(16, 16, 3, padding=1, groups=16, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.pw = nn.Conv2d(16, 8, 1)

    def forward(self, x):
        y = self.bn(torch.clamp(self.conv(x), -1.0, 2.0))
        y = F.avg_pool2d(F.pad(y, (1, 0, 0, 1), value=0.5), 3, stride=2, padding=1, count_include_pad=False)
        y = F.relu6(self.gconv(y))
        y = F.adaptive_avg_pool2d(self.pw(self.bn2(self.dw(y)) + y), 2)
        return y, y.mean((2, 3))


def test_cnn_mappings_compile_and_match_torch(tmp_path):
    torch.manual_seed(0)
    model, x = _randomize_batchnorm(CnnOps()), torch.randn(2, 3, 15, 15)
    compiled = pybuda.compile(model, x, output_dir=tmp_path, verify=True)
    types = {n.op_type for n in compiled.graphs["initial_graph"].nodes("op")}
    assert {"batchnorm", "clip", "constant_pad", "avg_pool2d", "adaptive_avg_pool2d", "conv2d"} <= types
    assert all(c.pcc > 0.9999 for c in compiled.checks[:-1]) and compiled.checks[-1].stage == "netlist"
    with torch.no_grad():
        expected = model(x)
    for got, want in zip(compiled(x), expected):
        assert got.shape == want.shape and pcc(got.numpy(), want.numpy()) >= 0.99


# ---- models ----------------------------------------------------------------------------------------

def _resnet(layer_type):
    from transformers import ResNetConfig, ResNetModel
    torch.manual_seed(0)
    config = ResNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type=layer_type,
                          return_dict=False)
    return _randomize_batchnorm(ResNetModel(config)), torch.randn(2, 3, 16, 16)


def _mobilenet_v2():
    from transformers import MobileNetV2Config, MobileNetV2Model
    torch.manual_seed(0)
    config = MobileNetV2Config(image_size=32, depth_multiplier=0.35, return_dict=False)
    return _randomize_batchnorm(MobileNetV2Model(config)), torch.randn(2, 3, 32, 32)


MODELS = {"resnet_bottleneck": lambda: _resnet("bottleneck"), "resnet_basic": lambda: _resnet("basic"),
          "mobilenet_v2": _mobilenet_v2}


@pytest.fixture(scope="module")
def models():
    return {}


# Each ResNet on both devices in both formats; MobileNetV2 (52 convolutions: its torch.export + Relax import
# alone takes seconds) once per device, in each format.
CASES = [(name, device, df) for name in ("resnet_bottleneck", "resnet_basic") for device in ("e150", "n150")
         for df in ("Float16_b", "Float32")]
CASES += [("mobilenet_v2", "e150", "Float16_b"), ("mobilenet_v2", "n150", "Float32")]


@pytest.mark.parametrize("name, device, df", CASES, ids=["-".join(c) for c in CASES])
def test_model_matches_torch(models, tmp_path, name, device, df):
    if name not in models:
        models[name] = MODELS[name]()
    model, x = models[name]
    options, threshold = (FLOAT32, 0.999) if df == "Float32" else ({}, 0.99)
    verify = device == "e150" and df == "Float16_b"  # once per model: every stage's golden matches torch
    compiled = pybuda.compile(model, x, device=device, config=pybuda.CompilerConfig(**options),
                              output_dir=tmp_path, verify=verify)
    if verify:
        assert [c.stage for c in compiled.checks] == [s.name for s in STAGES if s.produces_graph] + ["netlist"]
        assert all(c.pcc > 0.9999 for c in compiled.checks[:-1])   # the netlist stage: its format's threshold
    # every layout TM between layers cancelled or went to the host
    assert not {"reshape", "transpose", "permute"} & {n.op_type for n in compiled.graphs["host_io"].nodes("op")}
    with torch.no_grad():
        expected = model(x)
    got = compiled(x)
    assert len(got) == len(expected) == 2  # last_hidden_state, pooler_output
    for g, e in zip(got, expected):
        assert g.shape == e.shape
        assert pcc(g.numpy(), e.numpy()) >= threshold
