"""Elementwise ops of `pybuda.op` with the legacy signatures (tenstorrent/tt-buda `op/eltwise_unary.py`,
`op/eltwise_binary.py`): a name first ("" for an automatic one), then `operandA` (and `operandB`), then attributes.
Operands are traced Tensors, Parameters or Python numbers."""
from __future__ import annotations

import math

from ..errors import UserInputError
from ..module import Tensor, traced_op as _op


def _unary(op_type: str, doc: str):
    def op(name: str, operandA) -> Tensor:
        return _op(op_type, name, [operandA])
    op.__doc__ = doc
    return op


def part(name: str, suffix: str) -> str:
    """The name of one op of a composite op named `name` ("" stays automatic)."""
    return f"{name}.{suffix}" if name else ""


def _binary(op_type: str, doc: str):
    def op(name: str, operandA, operandB) -> Tensor:
        return _op(op_type, name, [operandA, operandB])
    op.__doc__ = doc
    return op


Abs = _unary("abs", "|A|.")
Exp = _unary("exp", "e to the power of A.")
Log = _unary("log", "The natural logarithm of A.")
Reciprocal = _unary("reciprocal", "1 / A.")
Sqrt = _unary("sqrt", "The square root of A.")
Sigmoid = _unary("sigmoid", "1 / (1 + e^-A).")
Sine = _unary("sine", "sin(A).")
Cosine = _unary("cosine", "cos(A).")
Tanh = _unary("tanh", "tanh(A).")
LogicalNot = _unary("logical_not", "1 where A is 0, else 0.")

Add = _binary("add", "A + B (broadcasting).")
Subtract = _binary("subtract", "A - B.")
Multiply = _binary("multiply", "A * B.")
Divide = _binary("divide", "A / B.")
Max = _binary("maximum", "The larger of A and B.")
Min = _binary("minimum", "The smaller of A and B.")
Power = _binary("pow", "A to the power of B (a tensor exponent; `Pow` takes a number).")
Equal = _binary("equal", "1 where A == B, else 0.")
NotEqual = _binary("not_equal", "1 where A != B, else 0.")
Greater = _binary("greater", "1 where A > B, else 0.")
GreaterEqual = _binary("greater_equal", "1 where A >= B, else 0.")
Less = _binary("less", "1 where A < B, else 0.")
LessEqual = _binary("less_equal", "1 where A <= B, else 0.")
LogicalAnd = _binary("logical_and", "1 where A and B are both nonzero, else 0.")


def Heaviside(name: str, operandA, operandB) -> Tensor:
    """torch.heaviside(A, B): 0 where A < 0, B where A == 0, 1 where A > 0."""
    step = _op("heaviside", part(name, "step"), [operandA])
    at_zero = _op("multiply", part(name, "at_zero"), [_op("equal", "", [operandA, 0.0]), operandB])
    return _op("add", name, [step, at_zero])


def Pow(name: str, operandA, exponent: float) -> Tensor:
    """A to the power of a number."""
    return _op("power", name, [operandA], {"exponent": float(exponent)})


def Identity(name: str, operandA, unsqueeze: str | None = None, unsqueeze_dim: int | None = None) -> Tensor:
    """A unchanged; with `unsqueeze` ("unsqueeze") and `unsqueeze_dim`, with a unit dimension inserted there."""
    if unsqueeze is None and unsqueeze_dim is None:
        return _op("identity", name, [operandA])
    if unsqueeze != "unsqueeze" or unsqueeze_dim is None:
        raise UserInputError(f"Identity {name!r}: unsqueeze={unsqueeze!r}, unsqueeze_dim={unsqueeze_dim!r}; legal: "
                             "neither, or unsqueeze='unsqueeze' with an integer unsqueeze_dim")
    from .tm import Unsqueeze
    return Unsqueeze(name, operandA, unsqueeze_dim)


def Tilize(name: str, operandA) -> Tensor:
    """The values as they are (legacy: the device tilizes a row-major input; here the host tilizes inputs)."""
    return _op("identity", name, [operandA])


def Buffer(name: str, operandA) -> Tensor:
    """A copy of A that the compiler keeps as an op of its own: a Buda `nop` that is never fused (legacy
    `buffer`)."""
    return _op("buffer", name, [operandA])


def DRAMQueue(name: str, operandA, *, num_entries: int) -> Tensor:
    """A of the ops that read it through a DRAM queue: a Buda nop named `name`, never fused, that its readers read
    from a queue in DRAM (`insert_queues`). The balancer sizes the queue for the microbatch (legacy
    `num_entries` then has nothing to set; it must be at least 1)."""
    if not isinstance(num_entries, int) or num_entries < 1:
        raise UserInputError(f"DRAMQueue {name!r}: num_entries={num_entries!r}; legal: an int >= 1")
    return _op("dram_queue", name, [operandA])


def Relu(name: str, operandA, threshold: float = 0.0, mode: str = "min") -> Tensor:
    """max(A, threshold) (mode "min": values below the threshold become 0) or min(A, threshold) (mode "max")."""
    return _op("relu", name, [operandA], {"threshold": threshold, "mode": mode})


def LeakyRelu(name: str, operandA, alpha: float) -> Tensor:
    """A where A > 0, else alpha * A."""
    return _op("leaky_relu", name, [operandA], {"alpha": float(alpha)})


def Gelu(name: str, operandA, approximate: str = "none") -> Tensor:
    """GELU, exact ("none") or its tanh approximation ("tanh")."""
    return _op("gelu", name, [operandA], {"approximate": approximate})


def Clip(name: str, operandA, min: float, max: float) -> Tensor:    # noqa: A002 (the legacy keyword names)
    """A clamped to [min, max]."""
    return _op("clip", name, [operandA], {"min": float(min), "max": float(max)})


def Argmax(name: str, operandA, dim: int | None = None) -> Tensor:
    """The index of the first largest value along `dim`, the dimension kept (size 1); without `dim`, over each
    sample's whole tensor (legacy: over the whole tensor; here the leading microbatch dimension stays apart)."""
    if dim is not None:
        return _op("argmax", name, [operandA], {"dim": int(dim), "keep_dim": True})
    shape = operandA.shape
    flat = _op("reshape", part(name, "flat"), [operandA], {"shape": [shape[0], math.prod(shape[1:])]})
    index = _op("argmax", part(name, "index"), [flat], {"dim": -1, "keep_dim": True})
    return _op("reshape", name, [index], {"shape": [shape[0], *(1,) * (len(shape) - 1)]})


def CumSum(name: str, operandA, axis: int, exclusive: bool = False) -> Tensor:
    """The running sum along `axis` (inclusive; the legacy compiler did not support exclusive either)."""
    if exclusive:
        raise UserInputError(f"CumSum {name!r}: exclusive=True is not supported (nor was it in legacy PyBuda); "
                             "subtract the input from the inclusive sum instead")
    return _op("cumsum", name, [operandA], {"axis": int(axis)})


def Dropout(name: str, operandA, p: float = 0.5, training: bool = True, seed: int = 0) -> Tensor:
    """Dropout with probability `p`: the identity in inference (training dropout is refused by the compiler)."""
    return _op("dropout", name, [operandA], {"p": p})
