"""PyTorch frontend: torch.export -> TVM Relax -> `pybuda.ir.Graph`.

The model is exported with `torch.export.export` on ONE sample (the leading microbatch dim of every sample
input is cut to 1), converted by `tvm.relax.frontend.torch.from_exported_program` with parameters kept as
function inputs, and the bindings of the Relax `main` function are walked in order, each live binding being
emitted as one or a few registry ops. Nothing is compiled by TVM; the IRModule is only read.

Names: graph inputs use the exported program's user input names ("x"), parameters and buffers their torch
state-dict names ("conv1.weight"), ops `f"{op_type}_{k}"` with a per-graph counter k ("conv2d_0",
"relu_1"), Relax constants `f"const_{k}"`, outputs "output_0", "output_1"... in model output order.
"""
from __future__ import annotations

import ast
import contextlib
import dataclasses
import inspect
import warnings
from typing import Callable, Union

import numpy as np
import torch
import tvm
from tvm import relax
from tvm.relax.frontend.torch import from_exported_program

from ..errors import InternalError, UserInputError
from ..ir import Graph, ShapeOnly
from ..ops import add_op
from . import relax_cnn
from .meta import holds_meta_weights

# cpu_fallback_ops moves registry ops to the host; an op with no pybuda mapping has no registry op, so it can run
# neither on the device nor on the host: the only way on is a mapping.
REMEDY = ("it has no pybuda op, so it can run neither on the device nor on the host (cpu_fallback_ops takes pybuda "
          "op types only); rewrite the model around it or report the op name")

Value = Union[str, tuple, None]  # a graph node name, a Relax tuple of values, or an unavailable output


class UnsupportedOpError(UserInputError):
    """A model op that has no mapping to a pybuda op."""


def import_torch(model: torch.nn.Module, sample_inputs: tuple[torch.Tensor, ...], *,
                 name: str = "model") -> Graph:
    """Convert `model` to a Graph describing one sample (leading dim 1) of `sample_inputs`.

    The model is left in eval mode. Raises UnsupportedOpError naming the first op without a mapping.
    """
    return import_program(export_model(model, sample_inputs), name=name)


@dataclasses.dataclass(frozen=True)
class Exported:
    """A torch.export program and, for a model whose weights are on the meta device, the state-dict names of the
    weights it takes as its last user inputs (`holds_meta_weights`)."""

    program: torch.export.ExportedProgram
    weights: tuple[str, ...] = ()
    input_names: tuple[str, ...] = ()     # the model's input names, where the program's are the wrapper's


class _WeightsAsInputs(torch.nn.Module):
    """`model` called with its parameters and buffers as inputs after its own (`torch.func.functional_call`): a
    meta-device model exports with every weight a user input, so no step copies or binds data it does not have."""

    def __init__(self, model: torch.nn.Module, weights: tuple[str, ...], inputs: int):
        super().__init__()
        object.__setattr__(self, "model", model)    # not a submodule: its weights are inputs here, not state
        self.weights, self.inputs = weights, inputs

    def forward(self, *args: torch.Tensor):
        return torch.func.functional_call(self.model, dict(zip(self.weights, args[self.inputs:])),
                                          args[:self.inputs])


