"""Indexing ops: embedding (take), take along any axis, index_copy, gather_elements, index_tensor,
strided_slice, slice_scatter, cumsum, concatenate.
Embedding runs on the host (CPU fallback); the others are constant-evaluated, or lowered as noted."""
from __future__ import annotations

import numpy as np

from .common import ceil_tile, norm_dim
from .conv import from_spatial_rows, to_spatial_rows
from .registry import OpDef, OpError, register


def _embedding_shape(shapes, attrs):
    table, idx = shapes
    return (*idx, *table[1:])


def _embedding_backward(ctx, index: int, grad: str) -> str:
    """The table's gradient: the output rows' gradients summed into the rows their indices pick
    (`embedding_backward`). It runs where the embedding runs, on the host (its framework op type is embedding's,
    so `cpu_fallback_ops` takes it along); the indices have no gradient."""
    if index != 0:
        raise OpError(f"embedding {ctx.output!r}: its indices (operand 1) have no gradient")
    name = ctx.op("embedding_backward", [ctx.operand(1), grad], {"num_embeddings": int(ctx.shape(0)[0])})
    ctx.graph.node(name).original_op_type = "embedding"
    return name


register(OpDef("embedding", _embedding_shape, lambda v, a: v[0][v[1].astype(np.int64)], arity=(2, 2),
               kind="other", backward=_embedding_backward))


def _embedding_backward_shape(shapes, attrs):
    idx, grad = shapes
    return (int(attrs["num_embeddings"]), *grad[len(idx):])


def _scatter_rows(values, attrs):
    idx, grad = values
    rows = idx.astype(np.int64).reshape(-1)
    table = np.zeros((int(attrs["num_embeddings"]), int(np.prod(grad.shape[idx.ndim:], dtype=np.int64))),
                     dtype=np.float32)
    np.add.at(table, rows, grad.reshape(len(rows), -1))
    return table.reshape(int(attrs["num_embeddings"]), *grad.shape[idx.ndim:])


# the gradient of an embedding's table: out[idx[i]] += grad[i] (host only, like the embedding)
register(OpDef("embedding_backward", _embedding_backward_shape, _scatter_rows, arity=(2, 2), kind="other"))


def _take_shape(shapes, attrs):
    data, idx = shapes
    axis = norm_dim(int(attrs["axis"]), len(data)) + len(data)
    return (*data[:axis], *idx, *data[axis + 1:])


def _decompose_take(ctx):
    """A constant index: one position or a contiguous run is a narrow (plus a reshape); any other index along
    the last two dims is a matmul by a constant one-hot matrix (reflect/replicate padding, strided slices). A
    runtime index stays a host/constant op."""
    src = ctx.graph.node(ctx.operands[1].src)
    if src.kind != "constant" or ctx.operands[1].tms:
        return
    shape = ctx.node_input_shape(0)
    axis = norm_dim(int(ctx.node.attrs["axis"]), len(shape))
    index = src.value.astype(np.int64)
    index = np.where(index < 0, index + shape[axis], index).reshape(-1)
    x = ctx.operands[0]
    if len(index) and np.array_equal(index, np.arange(index[0], index[0] + len(index))):
        y = ctx.op("narrow", [x], {"dim": axis, "start": int(index[0]), "length": len(index)})
    elif axis == -3 and src.value.ndim == 1:
        y = _take_z(ctx, x, shape, index)
    elif axis in (-1, -2) and src.value.ndim == 1:
        onehot = np.zeros((len(index), shape[axis]), dtype=np.float32)
        onehot[np.arange(len(index)), index] = 1.0
        if axis == -1:
            y = ctx.op("matmul", [x, ctx.constant(onehot.T.copy(), "take_picker")])
        else:
            y = ctx.op("matmul", [ctx.constant(onehot, "take_picker"), x])
    else:
        return
    ctx.replace(ctx.op("reshape", [y], {"shape": list(ctx.node.shape)}))


