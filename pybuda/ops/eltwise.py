"""Elementwise unary and binary ops (PyBuda and Buda level)."""
from __future__ import annotations

import numpy as np

from ..arch.numerics import gelu_derivative, packer_relu
from .common import broadcast_shapes, gelu
from .registry import OpDef, OpError, register


def _same_shape(shapes, attrs):
    return shapes[0]


def _bcast(shapes, attrs):
    return broadcast_shapes(*shapes)


def _relu_eval(x, attrs):
    """A nop's packer relu (netlist attributes relu_en, relu_threshold, relu_mode), by the backend's reference."""
    if not attrs.get("relu_en"):
        return x
    return packer_relu(x, float(attrs.get("relu_threshold", 0.0)), attrs.get("relu_mode", "min"))


# f(0) is not finite: zero padding must not reach these ops (inf * 0 = NaN in a later matmul)
_UNSAFE_AT_ZERO = {"reciprocal", "log"}


def _lower_unary(buda_type: str, zero_preserving: bool, extra_attrs=None):
    def lower(ctx):
        (x,) = ctx.operands
        if buda_type in _UNSAFE_AT_ZERO:
            x = ctx.nonzero_padding(x)
        attrs = dict(extra_attrs(ctx.node.attrs) if extra_attrs else {})
        return ctx.op(buda_type, [x], attrs, pad_zero=x.pad_zero if zero_preserving else (False, False),
                      replicated=x.replicated)
    return lower


# the groups of an elementwise Buda op: it fuses and t-streams
_DEVICE_ELTWISE = frozenset({"fusable", "streamable"})

_UNARY = {
    # name: (numpy fn, buda type, zero-preserving, groups besides _DEVICE_ELTWISE)
    "exp": (np.exp, "exp", False, ()),
    "log": (np.log, "log", False, ()),
    "sqrt": (np.sqrt, "sqrt", True, ("sign_keeping",)),
    "reciprocal": (lambda x: 1.0 / x, "reciprocal", False, ()),
    "sigmoid": (lambda x: 1.0 / (1.0 + np.exp(-x)), "sigmoid", False, ("bounded",)),
    "tanh": (np.tanh, "tanh", True, ("bounded",)),
    "abs": (np.abs, "abs", True, ("nonnegative",)),
    "square": (np.square, "square", True, ("nonnegative",)),
    "sine": (np.sin, "sine", True, ()),
    "cosine": (np.cos, "cosine", False, ()),
}

# Backward rules (ctx: pybuda.passes.autograd.BackwardContext): d(out)/d(x) times the output's gradient g.
def _times(ctx, grad, *factors):
    out = grad
    for f in factors:
        out = ctx.op("multiply", [out, f])
    return out


_UNARY_BACKWARD = {
    "exp": lambda ctx, i, g: _times(ctx, g, ctx.output),
    "log": lambda ctx, i, g: _times(ctx, g, ctx.op("reciprocal", [ctx.operand(0)])),
    "sqrt": lambda ctx, i, g: _times(ctx, g, ctx.op("reciprocal", [ctx.output]), ctx.scalar(0.5)),
    "reciprocal": lambda ctx, i, g: _times(ctx, g, ctx.op("square", [ctx.output]), ctx.scalar(-1.0)),
    "sigmoid": lambda ctx, i, g: _times(ctx, g, ctx.output, ctx.op("subtract", [ctx.scalar(1.0), ctx.output])),
    "tanh": lambda ctx, i, g: _times(ctx, g, ctx.op("subtract", [ctx.scalar(1.0), ctx.op("square", [ctx.output])])),
    "abs": lambda ctx, i, g: _times(ctx, g, ctx.op("subtract", [_times(ctx, ctx.op("heaviside", [ctx.operand(0)]),
                                                                    ctx.scalar(2.0)), ctx.scalar(1.0)])),
    "square": lambda ctx, i, g: _times(ctx, g, ctx.operand(0), ctx.scalar(2.0)),
    "sine": lambda ctx, i, g: _times(ctx, g, ctx.op("cosine", [ctx.operand(0)])),
    "cosine": lambda ctx, i, g: _times(ctx, g, ctx.op("sine", [ctx.operand(0)]), ctx.scalar(-1.0)),
}

for _name, (_fn, _buda, _zp, _groups) in _UNARY.items():
    register(OpDef(_name, _same_shape, (lambda fn: lambda v, a: fn(v[0]))(_fn), buda=True, kind="unary",
                   zero_preserving=_zp, groups=_DEVICE_ELTWISE | set(_groups), lower=_lower_unary(_buda, _zp),
                   backward=_UNARY_BACKWARD[_name]))


_gelu_mode = lambda a: {"approximate_mode": a.get("approximate", "none") == "tanh"}  # noqa: E731
register(OpDef("gelu_derivative", _same_shape,
               lambda v, a: gelu_derivative(v[0], tanh=a.get("approximate", "none") == "tanh"), buda=True,
               kind="unary", groups=_DEVICE_ELTWISE, lower=_lower_unary("gelu_derivative", False, _gelu_mode)))


