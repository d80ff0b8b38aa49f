"""The op registry: one entry per op type, the only place that knows what an op means.

An OpDef gives shape inference, a numpy golden evaluation, and optionally a decomposition (into simpler
ops, run by the decompose pass), a lowering (to Buda ops and edge TMs, run by the lower pass) and a
padding rule (how the op treats the zero padding of tile-aligned tensors). `buda=True` marks op types
that exist in the Buda IR and in netlists; their eval works on 4-D tile-padded arrays.

What the passes and the balancer ask of an op type beyond its `kind` is a group it belongs to (`OpDef.groups`,
from the vocabulary `GROUPS`); they query the registry (`in_group`, `belongs`) instead of listing op types.
"""
from __future__ import annotations

import dataclasses
import difflib
from typing import Any, Callable

import numpy as np

from ..errors import InternalError, UserInputError
from ..ir import Graph, GraphError, ShapeOnly, as_operand


class OpError(UserInputError):
    """An op used with bad operands or attributes; the message names the op."""


# The groups an op type may belong to, and what membership means (who asks).
GROUPS: dict[str, str] = {
    "fusable": "a Buda op a fused op can run as a sub-op (passes/fuse.py: a reduce only along c, a matmul only by a "
               "constant one tile column wide)",
    "streamable": "a Buda op that may t-stream (balancer/streaming.py: a fused op only without matmul or reduce "
                  "sub-ops, a reduce not along its reduced dimension)",
    "inner_dim": "a Buda op that accumulates over an inner dimension K (m_k, u_kt): its result is whole only after "
                 "the last K step (fused-op schedules, u_kt overrides, t-streaming of fused ops)",
    "rearranging": "a one-operand TM each of whose output values is one of its input values, none written or repeated: "
                   "it commutes with elementwise ops (passes/optimize.py hoists them above it)",
    "host_input_tm": "a TM on a model input that the host applies before pushing the input (passes/host_io.py)",
    "host_output_tm": "a TM on a model output that the host applies after popping the output (passes/host_io.py)",
    "amp_float16": "a framework op whose Buda ops the legacy AMP levels keep in a Float16 format "
                   "(passes/data_formats.py)",
    "kept_apart": "a framework op whose Buda op is never fused into another (passes/fuse.py: legacy Buffer)",
    "host_only": "a framework op without an exact device form (a rounding: quantize, requantize): it runs on the host "
                 "wherever it sits, as if `cpu_fallback_ops` listed it (passes/cpu_fallback.py)",
    "sign_keeping": "its output is nonnegative (positive) where its first operand is (passes/simplify.py)",
    "nonnegative": "its output is never negative (passes/simplify.py)",
    "bounded": "its output is finite whatever it reads (passes/simplify.py)",
}


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
    groups: frozenset[str] = frozenset()       # the GROUPS it belongs to
    # fn(ctx: BackwardContext, index, grad) -> the gradient of operand `index` (a node name) given the gradient
    # `grad` of the op's output; a result of the output's (broadcast) shape is reduced to the operand's shape
    backward: Callable | None = None
    # fn(attrs, operand shape, output shape) -> the (op_type, attrs) TMs that take the output back to the operand
    # (its values where the op keeps them): a TM's backward rule, and the layout map of a trained parameter view
    inverse: Callable | None = None

    def __post_init__(self):
        """`groups` as a frozenset of declared groups (InternalError naming the op otherwise)."""
        object.__setattr__(self, "groups", frozenset(self.groups))
        unknown = sorted(self.groups - GROUPS.keys())
        if unknown:
            raise InternalError(f"op {self.name!r}: unknown group {', '.join(unknown)}; groups: {', '.join(GROUPS)}")


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


def _declared(group: str) -> str:
    """`group`, if `GROUPS` declares it (InternalError otherwise: a misspelt group would match nothing)."""
    if group not in GROUPS:
        raise InternalError(f"unknown op group {group!r}; groups: {', '.join(GROUPS)}")
    return group


def in_group(group: str) -> frozenset[str]:
    """The op types that belong to `group` (one of `GROUPS`)."""
    _declared(group)
    return frozenset(name for name, opdef in _REGISTRY.items() if group in opdef.groups)


def belongs(op_type: str, group: str) -> bool:
    """Whether op type `op_type` (a registered one) belongs to `group` (one of `GROUPS`)."""
    return _declared(group) in get(op_type).groups


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


def evaluate(op_type: str, values: list, attrs: dict) -> np.ndarray | ShapeOnly:
    """The op's value on `values`; `ShapeOnly` of its shape where an operand's numbers are unknown."""
    if any(isinstance(v, ShapeOnly) for v in values):
        return ShapeOnly(infer_shape(op_type, [np.shape(v) if isinstance(v, np.ndarray) else v.shape for v in values],
                                     attrs, op_type))
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
