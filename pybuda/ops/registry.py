"""The op registry: one entry per op type, the only place that knows what an op means.

An OpDef gives shape inference, a numpy golden evaluation, and optionally a decomposition (into simpler
ops, run by the decompose pass), a lowering (to Buda ops and edge TMs, run by the lower pass) and a
padding rule (how the op treats the zero padding of tile-aligned tensors). `buda=True` marks op types
that exist in the Buda IR and in netlists; their eval works on 4-D tile-padded arrays.
"""
from __future__ import annotations

import dataclasses
import difflib
from typing import Any, Callable

import numpy as np

from ..errors import InternalError, UserInputError
from ..ir import Graph, GraphError, as_operand


class OpError(UserInputError):
    """An op used with bad operands or attributes; the message names the op."""


@dataclasses.dataclass(frozen=True)
class OpDef:
    name: str
    shape: Callable[[list, dict], tuple]
    eval: Callable[[list, dict], np.ndarray]
    arity: tuple = (1, 1)                      # (min, max) operand count
    decompose: Callable | None = None          # fn(ctx: DecomposeContext) -> None
    lower: Callable | None = None              # fn(ctx: LowerContext) -> Operand
    buda: bool = False                         # a Buda IR / netlist op type
    kind: str = "other"                        # unary | binary | matmul | reduce | tm | nn | other
    zero_preserving: bool = False              # unary: f(0) == 0, so zero padding stays zero
    tm: bool = False                           # pure data movement (reshape, transpose, slices...)
    # fn(ctx: BackwardContext, index, grad) -> the gradient of operand `index` (a node name) given the gradient
    # `grad` of the op's output; a result of the output's (broadcast) shape is reduced to the operand's shape
    backward: Callable | None = None
    # fn(attrs, operand shape, output shape) -> the (op_type, attrs) TMs that take the output back to the operand
    # (its values where the op keeps them): a TM's backward rule, and the layout map of a trained parameter view
    inverse: Callable | None = None


_REGISTRY: dict[str, OpDef] = {}


def register(opdef: OpDef) -> OpDef:
    if opdef.name in _REGISTRY:
        raise InternalError(f"op {opdef.name!r} registered twice")
    _REGISTRY[opdef.name] = opdef
    return opdef


def get(op_type: str) -> OpDef:
    """The OpDef of `op_type`; OpError naming close matches if unknown."""
    try:
        return _REGISTRY[op_type]
    except KeyError:
        close = difflib.get_close_matches(op_type, _REGISTRY, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise OpError(f"unknown op type {op_type!r}{hint}") from None


def names() -> list[str]:
    return sorted(_REGISTRY)


def infer_shape(op_type: str, shapes: list, attrs: dict, name: str = "?") -> tuple:
    """Output shape of an op, with errors that name the op."""
    opdef = get(op_type)
    lo, hi = opdef.arity
    if not lo <= len(shapes) <= hi:
        raise OpError(f"op {name!r} ({op_type}): takes {lo}..{hi} operands, got {len(shapes)}")
    try:
        return tuple(int(d) for d in opdef.shape([tuple(s) for s in shapes], attrs))
    except OpError as e:
        raise OpError(f"op {name!r} ({op_type}): {e}") from None


def evaluate(op_type: str, values: list, attrs: dict) -> np.ndarray:
    return np.asarray(get(op_type).eval(values, attrs), dtype=np.float32)


def add_op(graph: Graph, name: str, op_type: str, operands: list, attrs: dict | None = None,
           **node_fields: Any) -> str:
    """Add op `name` to `graph` with the output shape the registry infers; operands are names or Operands."""
    operands = [as_operand(o) for o in operands]
    attrs = dict(attrs or {})
    try:
        shapes = [graph.operand_shape(o) for o in operands]
    except GraphError as e:
        raise GraphError(f"op {name!r}: {e}") from None
    shape = infer_shape(op_type, shapes, attrs, name)
    return graph.add_op(name, op_type, operands, attrs, shape=shape, **node_fields)