def _take_z(ctx, x, shape: tuple, index: np.ndarray) -> str:
    """A constant take along z through the (..., R*C, Z) layout: the tensor's z columns taken by a picker (a take
    along the last axis), whose layout changes cancel between convolutions."""
    *lead, z, r, c = shape
    flat = ctx.op("reshape", [x], {"shape": [*lead, z, r * c]})
    rows = ctx.op("transpose", [flat], {"dim0": -2, "dim1": -1})
    taken = ctx.op("take", [rows, ctx.constant(index.astype(np.float32), "take_z_index")], {"axis": -1})
    return ctx.op("transpose", [taken], {"dim0": -2, "dim1": -1})


# numpy.take along any axis: position ids read from a registered buffer, relative-position tables, window
# index math (constant-evaluated), a class token read by a constant index (a narrow), reflect/replicate padding
# (constant indices along H and W). An axis-0 lookup of a runtime index is an embedding.
register(OpDef("take", _take_shape, lambda v, a: np.take(v[0], v[1].astype(np.int64), axis=int(a["axis"])),
               arity=(2, 2), kind="other", decompose=_decompose_take))


def _index_copy_eval(values, attrs):
    data, index, value = values
    out = data.copy()
    axis = int(attrs["axis"])
    where = [slice(None)] * data.ndim
    where[axis] = index.astype(np.int64).reshape(-1)
    out[tuple(where)] = value
    return out


def _decompose_index_copy(ctx):
    """A constant index along the last two dims: the kept positions masked, plus the value placed by a constant
    one-hot matmul (`data * keep + scatter(value)`); a runtime index stays a host/constant op."""
    src = ctx.graph.node(ctx.operands[1].src)
    shape = ctx.node_input_shape(0)
    axis = norm_dim(int(ctx.node.attrs["axis"]), len(shape))
    if src.kind != "constant" or ctx.operands[1].tms or axis not in (-1, -2):
        return
    index = src.value.astype(np.int64).reshape(-1) % shape[axis]
    onehot = np.zeros((len(index), shape[axis]), dtype=np.float32)
    onehot[np.arange(len(index)), index] = 1.0
    keep = np.ones(shape[axis], dtype=np.float32)
    keep[index] = 0.0
    data, value = ctx.operands[0], ctx.operands[2]
    if axis == -1:
        placed = ctx.op("matmul", [value, ctx.constant(onehot, "index_copy_picker")])
        kept = ctx.op("multiply", [data, ctx.constant(keep.reshape(1, -1), "index_copy_keep")])
    else:
        placed = ctx.op("matmul", [ctx.constant(onehot.T.copy(), "index_copy_picker"), value])
        kept = ctx.op("multiply", [data, ctx.constant(keep.reshape(-1, 1), "index_copy_keep")])
    ctx.replace(ctx.op("add", [kept, placed]))


# data.index_copy(axis, index, value) (legacy IndexCopy): the rows (columns) `index` of data replaced by value's
register(OpDef("index_copy", lambda s, a: s[0], _index_copy_eval, arity=(3, 3), kind="other",
               decompose=_decompose_index_copy))


def _tile_shape(shapes, attrs):
    reps = [int(r) for r in attrs["repeats"]]
    shape = (1,) * (len(reps) - len(shapes[0])) + tuple(shapes[0])
    reps = [1] * (len(shape) - len(reps)) + reps
    return tuple(d * r for d, r in zip(shape, reps))


# numpy.tile (constant-evaluated: alibi tables, masks built from shapes)
register(OpDef("tile", _tile_shape, lambda v, a: np.tile(v[0], [int(r) for r in a["repeats"]]), kind="tm"))


def _gather_elements_eval(values, attrs):
    return np.take_along_axis(values[0], values[1].astype(np.int64), axis=int(attrs["axis"]))


register(OpDef("gather_elements", lambda s, a: s[1], _gather_elements_eval, arity=(2, 2), kind="other"))


