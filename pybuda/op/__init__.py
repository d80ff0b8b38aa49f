"""PyBuda ops for PyBudaModule.forward. Every op takes a name first ("" for an automatic name), then its
operands (traced Tensors, Parameters or Python numbers), then attributes; it returns a traced Tensor."""
from __future__ import annotations

from ..module import Tensor, traced_op as _op


def Matmul(name: str, a, b) -> Tensor:
    return _op("matmul", name, [a, b])


def Add(name: str, a, b) -> Tensor:
    return _op("add", name, [a, b])


def Subtract(name: str, a, b) -> Tensor:
    return _op("subtract", name, [a, b])


def Multiply(name: str, a, b) -> Tensor:
    return _op("multiply", name, [a, b])


def Divide(name: str, a, b) -> Tensor:
    return _op("divide", name, [a, b])


def Max(name: str, a, b) -> Tensor:
    return _op("maximum", name, [a, b])


def Relu(name: str, a, threshold: float = 0.0, mode: str = "min") -> Tensor:
    return _op("relu", name, [a], {"threshold": threshold, "mode": mode})


def Gelu(name: str, a, approximate: str = "none") -> Tensor:
    return _op("gelu", name, [a], {"approximate": approximate})


def Exp(name: str, a) -> Tensor:
    return _op("exp", name, [a])


def Log(name: str, a) -> Tensor:
    return _op("log", name, [a])


def Reciprocal(name: str, a) -> Tensor:
    return _op("reciprocal", name, [a])


def Sqrt(name: str, a) -> Tensor:
    return _op("sqrt", name, [a])


def Sigmoid(name: str, a) -> Tensor:
    return _op("sigmoid", name, [a])


def Tanh(name: str, a) -> Tensor:
    return _op("tanh", name, [a])


def Softmax(name: str, a, *, dim: int, stable: bool = True) -> Tensor:
    return _op("softmax", name, [a], {"dim": dim})


def LogSoftmax(name: str, a, *, dim: int, stable: bool = True) -> Tensor:
    return _op("log_softmax", name, [a], {"dim": dim})


def Layernorm(name: str, a, weights, bias, dim: int = -1, epsilon: float = 1e-5) -> Tensor:
    return _op("layernorm", name, [a, weights, bias], {"dim": dim, "epsilon": epsilon})


def ReduceSum(name: str, a, dim: int) -> Tensor:
    return _op("reduce_sum", name, [a], {"dim": dim})


def ReduceAvg(name: str, a, dim: int) -> Tensor:
    return _op("reduce_avg", name, [a], {"dim": dim})


def ReduceMax(name: str, a, dim: int) -> Tensor:
    return _op("reduce_max", name, [a], {"dim": dim})


def Transpose(name: str, a, dim0: int, dim1: int) -> Tensor:
    return _op("transpose", name, [a], {"dim0": dim0, "dim1": dim1})


def Reshape(name: str, a, shape) -> Tensor:
    return _op("reshape", name, [a], {"shape": list(shape)})


def HSlice(name: str, a, slices: int) -> Tensor:
    return _op("hslice", name, [a], {"factor": slices})


def HStack(name: str, a, slices: int) -> Tensor:
    return _op("hstack", name, [a], {"factor": slices})


def VSlice(name: str, a, slices: int) -> Tensor:
    return _op("vslice", name, [a], {"factor": slices})


def VStack(name: str, a, slices: int) -> Tensor:
    return _op("vstack", name, [a], {"factor": slices})


def Dropout(name: str, a, p: float = 0.5, training: bool = False) -> Tensor:
    return _op("dropout", name, [a], {"p": p})


def Conv2d(name: str, activations, weights, bias=None, stride=1, padding=0, dilation=1, groups: int = 1) -> Tensor:
    operands = [activations, weights] + ([bias] if bias is not None else [])
    return _op("conv2d", name, operands, {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups})


def MaxPool2d(name: str, activations, kernel_size, stride=None, padding=0, dilation=1) -> Tensor:
    return _op("max_pool2d", name, [activations], {"kernel": kernel_size, "stride": stride or kernel_size,
                                                     "padding": padding, "dilation": dilation})