def _gelu_backward(ctx, index, grad):
    """The output's gradient times gelu's derivative (of the same form, exact or tanh)."""
    derivative = ctx.op("gelu_derivative", [ctx.operand(0)], {"approximate": ctx.attrs.get("approximate", "none")})
    return _times(ctx, grad, derivative)


register(OpDef("gelu", _same_shape, lambda v, a: gelu(v[0], a.get("approximate", "none")), buda=True,
               kind="unary", zero_preserving=True, groups=_DEVICE_ELTWISE, lower=_lower_unary("gelu", True, _gelu_mode),
               backward=_gelu_backward))

# The device has no compare op: a mask of x > 0 is min(max(x * 2^15, 0), 1), as the legacy compiler lowered
# comparisons; exact wherever |x| >= 2^-15 (a value closer to 0 gets a fraction of its gradient).
HEAVISIDE_SCALE = 2.0 ** 15


def _decompose_heaviside(ctx):
    scaled = ctx.op("multiply", [ctx.operands[0], ctx.constant(np.array(HEAVISIDE_SCALE, dtype=np.float32))])
    ctx.replace(ctx.op("clip", [scaled], {"min": 0.0, "max": 1.0}))


register(OpDef("heaviside", _same_shape, lambda v, a: (v[0] > 0).astype(np.float32), kind="unary",
               decompose=_decompose_heaviside))


# legacy Buffer: a copy the compiler keeps as an op of its own (a Buda nop that fusion leaves alone); legacy
# DRAMQueue: the same, its readers reading it through a DRAM queue (the fuse stage adds those `insert_queues` edges)
for _kept in ("buffer", "dram_queue"):
    register(OpDef(_kept, _same_shape, lambda v, a: v[0], kind="unary", zero_preserving=True, groups={"kept_apart"},
                   lower=_lower_unary("nop", True), backward=lambda ctx, i, g: g))


def _decompose_leaky_relu(ctx):
    """leaky_relu(x) = alpha * x + (1 - alpha) * relu(x): a packer ReLU and two scalings."""
    alpha = float(ctx.node.attrs["alpha"])
    x = ctx.operands[0]
    scaled = ctx.op("multiply", [x, ctx.constant(np.array(alpha, dtype=np.float32))])
    rest = ctx.op("multiply", [ctx.op("relu", [x]), ctx.constant(np.array(1.0 - alpha, dtype=np.float32))])
    ctx.replace(ctx.op("add", [scaled, rest]))


register(OpDef("leaky_relu", _same_shape, lambda v, a: np.where(v[0] > 0, v[0], v[0] * float(a["alpha"])),
               kind="unary", decompose=_decompose_leaky_relu))


def _lower_power(ctx):
    (x,) = ctx.operands
    e = float(ctx.node.attrs["exponent"])
    if e != int(e) or e < 0:
        raise OpError(f"op {ctx.node.name!r}: power with exponent {e} has no device lowering (integer >= 0 only)")
    pz = x.pad_zero if e > 0 else (False, False)
    return ctx.op("power", [x], {"exp": int(e)}, pad_zero=pz, replicated=x.replicated)


def _power_backward(ctx, index, grad):
    e = float(ctx.attrs.get("exponent", ctx.attrs.get("exp")))
    if e == 1.0:
        return grad
    lower = ctx.op("power", [ctx.operand(0)], {"exponent": e - 1.0}) if e != 2.0 else ctx.operand(0)
    return _times(ctx, grad, lower, ctx.scalar(e))


register(OpDef("power", _same_shape, lambda v, a: np.power(v[0], float(a.get("exponent", a.get("exp")))), buda=True,
               kind="unary", groups=_DEVICE_ELTWISE, lower=_lower_power, backward=_power_backward))

# Buda datacopy with optional packer relu (netlist attributes relu_en/relu_threshold/relu_mode).
register(OpDef("nop", _same_shape, lambda v, a: _relu_eval(v[0], a), buda=True, kind="unary",
               zero_preserving=True, groups=_DEVICE_ELTWISE, lower=_lower_unary("nop", True),
               backward=lambda ctx, i, g: g if not ctx.attrs.get("relu_en") else _relu_backward(ctx, g,
                                                                                                 _relu_attrs_of(ctx.attrs))))


def _relu_attrs(a):
    return {"relu_en": True, "relu_threshold": float(a.get("threshold", 0.0)), "relu_mode": a.get("mode", "min")}


def _relu_attrs_of(netlist_attrs):
    return {"threshold": netlist_attrs.get("relu_threshold", 0.0), "mode": netlist_attrs.get("relu_mode", "min")}


def _relu_backward(ctx, grad, attrs=None):
    """Gradient passes where the relu passes its input: x > threshold (mode min) or 0 < x < threshold (max)."""
    attrs = ctx.attrs if attrs is None else attrs
    x, thr = ctx.operand(0), float(attrs.get("threshold", 0.0))
    if attrs.get("mode", "min") == "max":
        below = ctx.op("heaviside", [ctx.op("subtract", [ctx.scalar(thr), x])])
        return _times(ctx, grad, ctx.op("heaviside", [x]), below)
    shifted = x if thr == 0.0 else ctx.op("subtract", [x, ctx.scalar(thr)])
    return _times(ctx, grad, ctx.op("heaviside", [shifted]))


