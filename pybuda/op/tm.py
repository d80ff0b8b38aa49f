"""Tensor manipulations of `pybuda.op` with the legacy signatures (tenstorrent/tt-buda `op/tm.py`,
`op/eltwise_nary.py`). Dimensions may be negative; the leading dimension of a traced tensor is the microbatch."""
from __future__ import annotations

import torch

from ..errors import UserInputError
from ..module import Tensor, traced_op as _op
from .eltwise import part


def _axis(name: str, operandA, dim: int, extra: int = 0) -> int:
    """`dim` as a non-negative axis of operandA's shape (with `extra` positions more, for a new axis)."""
    rank = len(operandA.shape) + extra
    if not -rank <= dim < rank:
        raise UserInputError(f"op {name!r}: dim {dim} is out of range for shape {tuple(operandA.shape)}; legal: "
                             f"{-rank}..{rank - 1}")
    return dim % rank


def HSlice(name: str, operandA, slices: int) -> Tensor:
    """Split the columns into `slices` pieces stacked along z."""
    return _op("hslice", name, [operandA], {"factor": slices})


def HStack(name: str, operandA, slices: int = -1) -> Tensor:
    """Join `slices` z-slices side by side along the columns (-1: all of them)."""
    return _op("hstack", name, [operandA], {"factor": operandA.shape[-3] if slices == -1 else slices})


def VSlice(name: str, operandA, slices: int) -> Tensor:
    """Split the rows into `slices` pieces stacked along z."""
    return _op("vslice", name, [operandA], {"factor": slices})


def VStack(name: str, operandA, slices: int = -1) -> Tensor:
    """Join `slices` z-slices one above the other along the rows (-1: all of them)."""
    return _op("vstack", name, [operandA], {"factor": operandA.shape[-3] if slices == -1 else slices})


def Transpose(name: str, operandA, dim0: int, dim1: int, z_dim_slice: int = -1, out_dtype=None) -> Tensor:
    """Swap two dimensions. `z_dim_slice` and `out_dtype` were legacy internals: only their defaults are taken."""
    if z_dim_slice != -1 or out_dtype not in (None, torch.float32):
        raise UserInputError(f"Transpose {name!r}: z_dim_slice={z_dim_slice}, out_dtype={out_dtype} are not "
                             "supported; legal: the defaults (-1, torch.float32); set data formats with "
                             "pybuda.config.configure_mixed_precision instead")
    return _op("transpose", name, [operandA], {"dim0": dim0, "dim1": dim1})


def Reshape(name: str, operandA, shape) -> Tensor:
    """The same values in `shape` (one -1 allowed)."""
    return _op("reshape", name, [operandA], {"shape": list(shape)})


def Index(name: str, operandA, dim: int, start: int, stop: int | None = None, stride: int = 1) -> Tensor:
    """Positions start, start + stride, ... < stop along `dim` (stop None: start alone; negative: from the end)."""
    axis = _axis(name, operandA, dim)
    length = operandA.shape[axis]
    stop = start + 1 if stop is None else stop + length if stop < 0 else stop
    if stride < 1 or not 0 <= start < stop <= length:
        raise UserInputError(f"Index {name!r}: start {start}, stop {stop}, stride {stride} along dim {dim} of "
                             f"length {length}; legal: 0 <= start < stop <= {length}, stride >= 1")
    if stride == 1:
        return _op("narrow", name, [operandA], {"dim": axis, "start": start, "length": stop - start})
    return _op("strided_slice", name, [operandA], {"axes": [axis], "begin": [start], "end": [stop],
                                                   "strides": [stride]})


def Broadcast(name: str, operandA, dim: int, shape: int) -> Tensor:
    """Dimension `dim` (of size 1) repeated to size `shape`."""
    axis = _axis(name, operandA, dim)
    target = list(operandA.shape)
    target[axis] = int(shape)
    return _op("broadcast", name, [operandA], {"shape": target})


def Repeat(name: str, operandA, factors) -> Tensor:
    """The tensor tiled `factors[i]` times along each dimension i."""
    if len(factors) != len(operandA.shape):
        raise UserInputError(f"Repeat {name!r}: {len(factors)} factors for a {len(operandA.shape)}-D tensor; legal: "
                             "one factor per dimension")
    return _op("tile", name, [operandA], {"repeats": [int(f) for f in factors]})


def Unsqueeze(name: str, operandA, dim: int) -> Tensor:
    """A new dimension of size 1 at `dim`."""
    shape = list(operandA.shape)
    shape.insert(_axis(name, operandA, dim, extra=1), 1)
    return _op("reshape", name, [operandA], {"shape": shape})


def Squeeze(name: str, operandA, dim: int) -> Tensor:
    """Dimension `dim` (of size 1) removed."""
    shape = list(operandA.shape)
    axis = _axis(name, operandA, dim)
    if shape[axis] != 1:
        raise UserInputError(f"Squeeze {name!r}: dim {dim} has size {shape[axis]}; legal: a dimension of size 1")
    del shape[axis]
    return _op("reshape", name, [operandA], {"shape": shape})


def Concatenate(name: str, *operands, axis: int) -> Tensor:
    """The operands joined along `axis`."""
    return _op("concatenate", name, list(operands), {"dim": axis})


def Stack(name: str, *operands, axis: int) -> Tensor:
    """The operands joined along a new dimension at `axis`."""
    parts = [Unsqueeze(part(name, f"unsqueeze{k}"), o, axis) for k, o in enumerate(operands)]
    return Concatenate(name, *parts, axis=axis)


def Where(name: str, condition, x, y) -> Tensor:
    """x where `condition` is nonzero, else y."""
    return _op("where", name, [condition, x, y])
