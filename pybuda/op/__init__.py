"""PyBuda ops for PyBudaModule.forward, with the legacy signatures (tenstorrent/tt-buda `pybuda/op`). Every op takes
a name first ("" for an automatic name), then its operands (traced Tensors, Parameters or Python numbers), then
attributes; it returns a traced Tensor. Elementwise ops are in `pybuda.op.eltwise`, tensor manipulations in
`pybuda.op.tm`, convolution and pooling in `pybuda.op.conv`; `pybuda.op.nn` holds ready-made modules (Linear,
Conv2dModule, MaxPool2dModule, AvgPool2dModule)."""
from __future__ import annotations

from ..errors import UserInputError
from ..module import Tensor, traced_constant, traced_op as _op
from .conv import (AvgPool1d, AvgPool2d, Batchnorm, Conv2d, Conv2dTranspose, Conv3d, MaxPool1d, MaxPool2d, MaxPool3d,
                   Pad, Resize2d, Resize3d)
from .eltwise import (DRAMQueue, Abs, Add, Argmax, Buffer, Clip, Cosine, CumSum, Divide, Dropout, Equal, Exp, Gelu,
                      Tilize, Greater, GreaterEqual, Heaviside, Identity, LeakyRelu, Less, LessEqual, Log, LogicalAnd,
                      LogicalNot, Max, Min, Multiply, NotEqual, Pow, Power, Reciprocal, Relu, Sigmoid, Sine, Sqrt,
                      Subtract, Tanh, part)
from .quantize import BudaRequantize, Dequantize, Quantize, Requantize
from .sparse import SparseMatmul
from .tm import (AdvIndex, BinaryStack, Broadcast, BudaPad, BudaUnpad, Concatenate, HSlice, HStack, Index,
                 IndexCopy, Interleave, Narrow, PadTile, PixelShuffle, Repeat, Reshape, Select, Squeeze, Stack,
                 Transpose, Unsqueeze, VSlice, VStack, Where)

__all__ = ["AdvIndex", "BinaryStack", "BudaPad", "BudaUnpad", "GroupedReduceAvg", "IndexCopy", "Narrow",
           "PadTile", "PixelShuffle", "Tilize", "Conv3d", "MaxPool3d", "Resize3d",
           "BudaRequantize", "Dequantize", "Quantize", "Requantize", "SparseMatmul",
           "Abs", "Add", "Argmax", "AvgPool1d", "AvgPool2d", "Batchnorm", "Broadcast", "Buffer", "Clip",
           "Concatenate", "Constant", "Conv2d", "Conv2dTranspose", "Cosine", "CumSum", "DRAMQueue", "Divide",
           "Dropout", "Embedding", "Equal", "Exp", "Gelu", "Greater", "GreaterEqual", "HSlice", "HStack",
           "Heaviside", "Identity", "Index", "Interleave", "Layernorm", "LeakyRelu", "Less", "LessEqual", "Log",
           "LogSoftmax", "LogicalAnd", "LogicalNot", "Matmul", "Max", "MaxPool1d", "MaxPool2d", "Min", "Multiply",
           "NotEqual", "Pad", "Pow", "Power", "Reciprocal", "ReduceAvg", "ReduceMax", "ReduceSum", "Relu", "Repeat",
           "Reshape", "Resize2d", "Select", "Sigmoid", "Sine", "Softmax", "Sqrt", "Squeeze", "Stack", "Subtract",
           "Tanh", "Transpose", "Unsqueeze", "VSlice", "VStack", "Where", "nn"]


def Matmul(name: str, operandA, operandB, bias=None) -> Tensor:
    """A @ B, plus `bias` (broadcast over the rows) when given: the matmul is named `name`, the addition
    `name.add_bias`."""
    product = _op("matmul", name, [operandA, operandB])
    return product if bias is None else _op("add", part(name, "add_bias"), [product, bias])


def Constant(name: str, *, constant: float) -> Tensor:
    """A constant tensor holding the number `constant`."""
    return traced_constant(name, float(constant))


def Embedding(name: str, embedding_table, indices) -> Tensor:
    """The rows of `embedding_table` at `indices` (integer values)."""
    return _op("embedding", name, [embedding_table, indices])


def Softmax(name: str, operandA, *, dim: int, stable: bool = True) -> Tensor:
    """softmax along `dim` (always computed stably)."""
    return _op("softmax", name, [operandA], {"dim": dim})


def LogSoftmax(name: str, operandA, *, dim: int, stable: bool = True) -> Tensor:
    """log(softmax) along `dim`."""
    return _op("log_softmax", name, [operandA], {"dim": dim})


def Layernorm(name: str, operandA, weights, bias, dim: int = -1, epsilon: float = 1e-5) -> Tensor:
    """Layer normalisation over `dim`, scaled by `weights` and shifted by `bias`."""
    return _op("layernorm", name, [operandA, weights, bias], {"dim": dim, "epsilon": epsilon})


def ReduceSum(name: str, operandA, dim: int) -> Tensor:
    """The sum along `dim` (kept, size 1)."""
    return _op("reduce_sum", name, [operandA], {"dim": dim})


def ReduceAvg(name: str, operandA, dim: int) -> Tensor:
    """The mean along `dim` (kept, size 1)."""
    return _op("reduce_avg", name, [operandA], {"dim": dim})


def GroupedReduceAvg(name: str, operandA, dim: int, groups: int, keep_dims: bool = False) -> Tensor:
    """The mean of each of `groups` equal runs along `dim` (size `groups`); with `keep_dims`, each value
    replaced by its run's mean (the shape kept)."""
    axis = dim % len(operandA.shape) if -len(operandA.shape) <= dim < len(operandA.shape) else None
    size = operandA.shape[axis] if axis is not None else 0
    if axis is None or groups < 1 or size % groups:
        raise UserInputError(f"GroupedReduceAvg {name!r}: dim {dim}, groups {groups} for shape "
                             f"{tuple(operandA.shape)}; legal: a dim of the shape whose length the groups divide")
    shape = list(operandA.shape)
    runs = _op("reshape", part(name, "runs"), [operandA],
               {"shape": [*shape[:axis], groups, size // groups, *shape[axis + 1:]]})
    means = _op("reduce_avg", part(name, "avg") if keep_dims else part(name, "means"), [runs], {"dim": axis + 1})
    if keep_dims:
        means = _op("broadcast", part(name, "spread"), [means],
                    {"shape": [*shape[:axis], groups, size // groups, *shape[axis + 1:]]})
    shape[axis] = size if keep_dims else groups
    return _op("reshape", name, [means], {"shape": shape})


def ReduceMax(name: str, operandA, dim: int) -> Tensor:
    """The largest value along `dim` (kept, size 1)."""
    return _op("reduce_max", name, [operandA], {"dim": dim})


from . import nn  # noqa: E402  (its modules use the ops above: legacy `pybuda.op.nn`)
