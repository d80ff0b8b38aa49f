"""Tensor manipulations of `pybuda.op` with the legacy signatures (tenstorrent/tt-buda `op/tm.py`,
`op/eltwise_nary.py`). Dimensions may be negative; the leading dimension of a traced tensor is the microbatch."""
from __future__ import annotations

import numpy as np
import torch

from ..errors import UserInputError
from ..module import Constant, Tensor, traced_op as _op
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


def _taken(name: str, operandA, axis: int, index: list[int]) -> Tensor:
    """The positions `index` of `operandA` along `axis` (a constant-index take: the registry decomposes it)."""
    positions = Constant(np.asarray(index, dtype=np.float32))
    return _op("take", name, [operandA, positions], {"axis": axis - len(operandA.shape)})


def Select(name: str, operandA, dim: int, index, stride: int = 0) -> Tensor:
    """In every period of `stride` positions along `dim` (0: the whole dim), the `index` (start, length) ones (an
    int: that one position)."""
    axis = _axis(name, operandA, dim)
    size = operandA.shape[axis]
    start, length = (index, 1) if isinstance(index, int) else tuple(index)
    stride = stride or size
    if not (0 <= start and 0 < length and start + length <= stride <= size and size % stride == 0):
        raise UserInputError(f"Select {name!r}: index ({start}, {length}), stride {stride} along dim {dim} of length "
                             f"{size}; legal: 0 <= start, start + length <= stride <= {size}, stride dividing {size}")
    return _taken(name, operandA, axis, [p + start + i for p in range(0, size, stride) for i in range(length)])


def AdvIndex(name: str, operandA, operandB, dim: int = 0) -> Tensor:
    """The positions operandB (integer values, flattened) of operandA along `dim` (torch.index_select). A
    constant index is a narrow or a picker matmul on the device; an index computed at run time is a host op."""
    axis = _axis(name, operandA, dim)
    index = _index(name, operandB)
    return _op("take", name, [operandA, index], {"axis": axis - len(operandA.shape)})


def _index(name: str, index):
    """An index operand as one flat list of positions: a constant or parameter as is, a traced value only with
    a microbatch of 1 (one list for every sample)."""
    if isinstance(index, Tensor) and len(index.shape) > 1 and index.shape[0] != 1:
        raise UserInputError(f"op {name!r}: an index computed at run time of shape {tuple(index.shape)} holds one "
                             f"list per sample; legal: a constant index, or an index input of microbatch 1 "
                             f"(shape (1, n)) read by every sample")
    if len(index.shape) == 1:
        return index
    return _op("reshape", part(name, "index"), [index], {"shape": [-1]})


def IndexCopy(name: str, operandA, index, value, dim: int) -> Tensor:
    """operandA with its positions `index` (integer values) along `dim` replaced by `value`
    (torch.index_copy). A constant index along the last two dims runs on the device (masked, plus a picker
    matmul); an index computed at run time is a host op."""
    axis = _axis(name, operandA, dim)
    expected = [*operandA.shape]
    expected[axis] = int(np.prod(index.shape))
    if list(value.shape) != expected:
        raise UserInputError(f"IndexCopy {name!r}: value shape {tuple(value.shape)}, index of {expected[axis]} "
                             f"positions along dim {dim} of {tuple(operandA.shape)}; legal: value shape "
                             f"{tuple(expected)}")
    return _op("index_copy", name, [operandA, _index(name, index), value], {"axis": axis - len(operandA.shape)})


def Narrow(name: str, operandA, dim: int, start: int, length: int, original_length: int) -> Tensor:
    """`length` positions from `start` along `dim` (legacy's `original_length`, the dim's unpadded length,
    must cover them)."""
    axis = _axis(name, operandA, dim)
    size = operandA.shape[axis]
    if not (0 <= start and 0 < length and start + length <= min(size, original_length)):
        raise UserInputError(f"Narrow {name!r}: start {start}, length {length} along dim {dim} of length {size} "
                             f"(original_length {original_length}); legal: 0 <= start, start + length <= "
                             f"{min(size, original_length)}")
    return _op("narrow", name, [operandA], {"dim": axis, "start": start, "length": length})


def PadTile(name: str, operandA, dim: int, original_length: int) -> Tensor:
    """Dimension `dim` (of length `original_length`) padded with zeros to a multiple of the tile size, 32."""
    axis = _axis(name, operandA, dim)
    if operandA.shape[axis] != original_length:
        raise UserInputError(f"PadTile {name!r}: dim {dim} has length {operandA.shape[axis]}, original_length is "
                             f"{original_length}; legal: the dim's length")
    shape = list(operandA.shape)
    shape[axis] = -(-original_length // 32) * 32
    return _op("pad", name, [operandA], {"shape": shape})


def _buda_padding(op_name: str):
    def refused(name: str, operandA, *args, **kwargs) -> Tensor:
        raise UserInputError(f"{op_name} {name!r}: a legacy Buda-IR internal (padding to whole tiles) is not a "
                             "user op here: lowering pads every tensor to tiles itself; use PadTile, Pad or Narrow")
    refused.__name__ = refused.__qualname__ = op_name
    refused.__doc__ = f"Refused: legacy's internal {op_name} (lowering pads to tiles here)."
    return refused


BudaPad = _buda_padding("BudaPad")
BudaUnpad = _buda_padding("BudaUnpad")


def PixelShuffle(name: str, operandA, upscale_factor: int) -> Tensor:
    """(N, C * r * r, H, W) -> (N, C, H * r, W * r), as torch.nn.functional.pixel_shuffle."""
    r = int(upscale_factor)
    *lead, c, h, w = operandA.shape
    if r < 1 or c % (r * r):
        raise UserInputError(f"PixelShuffle {name!r}: {c} channels, upscale_factor {r}; legal: a factor whose "
                             "square divides the channels")
    split = _op("reshape", part(name, "split"), [operandA], {"shape": [*lead, c // (r * r), r, r, h, w]})
    n = len(lead)
    moved = _op("permute", part(name, "interleave"), [split],
                {"axes": [*range(n), n, n + 3, n + 1, n + 4, n + 2]})
    return _op("reshape", name, [moved], {"shape": [*lead, c // (r * r), h * r, w * r]})


def BinaryStack(name: str, operandA, operandB, dim: int) -> Tensor:
    """operandA and operandB interleaved along `dim`: position 2i holds A's i-th, 2i + 1 B's."""
    axis = _axis(name, operandA, dim)
    stacked = Stack(part(name, "stack"), operandA, operandB, axis=axis + 1)
    shape = list(operandA.shape)
    shape[axis] *= 2
    return _op("reshape", name, [stacked], {"shape": shape})


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


def Interleave(name: str, *operands, axis: int, stride: int) -> Tensor:
    """The operands' z slices interleaved: slice k of operand i lands at k * len(operands) + i (legacy: along z,
    stride 1 only)."""
    z = operands[0].shape[-3] if operands else 0
    if axis != -3 or stride != 1 or any(o.shape != operands[0].shape for o in operands):
        raise UserInputError(f"Interleave {name!r}: axis {axis}, stride {stride}; legal (as in legacy): axis -3, "
                             "stride 1, operands of one shape")
    joined = Concatenate(part(name, "join"), *operands, axis=-3)
    n = len(operands)
    return _taken(name, joined, len(joined.shape) - 3, [i * z + k for k in range(z) for i in range(n)])


def Where(name: str, condition, x, y) -> Tensor:
    """x where `condition` is nonzero, else y."""
    return _op("where", name, [condition, x, y])
