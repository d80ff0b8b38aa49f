"""Ready-made PyBudaModules of legacy `pybuda.op.nn`: Linear, Conv2dModule, ConvTranspose2dModule, MaxPool1dModule,
MaxPool2dModule, AvgPool2dModule, SparseMatmulModule.
Parameters start as torch's layers start them (Kaiming-uniform weights, uniform biases), from torch's global
generator (`torch.manual_seed` makes them repeatable)."""
from __future__ import annotations

import math

import torch

from ..errors import UserInputError
from ..module import Parameter, PyBudaModule, Tensor
from . import Matmul
from .conv import AvgPool2d, Conv2d, Conv2dTranspose, MaxPool1d, MaxPool2d
from .sparse import SparseMatmul, sparse_matrix


def _initialised(weight_shape: tuple, fan_in: int, bias: int | None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """torch.nn.Linear / Conv2d's initial weight of `weight_shape` and, if `bias` is a size, bias."""
    weight = torch.empty(weight_shape)
    torch.nn.init.kaiming_uniform_(weight, a=math.sqrt(5))
    if bias is None:
        return weight, None
    bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
    return weight, torch.empty(bias).uniform_(-bound, bound)


class Linear(PyBudaModule):
    """activations @ weights (in_features, out_features) + bias."""

    def __init__(self, name: str, in_features: int, out_features: int, bias: bool = True):
        super().__init__(name)
        weight, b = _initialised((out_features, in_features), in_features, out_features if bias else None)
        self.weights = Parameter(weight.T.contiguous())
        if b is not None:
            self.bias = Parameter(b)
        self.bias_ = bias

    def forward(self, activations) -> Tensor:
        return Matmul(self.name, activations, self.weights, bias=self.bias if self.bias_ else None)


class Conv2dModule(PyBudaModule):
    """A Conv2d with its own weights (out_channels, in_channels / groups, kh, kw) and bias."""

    def __init__(self, name: str, in_channels: int, out_channels: int, kernel_size, stride=1, padding="same",
                 dilation=1, groups: int = 1, bias: bool = True, t_stream_workaround: bool = False):
        super().__init__(name)
        kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else kernel_size
        fan_in = in_channels // groups * kh * kw
        weight, b = _initialised((out_channels, in_channels // groups, kh, kw), fan_in, out_channels if bias else None)
        self.weights = Parameter(weight)
        self.bias = Parameter(b) if b is not None else None
        self.kwargs = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}

    def forward(self, activations) -> Tensor:
        return Conv2d(self.name, activations, self.weights, bias=self.bias, **self.kwargs)


class ConvTranspose2dModule(PyBudaModule):
    """A Conv2dTranspose with its own weights (in_channels, out_channels / groups, kh, kw) and bias."""

    def __init__(self, name: str, in_channels: int, out_channels: int, kernel_size, stride=1, padding="same",
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1, padding_mode: str = "zeros"):
        super().__init__(name)
        if padding_mode != "zeros":
            raise UserInputError(f"ConvTranspose2dModule {name!r}: padding_mode={padding_mode!r}; legal: 'zeros'")
        kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else kernel_size
        fan_in = out_channels // groups * kh * kw      # torch computes it from the weight's dim 1
        weight, b = _initialised((in_channels, out_channels // groups, kh, kw), fan_in,
                                 out_channels if bias else None)
        self.weights = Parameter(weight)
        self.bias = Parameter(b) if b is not None else None
        self.kwargs = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups,
                       "output_padding": output_padding}

    def forward(self, activations) -> Tensor:
        return Conv2dTranspose(self.name, activations, self.weights, bias=self.bias, **self.kwargs)


class MaxPool1dModule(PyBudaModule):
    """MaxPool1d as a module."""

    def __init__(self, name: str, kernel_size: int, stride: int = 1, padding: int = 0, dilation: int = 1,
                 ceil_mode: bool = False, return_indices: bool = False):
        super().__init__(name)
        self.kwargs = {"kernel_size": kernel_size, "stride": stride, "padding": padding, "dilation": dilation,
                       "ceil_mode": ceil_mode, "return_indices": return_indices}

    def forward(self, activations) -> Tensor:
        return MaxPool1d(self.name, activations, **self.kwargs)


class MaxPool2dModule(PyBudaModule):
    """MaxPool2d as a module."""

    def __init__(self, name: str, kernel_size, stride=1, padding="same", dilation=1, ceil_mode: bool = False,
                 return_indices: bool = False):
        super().__init__(name)
        self.kwargs = {"kernel_size": kernel_size, "stride": stride, "padding": padding, "dilation": dilation,
                       "ceil_mode": ceil_mode, "return_indices": return_indices}

    def forward(self, activations) -> Tensor:
        return MaxPool2d(self.name, activations, **self.kwargs)


class AvgPool2dModule(PyBudaModule):
    """AvgPool2d as a module."""

    def __init__(self, name: str, kernel_size, stride=1, padding="same", ceil_mode: bool = False,
                 count_include_pad: bool = True, divisor_override: float | None = None):
        super().__init__(name)
        self.kwargs = {"kernel_size": kernel_size, "stride": stride, "padding": padding, "ceil_mode": ceil_mode,
                       "count_include_pad": count_include_pad, "divisor_override": divisor_override}

    def forward(self, activations) -> Tensor:
        return AvgPool2d(self.name, activations, **self.kwargs)


class SparseMatmulModule(PyBudaModule):
    """sparseA @ denseB for a constant sparse matrix sparseA (a torch sparse tensor, a Constant holding one, ...:
    see `SparseMatmul`), read once when the module is built."""

    def __init__(self, name: str, sparseA):
        super().__init__(name)
        self.sparseA = sparse_matrix(name, sparseA)

    def forward(self, denseB) -> Tensor:
        return SparseMatmul(self.name, self.sparseA, denseB)