def export_model(model: torch.nn.Module, sample_inputs: tuple[torch.Tensor, ...]) -> Exported:
    """The torch.export program of `model` (put in eval mode) on one sample of `sample_inputs` (not decomposed:
    that is part of the import, which a TVM cache hit skips); a meta-device model's with its weights as inputs."""
    model.eval()
    args = tuple(x[:1] for x in sample_inputs)
    weights: tuple[str, ...] = ()
    names: tuple[str, ...] = ()
    device = contextlib.nullcontext()
    if holds_meta_weights(model):
        state = {**dict(model.named_parameters()), **dict(model.named_buffers())}
        weights = tuple(state)
        args = tuple(x.to("meta") for x in args) + tuple(state[w].to("meta") for w in weights)
        names = _input_names(model, len(sample_inputs))
        model, device = _WeightsAsInputs(model, weights, len(sample_inputs)), torch.device("meta")
    with torch.no_grad(), device:
        try:
            return Exported(torch.export.export(model, args), weights, names)
        except Exception as e:  # noqa: BLE001  (torch.export raises many kinds; all mean the same to the user)
            first = str(e).strip().splitlines()[0] if str(e).strip() else ""
            raise UnsupportedOpError(f"torch.export cannot capture {type(model).__name__} on one sample of the sample "
                                     f"inputs ({type(e).__name__}: {first}); pybuda compiles what torch.export "
                                     "captures: static shapes, no data-dependent Python control flow") from e


def _input_names(model: torch.nn.Module, count: int) -> tuple[str, ...]:
    """The names torch.export gives `count` positional inputs of `model.forward` (`*args` as args_0, args_1...)."""
    names: list[str] = []
    for p in inspect.signature(model.forward).parameters.values():
        if p.kind == inspect.Parameter.VAR_POSITIONAL:
            names += [f"{p.name}_{i}" for i in range(count - len(names))]
        elif p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
    return tuple(names[:count])


@contextlib.contextmanager
def _torch_deprecations_quiet():
    """torch 2.13's own use of a deprecated pytree check (`isinstance(treespec, LeafSpec)`, warned while an exported
    program is copied) is not the user's to act on: it is not shown."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"`isinstance\(treespec, LeafSpec\)` is deprecated",
                                category=FutureWarning)
        yield


def import_program(exported: Exported, *, name: str = "model") -> Graph:
    """Convert an exported program (`export_model`) to a Graph: its decompositions, then TVM Relax."""
    with torch.no_grad(), _torch_deprecations_quiet():
        program = exported.program.run_decompositions()
        try:
            mod = from_exported_program(program, keep_params_as_input=True, run_ep_decomposition=False,
                                        custom_convert_map=_TORCH_CONVERTERS)
        except AssertionError as e:
            raise _tvm_unsupported(e, program) from None
    return _Importer(program, name, exported.weights, exported.input_names).run(mod["main"])


def _amax(node: torch.fx.Node, importer) -> relax.Var:
    """torch.amax (a max over dims, without indices), which TVM's importer lacks: Relax `max`."""
    args = importer.retrieve_args(node)
    dims = args[1] if len(node.args) > 1 else node.kwargs.get("dim", ())
    keepdim = args[2] if len(node.args) > 2 else node.kwargs.get("keepdim", False)
    return importer.block_builder.emit(relax.op.max(args[0], list(dims) or None, keepdims=keepdim))


_TORCH_CONVERTERS = {"amax.default": _amax}   # torch ops TVM's importer lacks -> their Relax form


Handler = Callable[["_Importer", relax.Call, tuple], Value]


