"""`override_multi_op_fracture_factor`: an im2col convolution split by kernel rows into that many picker sparse
matmuls and weight matmuls, their results summed; a factor that cannot apply names the conv and the legal ones."""
from __future__ import annotations

import warnings

import pytest
import torch

import pybuda
from pybuda.ops.registry import OpError
from pybuda.verify import pcc

CONV = "conv2d_0"   # the name the compiler gives the model's only convolution


class ConvRelu(torch.nn.Module):
    def __init__(self, cin: int = 16, cout: int = 32, kernel: int = 3, **conv_args):
        super().__init__()
        self.conv = torch.nn.Conv2d(cin, cout, kernel, **conv_args)

    def forward(self, x):
        return torch.relu(self.conv(x))


def _compile(tmp_path, factor: int | None, model: torch.nn.Module | None = None, x: torch.Tensor | None = None,
             name: str = CONV):
    """The model compiled with `factor` for conv `name` (None: no override); asserts its output matches torch."""
    torch.manual_seed(0)
    model = model or ConvRelu(padding=1)
    x = torch.randn(1, 16, 14, 14) if x is None else x
    cfg = pybuda.CompilerConfig()
    if factor is not None:
        cfg.conv_multi_op_fracture_factor_override = {name: factor}
    compiled = pybuda.compile(model, x, output_dir=tmp_path / f"f{factor}", config=cfg)
    with torch.no_grad():
        assert pcc(compiled(x).numpy(), model(x).numpy()) >= 0.99
    return compiled


def _device_op_types(compiled) -> list[str]:
    """The op types of the device graph before fusion (the netlist fuses the adds away)."""
    return sorted(n.op_type for n in compiled.graphs["data_formats"].nodes("op"))


def _netlist_matmuls(compiled) -> tuple[int, int]:
    """(picker sparse matmuls, weight matmuls) in the netlist."""
    ops = [op for g in compiled.netlist.graphs.values() for op in g.ops.values() if op.type == "matmul"]
    sparse = sum(1 for op in ops if op.attrs.identity)
    return sparse, len(ops) - sparse


def test_factor_3_runs_each_kernel_row_as_its_own_ops(tmp_path):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        base, fractured = _compile(tmp_path, None), _compile(tmp_path, 3)
    assert not [w for w in record if issubclass(w.category, pybuda.IneffectiveOptionWarning)]
    assert _netlist_matmuls(base) == (1, 1)
    assert _netlist_matmuls(fractured) == (3, 3)
    assert _device_op_types(base).count("add") == 1                     # the bias
    assert _device_op_types(fractured).count("add") == 3                # two partial sums, then the bias
    with pytest.raises(pybuda.config.OverrideError, match="override_multi_op_fracture_factor.*'conv2d_9'"):
        _compile(tmp_path, 2, name="conv2d_9")                        # names are checked before decomposition


def test_factor_2_splits_a_3_row_kernel_2_plus_1(tmp_path):
    compiled = _compile(tmp_path, 2)
    assert _netlist_matmuls(compiled) == (2, 2)
    rows = 224                                                        # ceil32(14 * 14) output rows per tap
    pickers = [n.attrs["sparse"].shape for n in compiled.graphs["decompose"].nodes("op")
               if n.op_type == "sparse_matmul"]
    assert sorted(pickers) == [(3 * rows, 14 * 14), (6 * rows, 14 * 14)]   # 3 taps per kernel row


def test_factor_1_keeps_the_unfractured_ops(tmp_path):
    assert _device_op_types(_compile(tmp_path, 1)) == _device_op_types(_compile(tmp_path, None))


def test_the_global_helper_takes_effect_without_warning(tmp_path):
    torch.manual_seed(0)
    model, x = ConvRelu(padding=1), torch.randn(1, 16, 14, 14)
    with warnings.catch_warnings():
        warnings.simplefilter("error", pybuda.IneffectiveOptionWarning)
        pybuda.override_multi_op_fracture_factor(CONV, 3)
        compiled = pybuda.compile(model, x, output_dir=tmp_path)
    assert _netlist_matmuls(compiled) == (3, 3)


@pytest.mark.parametrize("factor, model, x, message", [
    (4, ConvRelu(padding=1), torch.randn(1, 16, 14, 14), r"legal: 1\.\.3 for a 3-row kernel"),
    (2, ConvRelu(kernel=1), torch.randn(1, 16, 14, 14), r"legal: 1 for a 1-row kernel"),
    (2, ConvRelu(cin=3, cout=8, kernel=4, stride=4), torch.randn(1, 3, 16, 16), r"patches.*legal: 1"),
    (2, ConvRelu(cin=64, cout=64, padding=1, groups=64), torch.randn(1, 64, 4, 4), r"depthwise tap sum.*legal: 1"),
], ids=["above_kernel_rows", "1x1", "patchify", "depthwise_tap_sum"])
def test_a_factor_that_cannot_apply_names_the_conv_and_the_legal_ones(tmp_path, factor, model, x, message):
    with pytest.raises(OpError, match=rf"conv2d '{CONV}': override_multi_op_fracture_factor {factor} .*{message}"):
        _compile(tmp_path, factor, model, x)


def test_a_fractured_conv_trains_like_torch(tmp_path):
    """The weight is sliced per group of kernel rows from its one 2-D matrix, so a trained weight stays 2-D."""
    import copy
    from pybuda.optimizers import SGD
    torch.manual_seed(0)
    model = ConvRelu(padding=1)
    ref, initial = copy.deepcopy(model), copy.deepcopy(model).state_dict()
    x, y = torch.randn(2, 16, 14, 14), torch.randn(2, 32, 14, 14)
    cfg = pybuda.CompilerConfig()
    cfg.conv_multi_op_fracture_factor_override = {CONV: 3}
    optimizer = SGD(0.05, momentum=0.9)
    compiled = pybuda.compile(model, x, loss=torch.nn.MSELoss(), optimizer=optimizer, sample_targets=y,
                              output_dir=tmp_path, config=cfg, device="n150")
    forward = [op for name, g in compiled.netlist.graphs.items() if name.startswith("fwd") for op in g.ops.values()
               if op.type == "matmul" and op.attrs.identity]
    assert len(forward) == 3   # the three groups' im2col pickers
    torch_opt = optimizer.torch_optimizer(ref.parameters())
    for _ in range(3):
        compiled.train_step(x, targets=y)
        torch_opt.zero_grad()
        torch.nn.functional.mse_loss(ref(x), y).backward()
        torch_opt.step()
    ours, theirs = compiled.state_dict(), ref.state_dict()
    for name in theirs:
        assert pcc((ours[name] - initial[name]).numpy(), (theirs[name] - initial[name]).numpy()) >= 0.99, name
