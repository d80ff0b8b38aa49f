"""The legacy quantization ops (Quantize, Dequantize, Requantize, BudaRequantize), SparseMatmul and the nn modules
SparseMatmulModule and MaxPool1dModule: compiled in a PyBudaModule, simulated and compared with torch (integer
outputs exactly). Rounding ops run on the host (or are folded), dequantization on the device."""
from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from fn_module import FnModule

import pybuda
from pybuda.errors import UserInputError
from pybuda.op import Matmul, nn
from pybuda.op.quantize import BudaRequantize, Dequantize, Quantize, Requantize
from pybuda.op.sparse import SparseMatmul
from pybuda.verify import pcc

F32 = {"default_df_override": "Float32"}
SCALE = 1 / 16      # a power of two: x / scale is exact, and x on a 1/32 grid gives exact ties


def _run(fn, *inputs, config=None, **parameters):
    """The compiled model and its outputs (a tuple) on `inputs`."""
    compiled = pybuda.compile(FnModule(fn, **parameters), *inputs, output_dir=None,
                              config=config or pybuda.CompilerConfig(**F32))
    out = compiled(*inputs)
    return compiled, tuple(out) if isinstance(out, (tuple, list)) else (out,)


def _grid(shape, seed: int = 0, step: float = 1 / 32, spread: float = 3.0) -> torch.Tensor:
    return torch.round(torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * spread / step) * step


