"""Constructs of the models users bring (issue 10), each as a small torch module compiled for e150 at Float16_b
and simulated, checked against PyTorch: constant subgraphs of every kind evaluated at compile time, TMs that
move data across tiles, conv1d, conv_transpose2d, interpolation, reflect/replicate padding, group norm, and a
transpose on a matmul operand that cannot take it."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import pybuda
from pybuda.verify import pcc


def _check(model: torch.nn.Module, *inputs: torch.Tensor, tmp_path, threshold: float = 0.99):
    """Compile and run `model`; assert PCC against torch and return the compiled model."""
    model.eval()
    compiled = pybuda.compile(model, *inputs, device="e150", output_dir=tmp_path)
    with torch.no_grad():
        expected = model(*inputs)
    out = compiled(*inputs)
    out = out[0] if isinstance(out, tuple) else out
    assert out.shape == expected.shape
    assert pcc(out.numpy(), expected.numpy()) >= threshold
    return compiled


def _x(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# ---- constant subgraphs: evaluated at compile time, nothing of them on the host or the device ----------------

class PositionBuffer(torch.nn.Module):
    """Position ids sliced from a registered buffer, then a lookup and a gather along axis 1 (RoBERTa, DeiT)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("position_ids", torch.arange(64).expand(1, -1), persistent=False)
        self.table = torch.nn.Parameter(_x(64, 32, seed=1))

    def forward(self, x):
        ids = self.position_ids[:, 2:2 + x.shape[1]]
        pos = torch.take_along_dim(self.table[None], ids[..., None].expand(-1, -1, 32), dim=1)
        return x + pos + torch.index_select(self.table, 0, torch.tensor([3, 1, 4, 1, 5, 9, 2, 6] * 4))


class RelativeBuckets(torch.nn.Module):
    """T5-style relative-position buckets from arange: abs, log, min, where, casts, then an embedding lookup."""

    def __init__(self):
        super().__init__()
        self.bias = torch.nn.Embedding(16, 1)

    def forward(self, x):
        n = x.shape[-1]
        rel = torch.arange(n)[None, :] - torch.arange(n)[:, None]
        small = rel.abs() < 4
        large = 4 + (torch.log(rel.abs().float().clamp(min=1) / 4) / 2.0 * 4).long()
        bucket = torch.where(small, rel.abs(), torch.minimum(large, torch.full_like(large, 7))) + (rel > 0).long() * 8
        return torch.softmax(x + self.bias(bucket)[..., 0], dim=-1)


class WindowIndexMath(torch.nn.Module):
    """Window-partition index math (Swin's shifted-window mask): fmod, remainder, equal, floor, tile, casts, a
    slice assignment (BEiT's relative position index)."""

    def forward(self, x):
        idx = torch.arange(x.shape[-1])
        same = torch.eq(torch.fmod(idx, 4)[:, None], torch.remainder(idx, 4)[None, :])
        block = torch.floor(idx.float() / 8).tile(2)[:idx.shape[0]]
        mask = same.float() * 2.0 + (block[:, None] == block[None, :]).to(torch.float32)
        mask[:, 1:5] = 3.0  # a slice_scatter
        return x * mask