class _Importer:
    """Walks a Relax function's bindings and emits graph nodes."""

    def __init__(self, program: torch.export.ExportedProgram, name: str, weights: tuple[str, ...] = (),
                 input_names: tuple[str, ...] = ()):
        self.program, self.weights, self.input_names = program, weights, input_names
        self.graph = Graph(name)
        self.env: dict[relax.Var, Value] = {}
        self.bound: dict[relax.Var, relax.Expr] = {}
        self.consts: dict[object, str] = {}
        self.buffers = {t.data_ptr(): (n, t) for n, t in program.named_buffers()}
        self.k = 0
        self.current: tuple[str, relax.Var] | None = None  # (Relax op name, bound var) being converted

    # -- walk ------------------------------------------------------------------------------------
    def run(self, func: relax.Function) -> Graph:
        self._add_inputs(func)
        self.bound = {b.var: b.value for block in func.body.blocks for b in block.bindings}
        live = self._live(func.body.body)
        for block in func.body.blocks:
            for b in block.bindings:
                if b.var in live:
                    self.env[b.var] = self._convert(b.value, b.var)
        outputs = self._value(func.body.body)
        for i, src in enumerate(_flatten(outputs)):
            if src is None:
                raise UnsupportedOpError(f"model output {i} is an unsupported value")
            self.graph.add_output(f"output_{i}", src)
        self.graph.remove_dead()
        return self.graph

    def _add_inputs(self, func: relax.Function) -> None:
        specs = {s.arg.name: s for s in self.program.graph_signature.input_specs}
        state = self.program.state_dict
        for i, var in enumerate(func.params):
            spec = specs[var.name]
            weight = i - (int(func.attrs["num_input"]) - len(self.weights))   # a meta model's weight inputs
            if 0 <= weight < len(self.weights):
                self.env[var] = self.graph.add_parameter(self.weights[weight], ShapeOnly(_type_shape(var.ty, var.name)))
            elif i < int(func.attrs["num_input"]):
                name = self.input_names[i] if i < len(self.input_names) else spec.arg.name
                self.env[var] = self.graph.add_input(name, _type_shape(var.ty, var.name))
            else:
                p = state[spec.target]
                self.env[var] = self.graph.add_parameter(spec.target, _numpy(p), requires_grad=p.requires_grad)

    def _live(self, root: relax.Expr) -> set:
        """Bound vars the result depends on; a tuple read by index only keeps the field it reads."""
        live: set = set()
        stack = [root]
        while stack:
            e = stack.pop()
            if isinstance(e, relax.Var):
                if e in self.bound and e not in live:
                    live.add(e)
                    stack.append(self.bound[e])
            elif isinstance(e, relax.Tuple):
                stack.extend(e.fields)
            elif isinstance(e, relax.TupleGetItem):
                field = self._tuple_field(e)
                stack.append(e.tuple_value if field is None else field)
            elif isinstance(e, relax.Call):
                stack.extend(a for a in e.args if not isinstance(a, relax.ShapeExpr))
        return live

    def _tuple_field(self, e: relax.TupleGetItem) -> relax.Expr | None:
        """The field expression read by `e` when its tuple is a var bound to a literal Tuple."""
        t = e.tuple_value
        if isinstance(t, relax.Var) and t not in self.env and isinstance(self.bound.get(t), relax.Tuple):
            return self.bound[t].fields[e.index]
        return None

    def _value(self, e: relax.Expr) -> Value:
        if isinstance(e, relax.Var):
            return self.env[e]
        if isinstance(e, tvm.ir.Constant):
            return self._constant(e)
        if isinstance(e, relax.Tuple):
            return tuple(self._value(f) for f in e.fields)
        if isinstance(e, relax.TupleGetItem):
            field = self._tuple_field(e)
            return self._value(field) if field is not None else self._value(e.tuple_value)[e.index]
        raise UnsupportedOpError(f"Relax expression {type(e).__name__} is not supported: {e}")

    def _convert(self, e: relax.Expr, var: relax.Var) -> Value:
        if not isinstance(e, relax.Call):
            return self._value(e)
        op = e.op.name if isinstance(e.op, tvm.ir.Op) else str(e.op)
        self.current = (op, var)
        handler = _OPS.get(op)
        if handler is None:
            self.unsupported()
        out = handler(self, e, _type_shape(var.ty, op) if isinstance(var.ty, relax.TensorType) else ())
        self._check(out, var.ty, op)
        return out

    def _check(self, out: Value, ty, op: str) -> None:
        if isinstance(out, tuple):
            for o, t in zip(out, ty.fields):
                self._check(o, t, op)
        elif out is not None:
            got, want = self.graph.node(out).shape, _type_shape(ty, op)
            if got != want:
                raise InternalError(f"import mapping bug: {op} emitted {out!r} of shape {got}, Relax says {want}")

    # -- emission helpers for the handlers -------------------------------------------------------
    def arg(self, call: relax.Call, i: int) -> str:
        v = self._value(call.args[i])
        if not isinstance(v, str):
            raise UnsupportedOpError(f"{call.op.name}: operand {i} is not a tensor produced by a supported op")
        return v

    def shape(self, node: str) -> tuple:
        return self.graph.node(node).shape

    def emit(self, op_type: str, operands: list[str], attrs: dict | None = None) -> str:
        return add_op(self.graph, self._fresh(op_type), op_type, operands, attrs or {})

    def constant(self, value: np.ndarray) -> str:
        return self.graph.add_constant(self._fresh("const"), value)

    def _fresh(self, base: str) -> str:
        name = self.graph.unique_name(f"{base}_{self.k}")
        self.k += 1
        return name

    def _constant(self, c: tvm.ir.Constant) -> str:
        """A Relax constant: a bound torch buffer keeps its state-dict name, anything else is `const_k`."""
        if c in self.consts:
            return self.consts[c]
        buf = self.buffers.get(torch.from_dlpack(c.value).data_ptr())
        if buf is not None and tuple(buf[1].shape) == c.value.numpy().shape:
            node = buf[0] if buf[0] in self.graph else self.graph.add_parameter(buf[0], _numpy(buf[1]))
        else:
            node = self.constant(c.value.numpy())
        self.consts[c] = node
        return node

    def unsupported(self, detail: str = "") -> None:
        """Raise UnsupportedOpError for the binding being converted, with its best-effort model location."""
        op, var = self.current
        short = op.rsplit(".", 1)[-1]
        want = _type_shape(var.ty, op) if isinstance(var.ty, relax.TensorType) else None
        nodes = [n for n in self.program.graph.nodes if n.op == "call_function"
                 and _related(short, n.target.__name__.split(".")[0].strip("_"))]
        nodes.sort(key=lambda n: getattr(n.meta.get("val"), "shape", None) != want)
        where = _where(nodes[0]) if nodes else "source location unknown"
        raise UnsupportedOpError(f"Relax op {op!r}{detail} has no pybuda mapping ({where}); {REMEDY}")


