"""Matmul-family kernels: dense matmul (m_k/u_kt steps, bias, accumulate over z, fused gelu, int8) and depthwise.

Operand roles follow the hardware: input 0 (activations) streams through srcB, input 1 (weights) through srcA;
the math-fidelity model (formats.py) splits both into mantissa slices and sums the phase products.
"""
from __future__ import annotations

import numpy as np
import torch

from pybuda.arch.tms import tile_broadcast
from pybuda.dataformat import DataFormat, MathFidelity
from pybuda.netlist import Op

from ..errors import SimulatorError
from ..formats import SRCA_SPLIT, SRCB_SPLIT, _phase_terms, quantize, truncate_mantissa
from .common import TILE, expect_inputs, input_formats, int_math, src
from .eltwise import unary_value

_A_BITS = {"hi": SRCA_SPLIT[0], "full": SRCA_SPLIT[0] + SRCA_SPLIT[1]}  # srcA = input 1
_B_BITS = {"hi": SRCB_SPLIT[0], "full": SRCB_SPLIT[0] + SRCB_SPLIT[1]}  # srcB = input 0


def fidelity_pairs(in0: np.ndarray, in1: np.ndarray, fidelity: "MathFidelity | str", integer: bool = False,
                   stored: tuple = (None, None)) -> list[tuple[np.ndarray, np.ndarray]]:
    """(lhs, rhs) operand pairs whose matrix products sum to in0 @ in1 as the FPU computes it.

    in0 is held in srcB, in1 in srcA. LoFi: Ahi*Bhi; HiFi2: Afull*Bhi; HiFi3: + Ahi*Blo; HiFi4: Afull*Bfull
    (docs/simulator.md). Integer math is exact (float64 operands). `stored`: the formats in0 and in1 hold values
    of, if known (a slice wider than the values' fraction bits is the value itself).
    """
    if integer:
        return [(in0.astype(np.float64), in1.astype(np.float64))]
    cache_a: dict[str, np.ndarray] = {}
    cache_b: dict[str, np.ndarray] = {}

    def a_slice(name: str) -> np.ndarray:
        if name not in cache_a:
            cache_a[name] = truncate_mantissa(in1, _A_BITS[name], stored[1])
        return cache_a[name]

    def b_slice(name: str) -> np.ndarray:
        if name not in cache_b:
            if name == "lo":
                cache_b[name] = (b_slice("full") - b_slice("hi")).astype(np.float32)
            else:
                cache_b[name] = truncate_mantissa(in0, _B_BITS[name], stored[0])
        return cache_b[name]

    return [(b_slice(sb), a_slice(sa)) for sa, sb in _phase_terms(MathFidelity.parse(fidelity))]


def _tensor(x: np.ndarray) -> torch.Tensor:
    if not (x.flags.c_contiguous and x.flags.writeable):
        x = np.ascontiguousarray(x).copy() if not x.flags.writeable else np.ascontiguousarray(x)
    return torch.from_numpy(x)