class RotaryAndAlibi(torch.nn.Module):
    """Rotary cos/sin tables from an inverse-frequency buffer and alibi slopes from a tensor power, then the
    rotate-half of rotary embeddings (a narrow at a non-tile offset of the last dim)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (100.0 ** (torch.arange(0, 32, 2).float() / 32)), persistent=False)

    def forward(self, x):
        t = torch.arange(x.shape[-2]).float()
        freqs = torch.cat([torch.outer(t, self.inv_freq)] * 2, dim=-1)
        slopes = torch.pow(torch.tensor(0.5), torch.arange(1, 3).float())
        rotated = torch.cat([-x[..., 16:], x[..., :16]], dim=-1)
        return x * freqs.cos() + rotated * freqs.sin() + slopes.sum()


@pytest.mark.parametrize("module, shape", [(PositionBuffer, (1, 32, 32)), (RelativeBuckets, (1, 2, 32, 32)),
                                           (WindowIndexMath, (1, 32, 32)), (RotaryAndAlibi, (1, 32, 32))],
                         ids=["position_buffer", "relative_buckets", "window_index_math", "rotary_alibi"])
def test_constant_subgraphs_are_evaluated_at_compile_time(tmp_path, module, shape):
    compiled = _check(module(), _x(*shape), tmp_path=tmp_path)
    assert compiled.host_ops == []


class RMSNormAttention(torch.nn.Module):
    """RMS norm, then masked scaled-dot-product attention (Llama, T5): the attention's guards against fully
    masked rows (x == -inf) fold, since a division by mean(x*x) + eps is finite."""

    def __init__(self):
        super().__init__()
        self.wq = torch.nn.Parameter(_x(32, 32, seed=10) / 32 ** 0.5)
        self.wk = torch.nn.Parameter(_x(32, 32, seed=11) / 32 ** 0.5)

    def forward(self, x):
        h = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
        mask = torch.ones(x.shape[-2], x.shape[-2], dtype=torch.bool).tril()
        q, k = (h @ self.wq)[:, None], (h @ self.wk)[:, None]
        return F.scaled_dot_product_attention(q, k, h[:, None], attn_mask=mask)


def test_attention_guards_fold_after_an_rms_norm(tmp_path):
    compiled = _check(RMSNormAttention(), _x(1, 32, 32), tmp_path=tmp_path)
    assert compiled.host_ops == []


class FinfoMinMask(torch.nn.Module):
    """A causal mask filled with float32's finfo.min (GPT-Neo): no x - fill may overflow at 16 bits."""

    def forward(self, x):
        causal = torch.ones(x.shape[-2], x.shape[-1], dtype=torch.bool).tril()
        return torch.softmax(torch.where(causal, x @ x.transpose(-1, -2), torch.finfo(torch.float32).min), -1)


def test_where_with_a_finfo_min_fill(tmp_path):
    _check(FinfoMinMask(), _x(1, 32, 32), tmp_path=tmp_path)


# ---- TMs that move data across tiles --------------------------------------------------------------------------

class SqueezeExcite(torch.nn.Module):
    """A squeeze-and-excitation gate: the pooled (1, 1, C) row becomes a (1, C, 1) column."""

    def forward(self, x):
        s = x.mean(dim=-2, keepdim=True)
        return x * torch.sigmoid(s.reshape(1, -1, 1))[:, :x.shape[1]]


def test_row_to_column_reshape(tmp_path):
    _check(SqueezeExcite(), _x(1, 48, 48), tmp_path=tmp_path)