# ---- handlers ------------------------------------------------------------------------------------

def _unary(op_type: str, **attrs) -> Handler:
    return lambda imp, call, out: imp.emit(op_type, [imp.arg(call, 0)], dict(attrs))


def _binary(op_type: str) -> Handler:
    return lambda imp, call, out: imp.emit(op_type, [imp.arg(call, 0), imp.arg(call, 1)])


def _rsqrt(imp: _Importer, call: relax.Call, out: tuple) -> str:
    return imp.emit("reciprocal", [imp.emit("sqrt", [imp.arg(call, 0)])])


def _negative(imp: _Importer, call: relax.Call, out: tuple) -> str:
    return imp.emit("multiply", [imp.arg(call, 0), imp.constant(np.array(-1.0, dtype=np.float32))])


def _conv2d(imp: _Importer, call: relax.Call, out: tuple) -> str:
    a = call.attrs
    if (a.data_layout, a.kernel_layout, a.out_layout or a.data_layout) != ("NCHW", "OIHW", "NCHW"):
        imp.unsupported(f" with layouts {a.data_layout}/{a.kernel_layout}")
    return imp.emit("conv2d", [imp.arg(call, 0), imp.arg(call, 1)], {
        "stride": [int(s) for s in a.strides], "padding": [int(p) for p in a.padding],
        "dilation": [int(d) for d in a.dilation], "groups": int(a.groups)})


def _max_pool2d(imp: _Importer, call: relax.Call, out: tuple) -> str:
    a = call.attrs
    if a.layout != "NCHW":
        imp.unsupported(f" with layout {a.layout}")
    return imp.emit("max_pool2d", [imp.arg(call, 0)], {
        "kernel": [int(k) for k in a.pool_size], "stride": [int(s) for s in a.strides],
        "padding": [int(p) for p in a.padding], "dilation": [int(d) for d in a.dilation],
        "ceil_mode": bool(a.ceil_mode)})


