"""Elementwise unary and binary ops (PyBuda and Buda level)."""
from __future__ import annotations

import numpy as np

from .common import broadcast_shapes, gelu
from .registry import OpDef, OpError, register


def _same_shape(shapes, attrs):
    return shapes[0]


def _bcast(shapes, attrs):
    return broadcast_shapes(*shapes)


def _relu_eval(x, attrs):
    """Packer relu as the backend's reference model: mode "min" zeroes values <= threshold, mode "max"
    clamps to [0, threshold]."""
    if not attrs.get("relu_en"):
        return x
    thr = float(attrs.get("relu_threshold", 0.0))
    if attrs.get("relu_mode", "min") == "max":
        return np.clip(x, 0.0, thr)
    return np.where(x > thr, x, 0.0)


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


_UNARY = {
    # name: (numpy fn, buda type, zero-preserving)
    "exp": (np.exp, "exp", False),
    "log": (np.log, "log", False),
    "sqrt": (np.sqrt, "sqrt", True),
    "reciprocal": (lambda x: 1.0 / x, "reciprocal", False),
    "sigmoid": (lambda x: 1.0 / (1.0 + np.exp(-x)), "sigmoid", False),
    "tanh": (np.tanh, "tanh", True),
    "abs": (np.abs, "abs", True),
    "square": (np.square, "square", True),
    "sine": (np.sin, "sine", True),
    "cosine": (np.cos, "cosine", False),
}

for _name, (_fn, _buda, _zp) in _UNARY.items():
    register(OpDef(_name, _same_shape, (lambda fn: lambda v, a: fn(v[0]))(_fn), buda=True, kind="unary",
                   zero_preserving=_zp, lower=_lower_unary(_buda, _zp)))

register(OpDef("gelu", _same_shape, lambda v, a: gelu(v[0], a.get("approximate", "none")), buda=True,
               kind="unary", zero_preserving=True,
               lower=_lower_unary("gelu", True, lambda a: {"approximate_mode": a.get("approximate", "none") == "tanh"})))

def _lower_power(ctx):
    (x,) = ctx.operands
    e = float(ctx.node.attrs["exponent"])
    if e != int(e) or e < 0:
        raise OpError(f"op {ctx.node.name!r}: power with exponent {e} has no device lowering (integer >= 0 only)")
    pz = x.pad_zero if e > 0 else (False, False)
    return ctx.op("power", [x], {"exp": int(e)}, pad_zero=pz, replicated=x.replicated)


register(OpDef("power", _same_shape, lambda v, a: np.power(v[0], float(a.get("exponent", a.get("exp")))), buda=True,
               kind="unary",
               lower=_lower_power))

# Buda datacopy with optional packer relu (netlist attributes relu_en/relu_threshold/relu_mode).
register(OpDef("nop", _same_shape, lambda v, a: _relu_eval(v[0], a), buda=True, kind="unary",
               zero_preserving=True, lower=_lower_unary("nop", True)))


def _relu_attrs(a):
    return {"relu_en": True, "relu_threshold": float(a.get("threshold", 0.0)), "relu_mode": a.get("mode", "min")}


register(OpDef("relu", _same_shape,
               lambda v, a: _relu_eval(v[0], {"relu_en": True, **{k: a[k2] for k, k2 in
                                              (("relu_threshold", "threshold"), ("relu_mode", "mode")) if k2 in a}}),
               kind="unary", zero_preserving=True, lower=_lower_unary("nop", True, _relu_attrs)))


def _decompose_identity(ctx):
    ctx.replace(ctx.operands[0])


# Inference dropout is the identity; training dropout is not supported yet (autograd is a later issue).
def _decompose_dropout(ctx):
    if ctx.config is not None and ctx.config.enable_training:
        raise OpError(f"op {ctx.node.name!r}: training dropout is not supported yet")
    ctx.replace(ctx.operands[0])


register(OpDef("dropout", _same_shape, lambda v, a: v[0], kind="unary", decompose=_decompose_dropout))
register(OpDef("identity", _same_shape, lambda v, a: v[0], kind="unary", decompose=_decompose_identity))


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


_BINARY = {
    "add": (np.add, lambda p, q: p and q),
    "subtract": (np.subtract, lambda p, q: p and q),
    "multiply": (np.multiply, lambda p, q: p or q),
    "maximum": (np.maximum, lambda p, q: p and q),
}
for _name, (_fn, _rule) in _BINARY.items():
    register(OpDef(_name, _bcast, (lambda fn: lambda v, a: fn(v[0], v[1]))(_fn), arity=(2, 2), buda=True,
                   kind="binary", lower=_lower_binary(_name, _rule)))


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
