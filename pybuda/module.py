"""PyBudaModule, Parameter and the traced Tensor: the native way to write a model against pybuda.op."""
from __future__ import annotations

import contextlib
import contextvars
import weakref
from typing import Iterator

import numpy as np
import torch

from .errors import UserInputError, UserTypeError
from .ir import Graph
from .ops import add_op


def to_numpy(value) -> np.ndarray:
    """A float32 array of `value` (a torch sparse tensor densified)."""
    if isinstance(value, torch.Tensor):
        value = value.to_dense() if value.layout != torch.strided else value
        return value.detach().to(torch.float32).cpu().numpy()
    return np.asarray(value, dtype=np.float32)


_TRACING: contextvars.ContextVar[Graph | None] = contextvars.ContextVar("pybuda_tracing", default=None)
# the names of the PyBudaModules whose forward is running, outermost first, joined by "." (an op's layer)
_LAYER: contextvars.ContextVar[str] = contextvars.ContextVar("pybuda_layer", default="")


@contextlib.contextmanager
def tracing(graph: Graph) -> Iterator[Graph]:
    """Ops traced meanwhile without a traced Tensor operand (on Parameters, constants and numbers only: the legacy
    consteval subgraphs) go into `graph`."""
    token = _TRACING.set(graph)
    try:
        yield graph
    finally:
        _TRACING.reset(token)


class _Arithmetic:
    """`+ - *` (and the reflected forms) trace Add, Subtract and Multiply ops, as legacy tensors and parameters do."""

    def __add__(self, other):
        return traced_op("add", "", [self, other])

    def __radd__(self, other):
        return traced_op("add", "", [other, self])

    def __sub__(self, other):
        return traced_op("subtract", "", [self, other])

    def __rsub__(self, other):
        return traced_op("subtract", "", [other, self])

    def __mul__(self, other):
        return traced_op("multiply", "", [self, other])

    def __rmul__(self, other):
        return traced_op("multiply", "", [other, self])


class Parameter(_Arithmetic):
    """A trainable tensor of a PyBudaModule: `Parameter(*shape)` (random normal; `from_shape`, legacy's parameter
    "without a value", which `verify_module` draws again) or `Parameter(tensor)`.
    `dev_data_format` (legacy) is refused unless None: set formats with `configure_mixed_precision`."""

    def __init__(self, *shape_or_tensor, requires_grad: bool = True, name: str | None = None,
                 dev_data_format=None):
        if dev_data_format is not None:
            raise UserInputError(f"Parameter {name or ''!r}: dev_data_format={dev_data_format} is not supported; "
                                 "set a parameter's format with pybuda.config.configure_mixed_precision("
                                 "name_regex=..., output_df=...)")
        self.from_shape = not (len(shape_or_tensor) == 1 and not isinstance(shape_or_tensor[0], int))
        if not self.from_shape:
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

    @staticmethod
    def create_from_torch(tensor: torch.Tensor, requires_grad: bool = True) -> "Parameter":
        """A parameter holding `tensor`'s values (legacy spelling)."""
        return Parameter(tensor, requires_grad=requires_grad)


class Constant:
    """A constant tensor an op may read (legacy `Tensor.create_from_torch(t, constant=True)`); its value is
    folded into the graph where an op reads it."""

    def __init__(self, value, name: str | None = None):
        self.value = to_numpy(value)
        self.name = name
        self.nodes: weakref.WeakKeyDictionary[Graph, str] = weakref.WeakKeyDictionary()   # its node per graph

    @property
    def shape(self) -> tuple:
        return self.value.shape


class Tensor(_Arithmetic):
    """A value being traced: the graph node that produces it."""

    def __init__(self, graph: Graph, name: str):
        self.graph = graph
        self.name = name

    @property
    def shape(self) -> tuple:
        return self.graph.node(self.name).shape

    @staticmethod
    def create_from_torch(tensor: torch.Tensor, dev_data_format=None, constant: bool = False):
        """Legacy spelling: a model input is the torch tensor itself (pass it to `pybuda.compile` or the compiled
        model); with `constant`, a Constant that ops may read. `dev_data_format` is refused unless None."""
        if dev_data_format is not None:
            raise UserInputError(f"Tensor.create_from_torch: dev_data_format={dev_data_format} is not supported; set "
                                 "input formats with CompilerConfig(default_df_override=...) or "
                                 "configure_mixed_precision(input_df=...)")
        return Constant(tensor) if constant else tensor

    def __repr__(self) -> str:
        return f"Tensor({self.name!r}, shape={self.shape})"