def _matmul(imp: _Importer, call: relax.Call, out: tuple) -> str:
    return imp.emit("matmul", [imp.arg(call, 0), imp.arg(call, 1)])


def _linear(imp: _Importer, call: relax.Call, out: tuple) -> str:
    wt = imp.emit("permute", [imp.arg(call, 1)], {"axes": [1, 0]})
    y = imp.emit("matmul", [imp.arg(call, 0), wt])
    return imp.emit("add", [y, imp.arg(call, 2)]) if len(call.args) > 2 else y


def _reshape(imp: _Importer, call: relax.Call, out: tuple) -> str:
    x = imp.arg(call, 0)
    return x if imp.shape(x) == out else imp.emit("reshape", [x], {"shape": list(out)})


def _permute(imp: _Importer, call: relax.Call, out: tuple) -> str:
    x = imp.arg(call, 0)
    axes = call.attrs.axes
    axes = list(range(len(imp.shape(x))))[::-1] if axes is None else [int(i) for i in axes]
    return imp.emit("permute", [x], {"axes": axes})


def _broadcast_to(imp: _Importer, call: relax.Call, out: tuple) -> str:
    x = imp.arg(call, 0)
    return x if imp.shape(x) == out else imp.emit("broadcast", [x], {"shape": list(out)})


def _astype(imp: _Importer, call: relax.Call, out: tuple) -> str:
    dtype = str(call.attrs.dtype)
    if dtype == "float32":
        return imp.arg(call, 0)
    if dtype not in ("float16", "bfloat16", "bool", "int8", "int16", "int32", "int64", "uint8"):
        imp.unsupported(f" to {dtype}")
    return imp.emit("cast", [imp.arg(call, 0)], {"dtype": dtype})


def _ints(expr) -> list[int]:
    """A Relax tuple / shape of integer immediates as Python ints."""
    fields = expr.fields if isinstance(expr, relax.Tuple) else \
        expr.values if isinstance(expr, relax.ShapeExpr) else expr
    return [int(getattr(f, "value", f)) for f in fields]


def _scalar(expr) -> float:
    """An immediate (IntImm/FloatImm/PrimValue) or a one-element Relax constant as a float."""
    value = getattr(expr, "value", expr)
    return float(value.numpy()) if hasattr(value, "numpy") else float(getattr(value, "value", value))


def _strided_slice(imp: _Importer, call: relax.Call, out: tuple) -> str:
    x = imp.arg(call, 0)
    axes, begin, end, strides = (_ints(call.args[i]) for i in range(1, 5))
    shape = imp.shape(x)
    axes = [a % len(shape) for a in axes]
    if any(s < 1 for s in strides):
        imp.unsupported(f" with strides {strides} (positive strides only)")
    begin, end = ([min(max(i + shape[a] if i < 0 else i, 0), shape[a]) for a, i in zip(axes, ends)]
                  for ends in (begin, end))
    return imp.emit("strided_slice", [x], {"axes": axes, "begin": begin, "end": end, "strides": strides})


def _take(imp: _Importer, call: relax.Call, out: tuple) -> str:
    """An axis-0 lookup is an embedding; any other axis a `take` (constant-evaluated)."""
    axis = int(call.attrs.axis) if call.attrs.axis is not None else None
    if axis is None:
        imp.unsupported(" of a flattened tensor")
    if axis == 0:
        return imp.emit("embedding", [imp.arg(call, 0), imp.arg(call, 1)])
    return imp.emit("take", [imp.arg(call, 0), imp.arg(call, 1)], {"axis": axis})


def _gather_elements(imp: _Importer, call: relax.Call, out: tuple) -> str:
    return imp.emit("gather_elements", [imp.arg(call, 0), imp.arg(call, 1)], {"axis": int(call.attrs.axis)})