def mm(lhs: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    """lhs @ rhs over the last two dims with numpy broadcasting rules, on torch's GEMMs (numpy's stacked matmul
    does not use BLAS per matrix); a weight shared by every leading index is folded into one large GEMM."""
    if rhs.ndim >= 2 and lhs.ndim >= 2 and all(d == 1 for d in rhs.shape[:-2]) and lhs.ndim >= rhs.ndim:
        left = _tensor(lhs).reshape(-1, lhs.shape[-1])
        out = torch.mm(left, _tensor(rhs).reshape(rhs.shape[-2:]))
        return out.numpy().reshape(lhs.shape[:-1] + (rhs.shape[-1],))
    return torch.matmul(_tensor(lhs), _tensor(rhs)).numpy()


def _round(x: np.ndarray, df: DataFormat) -> np.ndarray:
    if df is DataFormat.Float32 and x.dtype == np.float32:
        return x
    return quantize(x, df)


def matmul(op: Op, ins: list[np.ndarray]) -> np.ndarray:
    """Dense matmul (sparse `identity` matmuls are dispatched to kernels.sparse).

    K is consumed in m_k steps of u_kt tiles (and z groups with `accumulate`); after every step the running sum
    is rounded to acc_df (dest) and, between steps, to intermed_df (spilled partials). `bias: true`: the result is
    packed to the intermediate buffer (intermed_df), then added to the bias with row 0 of every bias tile
    broadcast to all rows (the kernel's row-broadcast add), in dest. `sfpu_op: gelu` is applied in dest last.
    """
    attrs = op.attrs
    if attrs.requant or attrs.dequant:
        raise SimulatorError(f"op {op.name!r}: matmul requant/dequant is not supported by the numeric simulator")
    has_bias = bool(attrs.bias)
    expect_inputs(op, ins, 3 if has_bias else 2)
    a, b = ins[0], ins[1]
    integer = int_math(op)
    acc_df = op.effective_acc_df
    intermed_df = op.intermed_df
    z = (1 if attrs.z is None else attrs.z) if attrs.accumulate else 1
    m_k, u_kt = op.geometry.m_k, op.geometry.u_kt
    kstep = u_kt * TILE
    if a.shape[-1] != m_k * kstep or b.shape[-2] != m_k * kstep:
        raise SimulatorError(f"op {op.name!r}: inner dimension {a.shape[-1] // TILE} / {b.shape[-2] // TILE} tiles "
                             f"does not match m_k*u_kt = {m_k}*{u_kt}")
    pairs = fidelity_pairs(a, b, op.math_fidelity, integer, input_formats(op, 2))
    if z > 1:
        if a.shape[-3] % z or b.shape[-3] % z:
            raise SimulatorError(f"op {op.name!r}: accumulate z={z} does not divide the input t")
        pairs = [(l.reshape(l.shape[:-3] + (l.shape[-3] // z, z) + l.shape[-2:]),
                  r.reshape(r.shape[:-3] + (r.shape[-3] // z, z) + r.shape[-2:])) for l, r in pairs]
    steps = [(zi, k) for zi in range(z) for k in range(m_k)]
    acc = None
    for n, (zi, k) in enumerate(steps):
        part = None
        for lhs, rhs in pairs:
            if z > 1:
                lhs, rhs = lhs[..., zi, :, :], rhs[..., zi, :, :]
            if m_k > 1:
                lhs, rhs = lhs[..., k * kstep:(k + 1) * kstep], rhs[..., k * kstep:(k + 1) * kstep, :]
            term = mm(lhs, rhs)
            part = term if part is None else part + term
        acc = part if acc is None else acc + part
        acc = _round(acc, acc_df)  # dest register
        if n < len(steps) - 1:
            acc = _round(acc, intermed_df)  # partial spilled to / reloaded from the intermediate buffer
    if has_bias:
        packed = _round(acc, intermed_df)
        bias = ins[2] if integer else tile_broadcast(ins[2], "r")
        acc = _round(src(packed, integer) + src(bias, integer), acc_df)
    sfpu_op = attrs.sfpu_op
    if sfpu_op:
        if sfpu_op != "gelu":
            raise SimulatorError(f"op {op.name!r}: sfpu_op {sfpu_op!r} after matmul is not supported (gelu only)")
        acc = quantize(unary_value("gelu", attrs, acc, op.name), acc_df)
    return acc


def depthwise(op: Op, ins: list[np.ndarray]) -> np.ndarray:
    """Depthwise matmul: output tile (r, c) = sum_k in0 tile (r, k*CT + c) @ in1 tile (k, c) (in1 has m_k tile
    rows); optional bias with row broadcast; rounded to acc_df."""
    has_bias = bool(op.attrs.bias)
    expect_inputs(op, ins, 3 if has_bias else 2)
    a, b = ins[0], ins[1]
    m_k = op.geometry.m_k
    integer = int_math(op)
    *lead_a, t, rows, cols_in = a.shape
    ct = cols_in // (m_k * TILE)
    if b.shape[-2] != m_k * TILE or b.shape[-1] != ct * TILE:
        raise SimulatorError(f"op {op.name!r} (depthwise): input 1 must be (m_k x CT) = ({m_k} x {ct}) tiles, got "
                             f"({b.shape[-2] // TILE} x {b.shape[-1] // TILE})")
    acc = None
    for lhs, rhs in fidelity_pairs(a, b, op.math_fidelity, integer, input_formats(op, 2)):
        lv = lhs.reshape(lhs.shape[:-1] + (m_k, ct, TILE))
        rv = rhs.reshape(rhs.shape[:-2] + (m_k, TILE, ct, TILE))
        term = np.einsum("...rkcj,...kjcl->...rcl", lv, rv, optimize=True)
        acc = term if acc is None else acc + term
    acc = acc.reshape(acc.shape[:-2] + (ct * TILE,)).astype(np.float64 if integer else np.float32)
    acc = _round(acc, op.effective_acc_df)
    if has_bias:
        bias = ins[2] if integer else tile_broadcast(ins[2], "r")
        acc = _round(src(_round(acc, op.intermed_df), integer) + src(bias, integer), op.effective_acc_df)
    return acc