register(OpDef("relu", _same_shape,
               lambda v, a: _relu_eval(v[0], {"relu_en": True, **{k: a[k2] for k, k2 in
                                              (("relu_threshold", "threshold"), ("relu_mode", "mode")) if k2 in a}}),
               kind="unary", zero_preserving=True, groups={"nonnegative"}, lower=_lower_unary("nop", True, _relu_attrs),
               backward=lambda ctx, i, g: _relu_backward(ctx, g)))


def _decompose_identity(ctx):
    ctx.replace(ctx.operands[0])


# Inference dropout is the identity; training dropout is not supported yet (autograd is a later issue).
def _decompose_dropout(ctx):
    if ctx.config is not None and ctx.config.enable_training:
        raise OpError(f"op {ctx.node.name!r}: training dropout is not supported yet")
    ctx.replace(ctx.operands[0])


register(OpDef("dropout", _same_shape, lambda v, a: v[0], kind="unary", decompose=_decompose_dropout))
register(OpDef("identity", _same_shape, lambda v, a: v[0], kind="unary", decompose=_decompose_identity,
               backward=lambda ctx, i, g: g))


# ---- binary ---------------------------------------------------------------------------------------

def _lower_binary(buda_type: str, pad_rule):
    def lower(ctx):
        a, b = (ctx.broadcast_to(x, ctx.node.shape) for x in ctx.operands)
        pz = tuple(pad_rule(pa, pb) for pa, pb in zip(a.pad_zero, b.pad_zero))
        rep = a.replicated & b.replicated
        # a large fill survives adding/subtracting/maximum with a finite value (x - max(x) keeps -1e6 padding)
        filled = a.filled | b.filled if buda_type in ("add", "subtract", "maximum") else frozenset()
        return ctx.op(buda_type, [a, b], {}, pad_zero=pz, replicated=rep, filled=filled)
    return lower


def _maximum_backward(ctx, index, grad):
    """The gradient goes to the larger operand (to the second on a tie)."""
    a, b = ctx.operand(0), ctx.operand(1)
    first = ctx.op("heaviside", [ctx.op("subtract", [a, b])])
    mask = first if index == 0 else ctx.op("subtract", [ctx.scalar(1.0), first])
    return _times(ctx, grad, mask)


_BINARY = {
    "add": (np.add, lambda p, q: p and q, lambda ctx, i, g: g),
    "subtract": (np.subtract, lambda p, q: p and q,
                 lambda ctx, i, g: g if i == 0 else _times(ctx, g, ctx.scalar(-1.0))),
    "multiply": (np.multiply, lambda p, q: p or q, lambda ctx, i, g: _times(ctx, g, ctx.operand(1 - i))),
    "maximum": (np.maximum, lambda p, q: p and q, _maximum_backward),
}
for _name, (_fn, _rule, _bw) in _BINARY.items():
    register(OpDef(_name, _bcast, (lambda fn: lambda v, a: fn(v[0], v[1]))(_fn), arity=(2, 2), buda=True,
                   kind="binary", groups=_DEVICE_ELTWISE, lower=_lower_binary(_name, _rule), backward=_bw))


def _decompose_divide(ctx):
    a, b = ctx.operands
    ctx.replace(ctx.op("multiply", [a, ctx.op("reciprocal", [b])]))


# Elementwise ops without a device lowering: constant-evaluated (alibi slopes, window index math) or run on the host.
_HOST_BINARY = {
    "pow": np.power,                     # tensor exponent (`power` takes a constant one)
    "fmod": np.fmod,                     # sign of the dividend (torch.fmod, Relax mod)
    "floor_mod": np.mod,                 # sign of the divisor (torch.remainder, Relax floor_mod)
    "floor_divide": np.floor_divide,
}
for _name, _fn in _HOST_BINARY.items():
    register(OpDef(_name, _bcast, (lambda fn: lambda v, a: fn(v[0], v[1]))(_fn), arity=(2, 2), kind="binary"))
register(OpDef("floor", _same_shape, lambda v, a: np.floor(v[0]), kind="unary"))

register(OpDef("divide", _bcast, lambda v, a: v[0] / v[1], arity=(2, 2), kind="binary", decompose=_decompose_divide))


def _decompose_minimum(ctx):
    a, b = ctx.operands
    neg = ctx.constant(np.array(-1.0, dtype=np.float32))
    na, nb = ctx.op("multiply", [a, neg]), ctx.op("multiply", [b, neg])
    ctx.replace(ctx.op("multiply", [ctx.op("maximum", [na, nb]), neg]))


register(OpDef("minimum", _bcast, lambda v, a: np.minimum(v[0], v[1]), arity=(2, 2), kind="binary",
               decompose=_decompose_minimum))