def _arange(imp: _Importer, call: relax.Call, out: tuple) -> str:
    start, stop, step = (_scalar(a) for a in call.args[:3])
    return imp.constant(np.arange(start, stop, step, dtype=np.float32))


def _full(imp: _Importer, call: relax.Call, out: tuple) -> str:
    return imp.constant(np.full(out, _scalar(call.args[1]), dtype=np.float32))


def _const_like(value: float | None) -> Handler:
    def handler(imp: _Importer, call: relax.Call, out: tuple) -> str:
        fill = _scalar(call.args[1]) if value is None else value
        return imp.constant(np.full(out, fill, dtype=np.float32))
    return handler


def _cumsum(imp: _Importer, call: relax.Call, out: tuple) -> str:
    if call.attrs.exclusive:
        imp.unsupported(" (exclusive)")
    x = imp.arg(call, 0)
    axis = -1 if call.attrs.axis is None else int(call.attrs.axis)
    if call.attrs.axis is None and len(imp.shape(x)) != 1:
        x = imp.emit("reshape", [x], {"shape": [int(np.prod(imp.shape(x)))]})
    return imp.emit("cumsum", [x], {"axis": axis})


def _index_tensor(imp: _Importer, call: relax.Call, out: tuple) -> str:
    indices = [imp._value(f) for f in call.args[1].fields]
    return imp.emit("index_tensor", [imp.arg(call, 0), *indices])


def _concat(imp: _Importer, call: relax.Call, out: tuple) -> str:
    parts = [imp._value(f) for f in call.args[0].fields]
    return parts[0] if len(parts) == 1 else imp.emit("concatenate", parts, {"dim": int(call.attrs.axis)})


def _split(imp: _Importer, call: relax.Call, out: tuple) -> tuple:
    x = imp.arg(call, 0)
    shape = imp.shape(x)
    axis = int(call.attrs.axis) % len(shape)
    spec = call.attrs.indices_or_sections
    if isinstance(spec, (int, tvm.tirx.IntImm)):
        step = shape[axis] // int(spec)
        bounds = list(range(0, shape[axis] + 1, step))
    else:
        bounds = [0, *_ints(spec), shape[axis]]
    return tuple(imp.emit("narrow", [x], {"dim": axis - len(shape), "start": b, "length": e - b})
                 for b, e in zip(bounds, bounds[1:]))


def _slice_scatter(imp: _Importer, call: relax.Call, out: tuple) -> str:
    start, end, step = (int(_scalar(a)) for a in call.args[2:5])
    axis = int(call.attrs.axis) % len(out)
    start, end = (min(max(i + out[axis] if i < 0 else i, 0), out[axis]) for i in (start, end))
    return imp.emit("slice_scatter", [imp.arg(call, 0), imp.arg(call, 1)],
                    {"axis": axis, "start": start, "end": end, "step": step})


def _power(imp: _Importer, call: relax.Call, out: tuple) -> str:
    e = call.args[1]
    if not (isinstance(e, tvm.ir.Constant) and e.value.numpy().size == 1):
        return imp.emit("pow", [imp.arg(call, 0), imp.arg(call, 1)])
    exponent = float(e.value.numpy())
    x = imp.arg(call, 0)
    return imp.emit("multiply", [x, x]) if exponent == 2.0 else imp.emit("power", [x], {"exponent": exponent})


def _softmax(op_type: str) -> Handler:
    return lambda imp, call, out: imp.emit(op_type, [imp.arg(call, 0)], {"dim": int(call.attrs.axis)})


def _layer_norm(imp: _Importer, call: relax.Call, out: tuple) -> str:
    a = call.attrs
    x = imp.arg(call, 0)
    rank = len(imp.shape(x))
    if [int(i) % rank for i in a.axes] != [rank - 1]:
        imp.unsupported(f" over axes {list(a.axes)} (only the last axis)")
    gamma = imp.arg(call, 1) if a.scale else imp.constant(np.ones(out[-1], dtype=np.float32))
    operands = [x, gamma, imp.arg(call, 2)] if a.center else [x, gamma]
    return imp.emit("layernorm", operands, {"dim": -1, "epsilon": float(a.epsilon)})


