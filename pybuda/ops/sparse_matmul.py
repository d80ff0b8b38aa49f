"""Sparse matmul: a constant sparse matrix (attribute `sparse`, a pybuda.sparse.SparseMatrix) times the
operand, `sparse @ x`. Convolution, pooling and padding pickers use it; on device it is the backend's identity
matmul (the netlist builder encodes the matrix's non-zero tiles, netlist-format.md §1.3)."""
from __future__ import annotations

import dataclasses

from .common import ceil_tile
from .registry import OpDef, OpError, register


# a lowered sparse matmul streams its output in t-slices of at most this many tile rows (each core's output
# block of one slice must fit L1); a vstack TM on the consumers' edges puts the slices back together
MAX_SLICE_TILE_ROWS = 128


def _shape(shapes, attrs):
    (x,) = shapes
    m, k = attrs["sparse"].shape
    if len(x) < 2 or x[-2] != k:
        raise OpError(f"sparse matmul of a {m}x{k} matrix needs an operand with {k} rows, got shape {x}")
    t = int(attrs.get("t", 1))
    if t > 1:
        return (*x[:-3], t, m // t, x[-1])
    return (*x[:-2], m, x[-1])


def _eval(values, attrs):
    out = attrs["sparse"].matmul(values[0])
    t = int(attrs.get("t", 1))
    return out.reshape(*out.shape[:-3], t, out.shape[-2] // t, out.shape[-1]) if t > 1 else out


def slices(tile_rows: int) -> int:
    """t of a sparse matmul output of `tile_rows` tile rows: the fewest slices of at most MAX_SLICE_TILE_ROWS."""
    return next(t for t in range(1, tile_rows + 1) if tile_rows % t == 0 and tile_rows // t <= MAX_SLICE_TILE_ROWS)


def _lower(ctx):
    (x,) = ctx.operands
    if len(ctx.node.shape) > 3 and any(d != 1 for d in ctx.node.shape[:-3]) or \
            (len(ctx.node.shape) >= 3 and ctx.node.shape[-3] != 1):
        raise OpError(f"op {ctx.node.name!r}: sparse matmul over a batch of matrices {ctx.node.shape} is not "
                      "supported on device")
    s = ctx.node.attrs["sparse"]
    if not x.pad_zero[0]:
        x = ctx.mask_padding(x, rows=True, cols=False)
    padded = s.resized((ceil_tile(s.shape[0]), ceil_tile(s.shape[1])))
    t = slices(padded.shape[0] // 32) if s.shape[0] % 32 == 0 else 1
    if t == 1:
        return ctx.op("sparse_matmul", [x], {"sparse": padded}, pad_zero=(True, x.pad_zero[1]))
    n = ctx.node.shape[-1]
    y = ctx.op("sparse_matmul", [x], {"sparse": padded, "t": t}, pad_zero=(True, x.pad_zero[1]),
               logical_shape=(t, s.shape[0] // t, n))
    return dataclasses.replace(y, tms=(("vstack", t),), shape=ctx.node.shape)


def _backward(ctx, index, grad):
    """d(S @ x)/dx: S^T @ grad."""
    if int(ctx.attrs.get("t", 1)) > 1:
        raise OpError(f"op {ctx.node.name!r}: no backward rule for a t-sliced sparse matmul (a Buda-level form)")
    return ctx.op("sparse_matmul", [grad], {"sparse": ctx.attrs["sparse"].transposed()})


register(OpDef("sparse_matmul", _shape, _eval, buda=True, kind="matmul", groups={"inner_dim"}, lower=_lower,
               backward=_backward))
