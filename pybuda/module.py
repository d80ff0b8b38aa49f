"""PyBudaModule, Parameter and the traced Tensor: the native way to write a model against pybuda.op."""
from __future__ import annotations

import numpy as np
import torch

from .errors import UserInputError, UserTypeError
from .ir import Graph
from .ops import add_op


def to_numpy(value) -> np.ndarray:
    if isinstance(value, torch.Tensor):
        return value.detach().to(torch.float32).cpu().numpy()
    return np.asarray(value, dtype=np.float32)


class Parameter:
    """A trainable tensor of a PyBudaModule: `Parameter(*shape)` (random normal) or `Parameter(tensor)`."""

    def __init__(self, *shape_or_tensor, requires_grad: bool = True, name: str | None = None):
        if len(shape_or_tensor) == 1 and not isinstance(shape_or_tensor[0], int):
            self._value = to_numpy(shape_or_tensor[0])
        else:
            shape = tuple(int(d) for d in shape_or_tensor)
            self._value = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        self.requires_grad = requires_grad
        self.name = name

    @property
    def shape(self) -> tuple:
        return self._value.shape

    def value(self) -> torch.Tensor:
        return torch.from_numpy(self._value.copy())

    def set_value(self, value) -> None:
        value = to_numpy(value)
        if value.shape != self._value.shape:
            raise UserInputError(f"parameter {self.name!r}: new value shape {value.shape} != {self._value.shape}")
        self._value = value

    def numpy(self) -> np.ndarray:
        return self._value


class Tensor:
    """A value being traced: the graph node that produces it."""

    def __init__(self, graph: Graph, name: str):
        self.graph = graph
        self.name = name

    @property
    def shape(self) -> tuple:
        return self.graph.node(self.name).shape

    def __add__(self, other):
        return traced_op("add", "", [self, other])

    def __sub__(self, other):
        return traced_op("subtract", "", [self, other])

    def __mul__(self, other):
        return traced_op("multiply", "", [self, other])

    __radd__ = __add__
    __rmul__ = __mul__

    def __repr__(self) -> str:
        return f"Tensor({self.name!r}, shape={self.shape})"


class PyBudaModule:
    """Base class of native modules. Assigning a Parameter (or a dict/list of them, or a submodule) to an
    attribute registers it under the hierarchical name "<module>.<attr>"."""

    def __init__(self, name: str):
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_submodules", {})

    def __setattr__(self, attr: str, value) -> None:
        if isinstance(value, Parameter):
            self.add_parameter(attr, value, prepend_name=True)
        elif isinstance(value, PyBudaModule):
            self._submodules[attr] = value
        elif isinstance(value, (list, tuple)) and value and all(isinstance(v, Parameter) for v in value):
            for i, v in enumerate(value):
                self.add_parameter(f"{attr}.{i}", v, prepend_name=True)
        elif isinstance(value, dict) and value and all(isinstance(v, Parameter) for v in value.values()):
            for k, v in value.items():
                self.add_parameter(f"{attr}.{k}", v, prepend_name=True)
        object.__setattr__(self, attr, value)

    def add_parameter(self, name: str, parameter: Parameter, prepend_name: bool = False) -> None:
        full = f"{self.name}.{name}" if prepend_name else name
        if full in self._parameters and self._parameters[full] is not parameter:
            raise UserInputError(f"module {self.name!r}: parameter {full!r} already exists")
        parameter.name = full
        self._parameters[full] = parameter

    def get_parameter(self, name: str) -> Parameter:
        params = self.get_parameters()
        if name not in params:
            raise KeyError(f"module {self.name!r} has no parameter {name!r}; it has {sorted(params)}")
        return params[name]

    def get_parameters(self, submodules: bool = True) -> dict[str, Parameter]:
        params = dict(self._parameters)
        if submodules:
            for sub in self._submodules.values():
                params.update(sub.get_parameters())
        return params

    def set_parameter(self, name: str, data) -> None:
        self.get_parameter(name).set_value(data)

    def get_name(self) -> str:
        return self.name

    def forward(self, *acts):
        raise NotImplementedError(f"{type(self).__name__}.forward is not defined")

    def __call__(self, *acts):
        return self.forward(*acts)


def _graph_of(operands):
    for o in operands:
        if isinstance(o, Tensor):
            return o.graph
    raise UserTypeError("an op needs at least one traced Tensor operand (an activation or the output of an op)")


def _node(graph, value) -> str:
    if isinstance(value, Tensor):
        return value.name
    if isinstance(value, Parameter):
        if value.name not in graph:
            graph.add_parameter(value.name, value.numpy(), requires_grad=value.requires_grad)
        return value.name
    if isinstance(value, (int, float)):
        return graph.add_constant(graph.unique_name("constant"), np.array(float(value), dtype=np.float32))
    raise UserTypeError(f"unsupported operand {value!r}: expected a Tensor, a Parameter or a number")


def traced_op(op_type: str, name: str, operands: list, attrs: dict | None = None) -> Tensor:
    """Trace op `op_type` on traced Tensors, Parameters or numbers (name "" for an automatic one)."""
    graph = _graph_of(operands)
    nodes = [_node(graph, o) for o in operands]
    name = name or graph.unique_name(f"{op_type}_{len(graph.op_names())}")
    return Tensor(graph, add_op(graph, name, op_type, nodes, attrs or {}))
