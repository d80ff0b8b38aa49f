"""Matrix multiplication (PyBuda `matmul`, Buda `matmul` with optional bias and z accumulation)."""
from __future__ import annotations

import numpy as np

from .common import broadcast_shapes
from .registry import OpDef, OpError, register


def _shape(shapes, attrs):
    a, b = shapes[0], shapes[1]
    if len(a) < 2 or len(b) < 2:
        raise OpError(f"matmul needs operands of rank >= 2, got {a} and {b}")
    if a[-1] != b[-2]:
        raise OpError(f"inner dimensions differ: {a} @ {b}")
    lead = broadcast_shapes(a[:-2], b[:-2])
    out = (*lead, a[-2], b[-1])
    if attrs.get("accumulate"):
        out = (*out[:-3], 1, out[-2], out[-1])
    return out


def _eval(values, attrs):
    out = np.matmul(values[0].astype(np.float32), values[1].astype(np.float32))
    if attrs.get("accumulate"):
        out = out.sum(axis=-3, keepdims=True)
    if attrs.get("bias"):
        out = out + values[2]
    return out


def _lower(ctx):
    a, b = ctx.operands
    if len(ctx.node.shape) > 4 or any(d != 1 for d in ctx.node.shape[:-3]):
        raise OpError(f"op {ctx.node.name!r}: matmul with a batch over more than one dim {ctx.node.shape} "
                      "is not supported on device")
    z_out = ctx.node.shape[-3] if len(ctx.node.shape) >= 3 else 1
    a = ctx.broadcast_to(a, (z_out, *a.shape[-2:]), axes="z")
    b = ctx.broadcast_to(b, (z_out, *b.shape[-2:]), axes="z")
    if not (a.pad_zero[1] or b.pad_zero[0]):
        b = ctx.mask_padding(b, rows=True, cols=False)
    return ctx.op("matmul", [a, b], {}, pad_zero=(a.pad_zero[0], b.pad_zero[1]))


def _backward(ctx, index, grad):
    """d(A @ B): grad @ B^T for A, A^T @ grad for B (batch dims the operand broadcast over are summed after)."""
    if len(ctx.operands) != 2 or ctx.attrs.get("accumulate"):
        raise OpError(f"op {ctx.node.name!r}: no backward rule for a matmul with bias or z accumulation")
    other = ctx.op("transpose", [ctx.operand(1 - index)], {"dim0": -2, "dim1": -1})
    return ctx.op("matmul", [grad, other] if index == 0 else [other, grad])


register(OpDef("matmul", _shape, _eval, arity=(2, 3), buda=True, kind="matmul",
               groups={"fusable", "streamable", "inner_dim"}, lower=_lower, backward=_backward))
