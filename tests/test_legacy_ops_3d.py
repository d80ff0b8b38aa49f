"""The legacy 3-D ops of `pybuda.op` (Conv3d, MaxPool3d, Resize3d): each with its legacy signature, compiled in a
PyBudaModule taking and returning 5-D tensors, simulated and compared with torch; misuse names the op and what is
legal."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import pybuda
from pybuda.errors import UserInputError
from pybuda.op.conv import Conv3d, MaxPool3d, Resize3d
from pybuda.ops import registry
from pybuda.verify import pcc

F = torch.nn.functional
op = pybuda.op
VOLUME = (1, 4, 4, 8, 8)                       # (N, C, D, H, W)


def _w(seed: int, shape: tuple) -> torch.Tensor:
    return torch.randn(shape, generator=torch.Generator().manual_seed(seed)) / 8


W3 = _w(1, (6, 4, 3, 3, 3))
W2 = _w(2, (6, 4, 2, 2, 2))
WG = _w(3, (6, 2, 3, 3, 3))
WN = _w(4, (6, 6, 3, 3, 3))
BIAS = _w(5, (6,)) * 8


class _Module(pybuda.PyBudaModule):
    """forward(x) = fn(self, x), with the weights above as parameters."""

    def __init__(self, fn):
        super().__init__("legacy3d")
        self.fn = fn
        for name, value in {"w3": W3, "w2": W2, "wg": WG, "wn": WN, "b": BIAS}.items():
            setattr(self, name, pybuda.Parameter(value, requires_grad=False))

    def forward(self, x):
        return self.fn(self, x)


def _x(shape=VOLUME) -> torch.Tensor:
    """Values on a 1/8 grid (max pooling sees exact ties)."""
    return torch.round(torch.randn(shape, generator=torch.Generator().manual_seed(0)) * 8) / 8


def _run(fn, x: torch.Tensor, **config):
    compiled = pybuda.compile(_Module(fn), x, config=pybuda.CompilerConfig(default_df_override="Float32", **config),
                              output_dir=None)
    out = compiled(x)
    return compiled, (out[0] if isinstance(out, (tuple, list)) else out)


def _close(out: torch.Tensor, expected: torch.Tensor) -> None:
    assert tuple(out.shape) == tuple(expected.shape)
    assert pcc(out.numpy(), expected.numpy()) >= 0.999
    assert np.allclose(out.numpy(), expected.numpy(), atol=3e-2, rtol=3e-2)


def _last(x: torch.Tensor) -> torch.Tensor:
    return x.permute(0, 2, 3, 4, 1)


@pytest.mark.parametrize("forward, reference, channel_last", [
    (lambda m, x: Conv3d("c", x, m.w3, m.b, stride=(2, 1, 1), padding=1),
     lambda x: F.conv3d(x, W3, BIAS, stride=(2, 1, 1), padding=1), False),
    (lambda m, x: Conv3d("c", x, m.w3, m.b, stride=2, padding=[0, 1, 1, 0, 2, 0]),    # [l, r, t, b, front, back]
     lambda x: F.conv3d(F.pad(x, (0, 1, 1, 0, 2, 0)), W3, BIAS, stride=2), False),
    (lambda m, x: Conv3d("c", x, m.w2), lambda x: F.conv3d(F.pad(x, (1, 0, 1, 0, 1, 0)), W2), False),  # legacy "same"
    (lambda m, x: Conv3d("c", x, m.w3, padding=(2, 1, 1), dilation=(2, 1, 1)),
     lambda x: F.conv3d(x, W3, padding=(2, 1, 1), dilation=(2, 1, 1)), False),
    (lambda m, x: Conv3d("c", x, m.wg, padding=1, groups=2), lambda x: F.conv3d(x, WG, padding=1, groups=2), False),
    (lambda m, x: Conv3d("c", x, m.w3, m.b, channel_last=True),
     lambda x: _last(F.conv3d(x, W3, BIAS, padding=1)), True),
    (lambda m, x: MaxPool3d("p", x, 2, stride=2, padding=0), lambda x: F.max_pool3d(x, 2), False),
    (lambda m, x: MaxPool3d("p", x, 3, stride=1, padding=1), lambda x: F.max_pool3d(x, 3, 1, 1), False),
    (lambda m, x: MaxPool3d("p", x, (3, 2, 2), stride=2, padding=[0, 0, 0, 0, 1, 1], ceil_mode=True),
     lambda x: F.max_pool3d(x, (3, 2, 2), 2, padding=(1, 0, 0), ceil_mode=True), False),
    (lambda m, x: MaxPool3d("p", x, 3, channel_last=True), lambda x: _last(F.max_pool3d(x, 3, 1, 1)), True),
    (lambda m, x: Resize3d("r", x, (8, 16, 16)), lambda x: F.interpolate(x, size=(8, 16, 16), mode="nearest"), False),
    (lambda m, x: Resize3d("r", x, (6, 12, 5), method="trilinear", align_corners=True),
     lambda x: F.interpolate(x, size=(6, 12, 5), mode="trilinear", align_corners=True), False),
], ids=["conv-bias-depth-stride", "conv-lrtbfb", "conv-same-even", "conv-depth-dilation", "conv-groups",
        "conv-channel-last", "maxpool-2", "maxpool-3-pad", "maxpool-ceil", "maxpool-channel-last", "resize-nearest-x2",
        "resize-trilinear"])
def test_legacy_3d_op_matches_torch(forward, reference, channel_last):
    x = _x()
    _, out = _run(forward, _last(x).contiguous() if channel_last else x)
    _close(out, reference(x))


def test_5d_model_input_and_output_stay_on_the_host_side():
    """A 5-D model input and output and a 5-D value between the 3-D ops: the depth layout changes are host transforms
    of the input and output, or cancel on the device; without CPU fallback every op runs on the device."""
    def forward(m, x):
        h = op.Relu("relu", Conv3d("c1", x, m.w3, m.b, padding=1))
        return Resize3d("up", MaxPool3d("p", Conv3d("c2", h, m.wn, padding=1), 2, stride=2, padding=0), (4, 8, 8))

    def reference(x):
        h = F.max_pool3d(F.conv3d(F.relu(F.conv3d(x, W3, BIAS, padding=1)), WN, padding=1), 2)
        return F.interpolate(h, size=(4, 8, 8), mode="nearest")

    x = _x()
    compiled, out = _run(forward, x, enable_tvm_cpu_fallback=False)
    _close(out, reference(x))
    assert compiled.host_ops == []
    assert all(len(n.shape) <= 4 for n in compiled.device_graph.nodes())


@pytest.mark.parametrize("op_type, attrs, reference", [
    ("conv3d", {"stride": (1, 2, 1), "padding": (2, 0, 1, 2, 0, 1), "dilation": (2, 1, 1), "groups": 1},
     lambda x: F.conv3d(x, W3, padding=(2, 0, 1), stride=(1, 2, 1), dilation=(2, 1, 1))),
    ("max_pool3d", {"kernel": (2, 3, 3), "stride": (2, 2, 2), "padding": (1,) * 6, "ceil_mode": True},
     lambda x: F.max_pool3d(x, (2, 3, 3), 2, padding=1, ceil_mode=True)),
    ("resize3d", {"size": (7, 5, 12), "method": "linear", "coordinate_transformation_mode": "half_pixel"},
     lambda x: F.interpolate(x, size=(7, 5, 12), mode="trilinear")),
], ids=["conv3d", "max_pool3d", "resize3d"])
def test_registry_3d_ops_evaluate_as_torch(op_type, attrs, reference):
    x = torch.randn(1, 4, 5, 7, 6, generator=torch.Generator().manual_seed(6))
    operands = [x.numpy()] + ([W3.numpy()] if op_type == "conv3d" else [])
    expected = reference(x).numpy()
    assert registry.infer_shape(op_type, [v.shape for v in operands], attrs) == expected.shape
    assert np.allclose(registry.evaluate(op_type, operands, attrs), expected, atol=1e-5)


@pytest.mark.parametrize("build, message", [
    (lambda m, x: MaxPool3d("p", x, 2, return_indices=True), "MaxPool3d 'p': return_indices .* legal: False"),
    (lambda m, x: Resize3d("r", x, (8, 16, 16), method="bilinear"),
     "Resize3d 'r': method 'bilinear'; legal: nearest_neighbor, trilinear"),
    (lambda m, x: Resize3d("r", x, (16, 16)), r"Resize3d 'r': sizes \(16, 16\); legal: \(depth, height, width\)"),
    (lambda m, x: Conv3d("c", x, m.w3, padding=(1, 1)), r"'c': padding \(1, 1\); legal: 'same', a number"),
    (lambda m, x: Conv3d("c", x, m.w3, stride=(1, 2)), r"'c': stride \(1, 2\); legal: a number or \(depth, height"),
    (lambda m, x: Conv3d("c", op.Reshape("r", x, (1, 16, 8, 8)), m.w3), r"legal: 5-D \(N, C, D, H, W\)"),
    (lambda m, x: MaxPool3d("p", x, (1, 2, 2), padding=[0, 0, 0, 0, 1, 1]), "depth window lies wholly in the padding"),
])
def test_legacy_3d_op_misuse_names_the_op_and_what_is_legal(build, message):
    with pytest.raises(UserInputError, match=message):
        pybuda.compile(_Module(build), _x(), output_dir=None)
