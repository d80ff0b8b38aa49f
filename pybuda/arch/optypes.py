"""The one list of backend op types (netlist-format.md §1.6) and what the hardware model needs to know of each.

Every other list of op types (the netlist schema, the validator's shape rules, the cycle model, the simulator's
kernels) is derived from `OP_TYPES` here.
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class OpType:
    """One backend op type.

    family: binary | datacopy | sfpu | ethernet | matmul | depthwise | reduce | splice | fused | embedding |
    tilizer | topk | buffer | drainer. eltwise_shaped: every input has the op's output shape (after TMs).
    tensix: runs on a Tensix core (ethernet ops run on ethernet cores and take no grid cells)."""

    name: str
    family: str
    eltwise_shaped: bool = False
    tensix: bool = True


_FAMILIES: dict[str, tuple[tuple[str, ...], bool]] = {   # family -> (op types, eltwise shaped)
    "binary": (("add", "subtract", "multiply", "maximum", "quantization", "dequantization", "requantization"), True),
    "datacopy": (("nop", "datacopy"), True),
    "sfpu": (("exp", "log", "sqrt", "gelu", "gelu_derivative", "reciprocal", "sigmoid", "dropout", "tanh", "square",
              "power", "sine", "cosine", "lrelu", "abs"), True),
    "ethernet": (("ethernet_datacopy",), True),
    "tilizer": (("tilizer",), True),
    "buffer": (("buffer",), True),
    "matmul": (("matmul",), False),
    "depthwise": (("depthwise",), False),
    "reduce": (("reduce",), False),
    "splice": (("splice",), False),
    "fused": (("fused_op",), False),
    "embedding": (("embedding",), False),
    "topk": (("topk",), False),
    "drainer": (("drainer",), False),
}

OP_TYPES: dict[str, OpType] = {
    name: OpType(name, family, eltwise_shaped=shaped, tensix=family != "ethernet")
    for family, (names, shaped) in _FAMILIES.items() for name in names}


def family_of(op_type: str) -> str | None:
    """The family of a backend op type, None if the backend has no such op."""
    spec = OP_TYPES.get(op_type)
    return spec.family if spec is not None else None


def _of(*families: str) -> frozenset[str]:
    return frozenset(n for n, s in OP_TYPES.items() if s.family in families)


BINARY_OPS = _of("binary")
DATACOPY_OPS = _of("datacopy")
SFPU_OPS = _of("sfpu")
NON_TENSIX_OPS = frozenset(n for n, s in OP_TYPES.items() if not s.tensix)
UNARY_OPS = DATACOPY_OPS | SFPU_OPS | NON_TENSIX_OPS
ELTWISE_SHAPED_OPS = frozenset(n for n, s in OP_TYPES.items() if s.eltwise_shaped)
# ops whose kernel reads every input in the op's own tile order (a fused op: where only such sub-ops read it):
# what a kernel broadcast's period is counted in (`pybuda.arch.tilemap.broadcast_period`)
OWN_ORDER_OPS = BINARY_OPS | DATACOPY_OPS | SFPU_OPS
QUANTIZATION_OPS = frozenset({"quantization", "dequantization", "requantization"})