class SEConv(torch.nn.Module):
    """A convolutional squeeze-and-excitation block (EfficientNet, RegNet)."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(8, 16, 3, padding=1)
        self.reduce, self.expand = torch.nn.Conv2d(16, 4, 1), torch.nn.Conv2d(4, 16, 1)

    def forward(self, x):
        y = self.conv(x)
        gate = torch.sigmoid(self.expand(torch.relu(self.reduce(F.adaptive_avg_pool2d(y, 1)))))
        return y * gate


def test_squeeze_excitation_block(tmp_path):
    _check(SEConv(), _x(1, 8, 8, 8), tmp_path=tmp_path)


class HalfRotate(torch.nn.Module):
    def forward(self, x):
        return torch.cat([x[..., 40:], x[..., :40]], dim=-1) + x[:, 3:35, :].sum(dim=-2, keepdim=True)


def test_narrow_at_non_tile_offsets(tmp_path):
    _check(HalfRotate(), _x(1, 48, 64), tmp_path=tmp_path)


class TransposeMatmul(torch.nn.Module):
    def forward(self, x):
        y = F.gelu(x[0])
        return y.t() @ y


def test_transpose_on_matmul_input0_gets_a_datacopy(tmp_path):
    compiled = _check(TransposeMatmul(), _x(1, 64, 32), tmp_path=tmp_path)
    copies = [op for g in compiled.netlist.graphs.values() for name, op in g.ops.items()
              if name.endswith(".in0_transpose")]
    assert copies and all(op.type == "nop" for op in copies)


# ---- convolution variants, interpolation, padding modes, group norm ---------------------------------------------

def test_conv1d(tmp_path):
    model = torch.nn.Sequential(torch.nn.Conv1d(4, 16, 5, stride=2, padding=2), torch.nn.GELU(),
                                torch.nn.Conv1d(16, 16, 3, padding=1, groups=4))
    _check(model, _x(1, 4, 64), tmp_path=tmp_path)


@pytest.mark.parametrize("stride, padding, output_padding", [(2, 1, 1), (1, 0, 0), (2, 0, 0)])
def test_conv_transpose2d(tmp_path, stride, padding, output_padding):
    model = torch.nn.ConvTranspose2d(8, 4, 3, stride=stride, padding=padding, output_padding=output_padding)
    _check(model, _x(1, 8, 6, 6), tmp_path=tmp_path)


class Interpolate(torch.nn.Module):
    def __init__(self, **kwargs):
        super().__init__()
        self.kwargs = kwargs

    def forward(self, x):
        return F.interpolate(x, **self.kwargs)


@pytest.mark.parametrize("kwargs", [dict(scale_factor=2, mode="nearest"),
                                    dict(scale_factor=2, mode="bilinear", align_corners=False),
                                    dict(size=(5, 11), mode="bilinear", align_corners=True)],
                         ids=["nearest", "bilinear", "bilinear_align_corners"])
def test_interpolate(tmp_path, kwargs):
    _check(Interpolate(**kwargs), _x(1, 4, 6, 8), tmp_path=tmp_path)


class Pad(torch.nn.Module):
    def __init__(self, mode: str):
        super().__init__()
        self.mode = mode

    def forward(self, x):
        return F.pad(x, (1, 2, 2, 1), mode=self.mode)


@pytest.mark.parametrize("mode", ["reflect", "replicate"])
def test_pad_modes(tmp_path, mode):
    _check(Pad(mode), _x(1, 4, 6, 8), tmp_path=tmp_path)


@pytest.mark.parametrize("shape", [(1, 8, 6, 6), (1, 8, 40)], ids=["nchw", "ncl"])
def test_groupnorm(tmp_path, shape):
    model = torch.nn.GroupNorm(2, 8)
    with torch.no_grad():
        model.weight.copy_(1.0 + 0.1 * _x(8, seed=3))
        model.bias.copy_(0.1 * _x(8, seed=4))
    _check(model, _x(*shape), tmp_path=tmp_path)


class Reshape(torch.nn.Module):
    """A reshape between a matmul with weights and a softmax over rows: neither moves through it, so it runs on
    device."""

    def __init__(self, src: tuple, dst: tuple):
        super().__init__()
        self.shape = dst
        self.w_in = torch.nn.Parameter(_x(src[-1], src[-1], seed=5) / src[-1] ** 0.5)
        self.w_out = torch.nn.Parameter(_x(dst[-1], dst[-1], seed=6) / dst[-1] ** 0.5)

    def forward(self, x):
        return torch.softmax((x @ self.w_in).reshape(self.shape), dim=-2) @ self.w_out


@pytest.mark.parametrize("src, dst", [((1, 96, 1024), (1, 96, 32, 32)), ((1, 96, 32, 32), (1, 96, 1024)),
                                      ((1, 4096, 32), (1, 64, 64, 32)), ((1, 64, 64, 32), (1, 4096, 32)),
                                      ((1, 1, 48), (1, 48, 1)), ((1, 2, 24), (1, 2, 3, 8)), ((1, 8, 1, 40), (1, 320))],
                         ids=lambda s: "x".join(map(str, s)))
def test_reshapes_across_tiles(tmp_path, src, dst):
    _check(Reshape(src, dst), _x(*src), tmp_path=tmp_path)


class Slices(torch.nn.Module):
    """Between matmuls with weights: an hslice of heads 24 wide, its hstack back, a strided slice."""

    def __init__(self):
        super().__init__()
        self.w_in = torch.nn.Parameter(_x(72, 72, seed=7) / 72 ** 0.5)
        self.w_out = torch.nn.Parameter(_x(24, 16, seed=8) / 24 ** 0.5)

    def forward(self, x):
        heads = (x @ self.w_in).reshape(1, 40, 3, 24).permute(0, 2, 1, 3)
        mixed = (heads @ self.w_in[:24, :24]).permute(0, 2, 1, 3).reshape(1, 40, 72)
        return (mixed @ self.w_in)[:, ::2, 1::3] @ self.w_out


def test_unaligned_slices_and_stacks(tmp_path):
    _check(Slices(), _x(1, 40, 72), tmp_path=tmp_path)


class InterleavedSplit(torch.nn.Module):
    """A fused projection viewed as (tokens, heads, 3, head_dim) and split along the 3 (BLOOM's query/key/value)."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(_x(64, 192, seed=9) / 8.0)

    def forward(self, x):
        qkv = (x @ self.w).view(1, 32, 2, 3, 32)
        q, k, v = qkv[..., 0, :], qkv[..., 1, :], qkv[..., 2, :]
        return torch.softmax(q.transpose(1, 2) @ k.permute(0, 2, 3, 1), dim=-1) @ v.transpose(1, 2)


def test_interleaved_split_of_a_fused_projection(tmp_path):
    _check(InterleavedSplit(), _x(1, 32, 64), tmp_path=tmp_path)