def _torch_q(x: torch.Tensor, scale, zero_point, dtype=torch.qint8, axis: int | None = None) -> torch.Tensor:
    """torch's quantized tensor (quantize_per_tensor, or per_channel along `axis`)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)     # torch deprecates its quantized tensors
        if axis is None:
            return torch.quantize_per_tensor(x, scale, zero_point, dtype)
        return torch.quantize_per_channel(x, torch.tensor(scale, dtype=torch.float64),
                                          torch.tensor(zero_point), axis, dtype)


def _kinds(compiled) -> list[str]:
    return [s.kind for s in compiled.segments]


def _op_types(compiled, on_device: bool) -> set[str]:
    return {n.framework_op_type for s in compiled.segments if s.on_device == on_device for n in s.graph.nodes("op")}


@pytest.mark.parametrize("zero_point", [2, -3])
def test_quantize_dequantize_round_trip_on_an_activation(zero_point):
    """Quantize runs on the host ahead of the device, Dequantize on the device; ties round half to even, before the
    zero point is added (legacy; torch adds it first, the same for an even zero point)."""
    x = _grid((1, 4, 32))
    x[0, 0, :4] = torch.tensor([100.0, -100.0, 17.5 * SCALE, 18.5 * SCALE])   # clamped, clamped, ties
    compiled, (q, dq) = _run(lambda m, x: (lambda q: (q, Dequantize("dq", q, SCALE, zero_point)))(
        Quantize("q", x, SCALE, zero_point, -1, torch.int8)), x)
    expected = np.clip(np.rint(x.numpy() / SCALE) + zero_point, -128, 127)
    assert np.array_equal(q.numpy(), expected) and q[0, 0, 2] == 18 + zero_point and q[0, 0, 3] == 18 + zero_point
    assert np.array_equal(dq.numpy(), (expected - zero_point) * SCALE)
    if zero_point % 2 == 0:
        assert torch.equal(q, _torch_q(x, SCALE, zero_point).int_repr().float())
    assert _kinds(compiled) == ["host", "device"]
    assert _op_types(compiled, on_device=False) == {"quantize"}     # the dequantization is device arithmetic


def test_quantize_of_a_parameter_is_folded():
    """A weight quantized and dequantized at compile time: nothing of it is left to run."""
    w = _grid((32, 32), seed=1, spread=1.0)
    x = _grid((1, 32, 32), seed=2, step=1 / 4, spread=1.0)    # coarse grids: the device matmul is exact
    compiled, (out,) = _run(lambda m, x: Matmul("mm", x, Dequantize("dq", Quantize("q", m.w, SCALE, 0, -1,
                                                                                      torch.uint8), SCALE, 0)), x, w=w)
    folded = torch.clamp(torch.round(w / SCALE), 0, 255) * SCALE
    assert _kinds(compiled) == ["device"] and not {"quantize", "dequantize"} & _op_types(compiled, on_device=True)
    assert torch.equal(out, x @ folded)


def test_per_axis_scale_quantizes_each_channel_with_its_own():
    """One scale per channel (dim 1), a Constant; compared with torch.quantize_per_channel."""
    scales = [1 / 8, 1 / 16, 1 / 32, 1 / 4]
    x = _grid((1, 4, 32), seed=3)
    scale = pybuda.Tensor.create_from_torch(torch.tensor(scales), constant=True)
    _, (q, dq) = _run(lambda m, x: (lambda q: (q, Dequantize("dq", q, scale, 0, axis=1)))(
        Quantize("q", x, scale, 0, 1, torch.int8)), x)
    reference = _torch_q(x, scales, [0] * 4, axis=1)
    assert torch.equal(q, reference.int_repr().float()) and torch.equal(dq, reference.dequantize())


def _legacy_requantize(x, ratio, inp_zp, out_zp, rounding, lo=-128, hi=127):
    v = (ratio * (x - inp_zp) + out_zp).double()
    rounded = {"None": torch.round, "UPWARD": lambda v: torch.floor(v + 0.5),
               "TONEAREST": lambda v: torch.where(v >= 0, torch.floor(v + 0.5), torch.ceil(v - 0.5))}[rounding](v)
    return torch.clamp(rounded, lo, hi).float()


@pytest.mark.parametrize("rounding", ["None", "UPWARD", "TONEAREST"])
def test_requantize_rounds_as_asked(rounding):
    """int32 accumulators (per-channel input scale) to int8: ties (odd accumulators halved) in all three modes."""
    x = torch.round(_grid((1, 4, 32), seed=4, step=1.0, spread=200.0))
    inp_scale = torch.tensor([0.5, 0.25, 0.125, 1.0])
    _, (out, buda) = _run(lambda m, x: (
        Requantize("rq", x, m.inp_scale, 1.0, 0.0, 1.0, torch.int8, axis=1, rounding=rounding),
        BudaRequantize("brq", x, m.inp_scale, 1.0, torch.int8, axis=1, rounding=rounding)), x, inp_scale=inp_scale)
    expected = _legacy_requantize(x, inp_scale.reshape(1, 4, 1), 0.0, 1.0, rounding)
    assert torch.equal(out, expected) and torch.equal(buda, expected)
    assert ((x * inp_scale.reshape(1, 4, 1)) % 1 == 0.5).any()          # ties were met


def test_quantize_between_device_ops_runs_alone_on_the_host():
    """matmul -> quantize -> dequantize -> matmul: the device graph splits around the host op; values on grids keep
    the matmuls exact, so the result is torch's exactly."""
    w = _grid((32, 32), seed=5, step=1 / 4, spread=1.0)
    x = _grid((1, 4, 32), seed=6, step=1 / 4, spread=1.0)
    compiled, (out,) = _run(lambda m, x: Matmul("mm2", Dequantize("dq", Quantize(
        "q", Matmul("mm", x, m.w), 0.5, 0, -1, torch.int8), 0.5, 0), m.w), x, w=w)
    assert _kinds(compiled) == ["device", "host", "device"]
    assert torch.equal(out, _torch_q(x @ w, 0.5, 0).dequantize() @ w)