def _index_tensor_shape(shapes, attrs):
    data, *indices = shapes
    lead = np.broadcast_shapes(*indices)
    return (*lead, *data[len(indices):])


def _index_tensor_eval(values, attrs):
    data, *indices = values
    return data[tuple(i.astype(np.int64) for i in indices)]


register(OpDef("index_tensor", _index_tensor_shape, _index_tensor_eval, arity=(2, 8), kind="other"))


def _slices(shape, attrs):
    out = [slice(None)] * len(shape)
    for axis, b, e, s in zip(attrs["axes"], attrs["begin"], attrs["end"], attrs["strides"]):
        out[int(axis)] = slice(int(b), int(e), int(s))
    return tuple(out)


def _strided_slice_shape(shapes, attrs):
    return np.empty(shapes[0], dtype=np.bool_)[_slices(shapes[0], attrs)].shape


def _decompose_strided_slice(ctx):
    """Stride-1 slices are narrows (which have device lowerings). A strided slice reads constant positions: of
    the last two dims, one `take` per sliced axis; of others, a `take` of the rows of the tensor viewed as
    (positions, last dim), then of its columns (picker matmuls either way)."""
    a = ctx.node.attrs
    shape = ctx.node_input_shape(0)
    parts = [(int(ax), int(b), int(e), int(s)) for ax, b, e, s in zip(a["axes"], a["begin"], a["end"], a["strides"])]
    parts = [p for p in parts if not (p[1] == 0 and p[2] >= shape[p[0]] and p[3] == 1)]
    x = ctx.operands[0]
    if all(s == 1 for *_, s in parts):
        for axis, b, e, _ in parts:
            e = min(e, shape[axis])
            x = ctx.op("narrow", [x], {"dim": axis - len(shape), "start": b, "length": e - b})
    elif all(axis >= len(shape) - 2 for axis, *_ in parts):
        for axis, b, e, s in parts:
            index = np.arange(shape[axis])[b:e:s].astype(np.float32)
            x = ctx.op("take", [x, ctx.constant(index, "slice_index")], {"axis": axis - len(shape)})
    else:
        rows = np.arange(int(np.prod(shape[:-1]))).reshape(shape[:-1])[_slices(shape, a)[:-1]].ravel()
        x = ctx.op("reshape", [x], {"shape": [int(np.prod(shape[:-1])), shape[-1]]})
        x = ctx.op("take", [x, ctx.constant(rows.astype(np.float32), "slice_rows")], {"axis": -2})
        cols = np.arange(shape[-1])[_slices(shape, a)[-1]]
        if len(cols) != shape[-1]:
            x = ctx.op("take", [x, ctx.constant(cols.astype(np.float32), "slice_cols")], {"axis": -1})
        x = ctx.op("reshape", [x], {"shape": list(ctx.node.shape)})
    ctx.replace(x)


register(OpDef("strided_slice", _strided_slice_shape, lambda v, a: v[0][_slices(v[0].shape, a)],
               kind="tm", decompose=_decompose_strided_slice))


def _slice_scatter_eval(values, attrs):
    out = values[0].copy()
    index = [slice(None)] * out.ndim
    index[int(attrs["axis"])] = slice(int(attrs["start"]), int(attrs["end"]), int(attrs["step"]))
    out[tuple(index)] = values[1]
    return out


# data with src written into data[start:end:step] along axis (constant-evaluated: BEiT's relative position index)
register(OpDef("slice_scatter", lambda s, a: s[0], _slice_scatter_eval, arity=(2, 2), kind="other"))


def _cumsum_eval(values, attrs):
    return np.cumsum(values[0], axis=int(attrs["axis"]))


register(OpDef("cumsum", lambda s, a: s[0], _cumsum_eval, kind="other"))


# ---- concatenate ----------------------------------------------------------------------------------