def _reduce(op_type: str) -> Handler:
    def handler(imp: _Importer, call: relax.Call, out: tuple) -> str:
        x = imp.arg(call, 0)
        rank = len(imp.shape(x))
        axes = range(rank) if call.attrs.axis is None else sorted({int(i) % rank for i in call.attrs.axis})
        keep = bool(call.attrs.keepdims)
        if len(axes) == 1:
            return imp.emit(op_type, [x], {"dim": axes[0] - rank, "keep_dim": keep})
        for axis in axes:
            x = imp.emit(op_type, [x], {"dim": axis - rank, "keep_dim": True})
        return x if keep else imp.emit("reshape", [x], {"shape": list(out)})
    return handler


def _argmax(imp: _Importer, call: relax.Call, out: tuple) -> str:
    """argmax along one axis (or of the flattened tensor: axis None)."""
    x = imp.arg(call, 0)
    if call.attrs.axis is None:
        x = imp.emit("reshape", [x], {"shape": [int(np.prod(imp.shape(x)))]})
        dim = -1
    else:
        dim = int(call.attrs.axis) - len(imp.shape(x)) if int(call.attrs.axis) >= 0 else int(call.attrs.axis)
    y = imp.emit("argmax", [x], {"dim": dim, "keep_dim": bool(call.attrs.keepdims)})
    return y if tuple(imp.shape(y)) == tuple(out) else imp.emit("reshape", [y], {"shape": list(out)})


def _bitwise_not(imp: _Importer, call: relax.Call, out: tuple) -> str:
    """Bitwise not of a boolean is logical not; of integers it is not supported."""
    dtype = str(call.args[0].ty.dtype)
    if dtype != "bool":
        imp.unsupported(f" of {dtype} (booleans only)")
    return imp.emit("logical_not", [imp.arg(call, 0)])


def _dropout(imp: _Importer, call: relax.Call, out: tuple) -> tuple:
    """Relax dropout returns (output, mask); the mask is not available."""
    return imp.emit("dropout", [imp.arg(call, 0)], {"p": float(call.attrs.rate)}), None


