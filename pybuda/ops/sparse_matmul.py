"""Sparse matmul: a constant sparse matrix (attribute `sparse`, a pybuda.sparse.SparseMatrix) times the
operand, `sparse @ x`. Convolution and pooling pickers too large to hold densely use it; on device it is the
backend's identity matmul (the netlist builder encodes the matrix's non-zero tiles, netlist-format.md §1.3)."""
from __future__ import annotations

from .common import ceil_tile
from .registry import OpDef, OpError, register


def _shape(shapes, attrs):
    (x,) = shapes
    m, k = attrs["sparse"].shape
    if len(x) < 2 or x[-2] != k:
        raise OpError(f"sparse matmul of a {m}x{k} matrix needs an operand with {k} rows, got shape {x}")
    return (*x[:-2], m, x[-1])


def _eval(values, attrs):
    return attrs["sparse"].matmul(values[0])


def _lower(ctx):
    (x,) = ctx.operands
    if len(ctx.node.shape) > 3 and any(d != 1 for d in ctx.node.shape[:-3]) or \
            (len(ctx.node.shape) >= 3 and ctx.node.shape[-3] != 1):
        raise OpError(f"op {ctx.node.name!r}: sparse matmul over a batch of matrices {ctx.node.shape} is not "
                      "supported on device (t must be 1)")
    s = ctx.node.attrs["sparse"]
    if not x.pad_zero[0]:
        x = ctx.mask_padding(x, rows=True, cols=False)
    padded = s.resized((ceil_tile(s.shape[0]), ceil_tile(s.shape[1])))
    return ctx.op("sparse_matmul", [x], {"sparse": padded}, pad_zero=(True, x.pad_zero[1]))


register(OpDef("sparse_matmul", _shape, _eval, buda=True, kind="matmul", lower=_lower))