class PyBudaModule:
    """Base class of native modules. Assigning a Parameter (or a dict/list of them, or a submodule) to an
    attribute registers it under the hierarchical name "<module>.<attr>"."""

    def __init__(self, name: str):
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "_parameters", {})
        object.__setattr__(self, "_submodules", {})
        object.__setattr__(self, "_constants", {})

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

    def add_constant(self, name: str, prepend_name: bool = False, shape: tuple | None = None) -> None:
        """Declare constant `name` (its value comes from `set_constant`; with `shape`, zeros until then)."""
        full = f"{self.name}.{name}" if prepend_name else name
        if full in self._constants:
            raise UserInputError(f"module {self.name!r}: constant {full!r} already exists")
        self._constants[full] = Constant(np.zeros(shape, np.float32), full) if shape is not None else None

    def set_constant(self, name: str, data) -> None:
        """Give constant `name` (declared by `add_constant`, or new) the value `data`."""
        self._constants[name] = Constant(data, name)

    def get_constant(self, name: str) -> "Constant":
        """Constant `name`, for the ops of `forward` to read."""
        constant = self._constants.get(name)
        if constant is None:
            state = "has no value (set_constant)" if name in self._constants else "is not declared"
            raise UserInputError(f"module {self.name!r}: constant {name!r} {state}; constants: "
                                 f"{sorted(self._constants)}")
        return constant

    def get_name(self) -> str:
        return self.name

    def forward(self, *acts):
        raise NotImplementedError(f"{type(self).__name__}.forward is not defined")

    def __call__(self, *acts):
        """forward(*acts), the ops it traces tagged with this module's layer (`pybuda.query.layer_regex`)."""
        outer = _LAYER.get()
        token = _LAYER.set(f"{outer}.{self.name}" if outer else self.name)
        try:
            return self.forward(*acts)
        finally:
            _LAYER.reset(token)


class PyTorchModule(torch.nn.Module):
    """Legacy spelling: a torch module under a name. `pybuda.compile` compiles the module it wraps and names the
    compile (netlist, reports) after `name`."""

    def __init__(self, name: str, module: torch.nn.Module, redirect_forward: bool = True):
        super().__init__()
        if not isinstance(module, torch.nn.Module):
            raise UserTypeError(f"PyTorchModule {name!r}: expected a torch.nn.Module, got {type(module).__name__}")
        self.name = name
        self.module = module

    def forward(self, *args, **kwargs):
        return self.module(*args, **kwargs)

    def get_name(self) -> str:
        return self.name


def _graph_of(operands):
    for o in operands:
        if isinstance(o, Tensor):
            return o.graph
    graph = _TRACING.get()
    if graph is None:
        raise UserTypeError("an op outside a PyBudaModule's forward needs at least one traced Tensor operand (an "
                            "activation or the output of an op)")
    return graph


def _node(graph, value) -> str:
    if isinstance(value, Tensor):
        return value.name
    if isinstance(value, Parameter):
        if value.name not in graph:
            graph.add_parameter(value.name, value.numpy(), requires_grad=value.requires_grad)
        return value.name
    if isinstance(value, Constant):
        if graph not in value.nodes:
            value.nodes[graph] = graph.add_constant(graph.unique_name(value.name or "constant"), value.value)
        return value.nodes[graph]
    if isinstance(value, (int, float)):
        return graph.add_constant(graph.unique_name("constant"), np.array(float(value), dtype=np.float32))
    raise UserTypeError(f"unsupported operand {value!r}: expected a Tensor, a Parameter, a Constant or a number")


def traced_op(op_type: str, name: str, operands: list, attrs: dict | None = None) -> Tensor:
    """Trace op `op_type` on traced Tensors, Parameters or numbers (name "" for an automatic one)."""
    graph = _graph_of(operands)
    nodes = [_node(graph, o) for o in operands]
    name = name or graph.unique_name(f"{op_type}_{len(graph.op_names())}")
    return Tensor(graph, add_op(graph, name, op_type, nodes, attrs or {}, layer=_LAYER.get()))


def traced_constant(name: str, value) -> Tensor:
    """A constant node of the graph being traced (legacy `pybuda.op.Constant`)."""
    graph = _TRACING.get()
    if graph is None:
        raise UserTypeError(f"constant {name!r}: pybuda.op.Constant is traced inside a PyBudaModule's forward only")
    return Tensor(graph, graph.add_constant(graph.unique_name(name or "constant"), to_numpy(value)))