def _sparse(m: int, k: int, nnz: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    indices = torch.stack([torch.randint(0, m, (nnz,), generator=g), torch.randint(0, k, (nnz,), generator=g)])
    return torch.sparse_coo_tensor(indices, torch.randn(nnz, generator=g), (m, k), check_invariants=True)


@pytest.mark.parametrize("source", ["torch", "constant", "module"])
def test_sparse_matmul_matches_torch_sparse_mm(source):
    a = _sparse(64, 32, 100, seed=7)
    x = torch.randn(1, 32, 48, generator=torch.Generator().manual_seed(8))
    if source == "module":
        model = nn.SparseMatmulModule("sm", pybuda.Tensor.create_from_torch(a, constant=True))
        compiled = pybuda.compile(model, x, config=pybuda.CompilerConfig(**F32), output_dir=None)
        out = compiled(x)
    else:
        sparse = a if source == "torch" else pybuda.Tensor.create_from_torch(a, constant=True)
        compiled, (out,) = _run(lambda m, x: SparseMatmul("sm", sparse, x), x)
    out = out[0] if isinstance(out, (tuple, list)) else out
    expected = torch.sparse.mm(a, x[0]).unsqueeze(0)
    assert out.shape == expected.shape and pcc(out.numpy(), expected.numpy()) >= 0.999
    assert torch.allclose(out, expected, atol=2e-2, rtol=2e-2)
    assert _op_types(compiled, on_device=True) == {"sparse_matmul"}


def test_max_pool1d_module_matches_torch():
    x = torch.randn(1, 4, 40, generator=torch.Generator().manual_seed(9))
    compiled = pybuda.compile(nn.MaxPool1dModule("mp", kernel_size=3, stride=2, padding=1), x, output_dir=None,
                              config=pybuda.CompilerConfig(**F32))
    out = compiled(x)
    out = out[0] if isinstance(out, (tuple, list)) else out
    expected = torch.nn.functional.max_pool1d(x, 3, stride=2, padding=1)
    assert out.shape == expected.shape and pcc(out.numpy(), expected.numpy()) >= 0.999
    assert torch.allclose(out, expected, atol=2e-2, rtol=2e-2)


TRAINED = pybuda.Parameter(torch.ones(64, 32))


@pytest.mark.parametrize("forward, message", [
    (lambda x: Quantize("q", x, SCALE, 0, -1, torch.float16), r"Quantize 'q': out_dtype=torch.float16; legal: "
                                                             r"torch.int8, torch.uint8, torch.int32"),
    (lambda x: Quantize("q", x, 0.5, float("nan"), -1, torch.int8), r"Quantize 'q': zero point nan"),
    (lambda x: Dequantize("dq", x, SCALE, 0, out_dtype=torch.int8), r"Dequantize 'dq': .*legal: torch.float32"),
    (lambda x: Quantize("q", x, pybuda.Tensor.create_from_torch(torch.ones(3), constant=True), 0, 1, torch.int8),
     r"op 'q' \(quantize\): a scale of shape \(3,\) does not fit an input of shape \(1, 4, 32\) \(axis 1\); legal"),
    (lambda x: Requantize("rq", x, 0.5, 0.25, 0, 0, torch.int8, rounding="DOWN"),
     r"op 'rq' \(requantize\): rounding 'DOWN'; legal: 'None', 'TONEAREST', 'UPWARD'"),
    (lambda x: SparseMatmul("sm", TRAINED, x), r"SparseMatmul 'sm': sparseA is a trained Parameter"),
    (lambda x: SparseMatmul("sm", torch.stack([_sparse(8, 4, 4, 0)] * 2), x),
     r"SparseMatmul 'sm': sparseA of shape \(2, 8, 4\); legal: one \(M, K\) matrix"),
    (lambda x: SparseMatmul("sm", _sparse(8, 4, 4, 0), pybuda.op.Reshape("r", x, (1, 2, 4, 16))),
     r"SparseMatmul 'sm': denseB of shape \(1, 2, 4, 16\) \(one sample\) holds a batch of matrices"),
], ids=["out_dtype", "zero_point", "dequantize_out_dtype", "scale_shape", "rounding", "sparse_trained",
        "sparse_stack", "sparse_batch"])
def test_misuse_is_refused_at_trace_time_naming_the_op(forward, message):
    with pytest.raises(UserInputError, match=message):
        _run(lambda m, x: forward(x), torch.zeros(1, 4, 32))


def test_without_cpu_fallback_a_rounding_op_between_device_ops_is_refused():
    """With enable_tvm_cpu_fallback off, a quantize between matmuls has nowhere to run: the error names it."""
    w = torch.eye(32)
    config = pybuda.CompilerConfig(enable_tvm_cpu_fallback=False, **F32)
    with pytest.raises(UserInputError, match=r"op 'q' \(quantize\) has no device lowering"):
        _run(lambda m, x: Matmul("mm2", Quantize("q", Matmul("mm", x, m.w), 0.5, 0, -1, torch.int8), m.w),
             torch.zeros(1, 4, 32), config=config, w=w)