_OPS: dict[str, Handler] = {
    "relax.nn.conv2d": _conv2d,
    "relax.nn.max_pool2d": _max_pool2d,
    "relax.nn.relu": _unary("relu"),
    "relax.nn.leakyrelu": lambda imp, call, out: imp.emit("leaky_relu", [imp.arg(call, 0)],
                                                          {"alpha": float(call.attrs.alpha)}),
    "relax.nn.gelu": _unary("gelu", approximate="none"),
    "relax.nn.gelu_tanh": _unary("gelu", approximate="tanh"),
    **{f"relax.{op}": _unary(op) for op in ("exp", "log", "sqrt", "tanh", "sigmoid", "abs", "floor")},
    "relax.sin": _unary("sine"),
    "relax.cos": _unary("cosine"),
    "relax.rsqrt": _rsqrt,
    "relax.negative": _negative,
    **{f"relax.{op}": _binary(op) for op in ("add", "subtract", "multiply", "divide", "maximum", "minimum")},
    "relax.power": _power,
    "relax.matmul": _matmul,
    "relax.nn.linear": _linear,
    **{f"relax.{op}": _reshape for op in ("reshape", "expand_dims", "squeeze", "flatten")},
    "relax.permute_dims": _permute,
    "relax.broadcast_to": _broadcast_to,
    "relax.astype": _astype,
    "relax.nn.softmax": _softmax("softmax"),
    "relax.nn.log_softmax": _softmax("log_softmax"),
    "relax.nn.layer_norm": _layer_norm,
    "relax.mean": _reduce("reduce_avg"),
    "relax.sum": _reduce("reduce_sum"),
    "relax.max": _reduce("reduce_max"),
    "relax.argmax": _argmax,
    "relax.nn.dropout": _dropout,
    "relax.strided_slice": _strided_slice,
    "relax.take": _take,
    "relax.gather_elements": _gather_elements,
    "relax.arange": _arange,
    "relax.full": _full,
    "relax.full_like": _const_like(None),
    "relax.zeros_like": _const_like(0.0),
    "relax.ones_like": _const_like(1.0),
    **{f"relax.{op}": _binary(op) for op in ("equal", "not_equal", "greater", "greater_equal", "less",
                                              "less_equal", "logical_and", "logical_or")},
    "relax.bitwise_and": _binary("logical_and"),
    "relax.bitwise_or": _binary("logical_or"),
    "relax.logical_not": _unary("logical_not"),
    "relax.bitwise_not": _bitwise_not,
    "relax.mod": _binary("fmod"),
    "relax.floor_mod": _binary("floor_mod"),
    "relax.floor_divide": _binary("floor_divide"),
    "relax.where": lambda imp, call, out: imp.emit("where", [imp.arg(call, i) for i in range(3)]),
    "relax.cumsum": _cumsum,
    "relax.index_tensor": _index_tensor,
    "relax.concat": _concat,
    "relax.tile": lambda imp, call, out: imp.emit("tile", [imp.arg(call, 0)], {"repeats": _ints(call.attrs.repeats)}),
    "relax.split": _split,
    "relax.slice_scatter": _slice_scatter,
}
_OPS.update(relax_cnn.HANDLERS)  # batch_norm, pad, clip, pools, spatial mean (CNN models)


# ---- helpers -------------------------------------------------------------------------------------

def _type_shape(ty, what: str) -> tuple:
    """Static shape of a Relax tensor type."""
    values = getattr(getattr(ty, "shape", None), "values", None)
    if values is None or not all(isinstance(d, tvm.tirx.IntImm) for d in values):
        raise UnsupportedOpError(f"{what}: only static tensor shapes are supported, got {ty}")
    return tuple(int(d) for d in values)


def _numpy(t: torch.Tensor) -> np.ndarray:
    return t.detach().cpu().float().numpy()


def _flatten(v: Value) -> list:
    return [x for item in v for x in _flatten(item)] if isinstance(v, tuple) else [v]


def _related(relax_name: str, torch_name: str) -> bool:
    """Whether a Relax op name and a torch op name look like the same op (cumsum/cumsum, argsort/sort)."""
    return bool(torch_name) and (relax_name in torch_name or torch_name in relax_name)


def _where(node: torch.fx.Node) -> str:
    """Best-effort model location of an exported fx node: module path and the innermost source line."""
    parts = [f"torch op {node.target}"]
    stack = node.meta.get("nn_module_stack")
    if stack:
        path, cls = list(stack.values())[-1]
        parts.append(f"in module {path or '<root>'!r} ({getattr(cls, '__name__', cls)})")
    trace = (node.meta.get("stack_trace") or "").strip().splitlines()
    if len(trace) >= 2:
        parts.append(f"at {trace[-2].strip()}: {trace[-1].strip()}")
    return " ".join(parts)


def _tvm_unsupported(err: AssertionError, program: torch.export.ExportedProgram) -> Exception:
    """The TVM importer's 'Unsupported function types [...]' assertion as an UnsupportedOpError."""
    msg = str(err)
    prefix = "Unsupported function types "
    if not msg.startswith(prefix):
        return err
    names = ast.literal_eval(msg[len(prefix):])
    nodes = [n for n in program.graph.nodes if n.op == "call_function" and n.target.__name__ in names]
    where = "; ".join(_where(n) for n in nodes) or "source location unknown"
    return UnsupportedOpError(f"torch ops {sorted(names)} are not supported by the TVM Relax importer "
                              f"({where}); {REMEDY}")