def _concat_shape(shapes, attrs):
    rank = len(shapes[0])
    d = norm_dim(int(attrs["dim"]), rank)
    base = list(shapes[0])
    for s in shapes[1:]:
        if len(s) != rank or any(x != y for i, (x, y) in enumerate(zip(s, base)) if i != d + rank):
            raise OpError(f"concatenate of shapes {shapes} along dim {d}")
    base[d] = sum(s[d] for s in shapes)
    return tuple(base)


def _lower_concat(ctx):
    """Rows (dim -2) or columns (dim -1): each operand is placed by a constant 0/1 matmul and the parts are
    added (exact: the placements do not overlap, unplaced rows/columns are zero, and the placement matrix is
    zero across the operand's padding, so the operand's padding never leaks in)."""
    rank = len(ctx.node.shape)
    d = norm_dim(int(ctx.node.attrs["dim"]), rank)
    if d not in (-1, -2):
        raise OpError(f"op {ctx.node.name!r}: concatenate along dim {d} has no device lowering yet")
    total = ctx.node.shape[d]
    acc, offset = None, 0
    for k, x in enumerate(ctx.operands):
        n = x.shape[d]
        place = np.zeros((ceil_tile(total), ceil_tile(n)) if d == -2 else (ceil_tile(n), ceil_tile(total)),
                         dtype=np.float32)
        idx = np.arange(n)
        if d == -2:
            place[offset + idx, idx] = 1.0
            p = ctx.constant_padded(place[None, None], (total, n), f"concat_place_{k}")
            p = ctx.broadcast_to(p, (*x.shape[:-2], total, n), axes="z")
            part = ctx.op("matmul", [p, x], {}, pad_zero=(True, x.pad_zero[1]), aux=f"concat_{k}")
        else:
            place[idx, offset + idx] = 1.0
            p = ctx.constant_padded(place[None, None], (n, total), f"concat_place_{k}")
            p = ctx.broadcast_to(p, (*x.shape[:-2], n, total), axes="z")
            part = ctx.op("matmul", [x, p], {}, pad_zero=(x.pad_zero[0], True), aux=f"concat_{k}")
        last = k == len(ctx.operands) - 1
        acc = part if acc is None else ctx.op("add", [acc, part], {}, pad_zero=tuple(
            a and b for a, b in zip(acc.pad_zero, part.pad_zero)), aux=None if last else f"concat_sum_{k}")
        offset += n
    return acc


def _decompose_concat(ctx):
    """A channel concatenation of (..., C, H, W) tensors (dim -3, H x W > 1) in the CNN layout: each operand as its
    (H*W, C_k) matrix, concatenated along the columns, back to (..., C, H, W); between convolutions the layout
    changes cancel (`optimize`), so the device concatenates columns (`_lower_concat`). Other dims stay."""
    rank = len(ctx.node.shape)
    if rank < 3 or norm_dim(int(ctx.node.attrs["dim"]), rank) != -3 or len(ctx.operands) < 2:
        return
    *lead, c, h, w = ctx.node.shape
    if h * w == 1:
        return
    parts = [to_spatial_rows(ctx, x, ctx.node_input_shape(k)[-3], h, w)[0] for k, x in enumerate(ctx.operands)]
    matrix = ctx.op("concatenate", parts, {"dim": -1})
    ctx.replace(from_spatial_rows(ctx, matrix, tuple(lead), c, h, w, h * w))


def _concat_backward(ctx, index, grad):
    d = int(ctx.attrs["dim"])
    start = sum(ctx.shape(k)[d] for k in range(index))
    return ctx.op("narrow", [grad], {"dim": d, "start": start, "length": ctx.shape(index)[d]})


register(OpDef("concatenate", _concat_shape, lambda v, a: np.concatenate(v, axis=int(a["dim"])), arity=(1, 64),
               kind="tm", decompose=_decompose_concat, lower=_lower_concat, backward=_concat_backward))
