"""Tensor manipulations. On device they become edge TMs (transpose, slices, stacks, broadcasts) or vanish
into the tile padding; a reshape that moves data across tiles is lowered with a picker matmul when it is
a row-major flatten, and is otherwise an error naming the op. Narrows, slices and stacks whose pieces are not
whole tiles move the pieces with constant 0/1 picker matmuls (`place`)."""
from __future__ import annotations

import numpy as np

from ..arch.tms import apply_tm
from .common import ceil_tile, norm_dim
from .conv import from_spatial_rows, to_spatial_rows
from . import registry
from .registry import OpDef, OpError, register


def to4d(shape: tuple) -> tuple:
    """Logical shape as (w, z, r, c); extra leading dims must be 1."""
    shape = tuple(shape)
    if len(shape) > 4:
        if any(d != 1 for d in shape[:-4]):
            raise OpError(f"shape {shape} has more than 4 non-unit dims")
        shape = shape[-4:]
    return (1,) * (4 - len(shape)) + shape


# ---- transpose / permute --------------------------------------------------------------------------

# the groups of a layout view: a reshape, transpose or permute moves values only, the host applies it to a model
# input or output, and it keeps the sign of what it reads
_LAYOUT = frozenset({"rearranging", "host_input_tm", "host_output_tm", "sign_keeping"})

def _transpose_shape(shapes, attrs):
    s = list(shapes[0])
    d0, d1 = norm_dim(int(attrs["dim0"]), len(s)), norm_dim(int(attrs["dim1"]), len(s))
    s[d0], s[d1] = s[d1], s[d0]
    return tuple(s)


def _lower_transpose(ctx):
    (x,) = ctx.operands
    rank = len(x.shape)
    dims = {norm_dim(int(ctx.node.attrs["dim0"]), rank), norm_dim(int(ctx.node.attrs["dim1"]), rank)}
    if dims == {-2, -1}:
        return ctx.tm(x, ("transpose",), ctx.node.shape)
    return _lower_as_reshape(ctx, x)


def inverse_backward(ctx, index, grad):
    """The backward rule of a TM with an `inverse`: the gradient through the inverse TMs."""
    for op_type, attrs in registry.get(ctx.node.op_type).inverse(ctx.attrs, ctx.shape(0), ctx.node.shape):
        grad = ctx.op(op_type, [grad], attrs)
    return grad


register(OpDef("transpose", _transpose_shape, lambda v, a: np.swapaxes(v[0], int(a["dim0"]), int(a["dim1"])),
               kind="tm", groups=_LAYOUT, lower=_lower_transpose, backward=inverse_backward,
               inverse=lambda a, src, out: (("transpose", {"dim0": a["dim0"], "dim1": a["dim1"]}),)))


def _permute_shape(shapes, attrs):
    axes = [int(a) for a in attrs["axes"]]
    if sorted(a % len(shapes[0]) for a in axes) != list(range(len(shapes[0]))):
        raise OpError(f"axes {axes} are not a permutation of rank {len(shapes[0])}")
    return tuple(shapes[0][a] for a in axes)


def _lower_permute(ctx):
    (x,) = ctx.operands
    rank = len(x.shape)
    axes = [a % rank for a in ctx.node.attrs["axes"]]
    if axes == list(range(rank - 2)) + [rank - 1, rank - 2]:
        return ctx.tm(x, ("transpose",), ctx.node.shape)
    return _lower_as_reshape(ctx, x)


register(OpDef("permute", _permute_shape, lambda v, a: np.transpose(v[0], [int(i) for i in a["axes"]]),
               kind="tm", groups=_LAYOUT, lower=_lower_permute, backward=inverse_backward,
               inverse=lambda a, src, out: (("permute", {"axes": [int(i) for i in np.argsort(
                   [int(k) % len(src) for k in a["axes"]])]}),)))


# ---- reshape --------------------------------------------------------------------------------------

def _reshape_shape(shapes, attrs):
    shape = list(attrs["shape"])
    size = int(np.prod(shapes[0]))
    if shape.count(-1) == 1:
        rest = int(np.prod([d for d in shape if d != -1]))
        shape[shape.index(-1)] = size // rest if rest else 0
    if int(np.prod(shape)) != size:
        raise OpError(f"cannot reshape {shapes[0]} ({size} elements) to {list(attrs['shape'])}")
    return tuple(shape)


def _lower_as_reshape(ctx, x):
    """A reshape (or a permute that is one) on device; an error naming the op when it has no lowering."""
    y = _reshape_tms(ctx, x, tuple(ctx.node.shape))
    if y is None:
        raise OpError(
            f"op {ctx.node.name!r} ({ctx.node.op_type}): reshape {x.shape} -> {ctx.node.shape} moves data across "
            "tiles and has no device lowering; it must be cancelled by an inverse TM, folded into a host "
            f"input/output transform, or run on the host: add {ctx.node.op_type!r} to cpu_fallback_ops")
    return y


def _reshape_tms(ctx, x, out: tuple):
    """x reshaped to `out` by tile TMs and picker matmuls, or None. A TM whose 4-D padded layout is unchanged is
    free; a row-major flatten of tile-aligned rows uses a picker; a row that becomes a column (or back) is a
    transpose; row blocks that become z slices (or back) are a vslice (vstack), single rows that become z slices
    (or back) an hslice (hstack), a row that becomes a matrix (or back) both; every row becoming a z slice
    matrix (or back) is a vslice (vstack) and that (e.g. (1, 96, 1024) <-> (1, 96, 32, 32)); every row becoming
    n rows (or back) is that per row between a vslice and a vstack (e.g. (96, 1024) <-> (3072, 32))."""
    if to4d(x.shape) == to4d(out):
        return ctx.relabel(x, out)
    w, z, r, c = to4d(x.shape)
    ow, oz, orr, oc = to4d(out)
    if w != ow:
        return None
    if z == oz and orr == 1 and oc == r * c and c % 32 == 0:
        return _lower_flatten_rows(ctx, x, out)
    if z == oz and (r, c) == (oc, orr) and 1 in (r, c):
        return ctx.tm(x, ("transpose",), out)  # a row becomes a column or back: (1, C) <-> (C, 1)
    if c == oc and z * r == oz * orr and (oz % z == 0 or z % oz == 0):
        return stack_tm(ctx, x, *(("vslice", oz // z) if oz >= z else ("vstack", z // oz)), out)
    if r == orr == 1 and z * c == oz * oc and (oz % z == 0 or z % oz == 0):
        return stack_tm(ctx, x, *(("hslice", oz // z) if oz >= z else ("hstack", z // oz)), out)
    if z == oz and 1 in (r, orr) and r * c == orr * oc:
        n = max(r, orr)
        if r == 1:
            return stack_tm(ctx, stack_tm(ctx, x, "hslice", n, (z * n, 1, oc)), "vstack", n, out)
        return stack_tm(ctx, stack_tm(ctx, x, "vslice", n, (z * n, 1, c)), "hstack", n, out)
    if r > 1 and oz == z * r and orr * oc == c:
        return _reshape_tms(ctx, stack_tm(ctx, x, "vslice", r, (z * r, 1, c)), out)
    if orr > 1 and z == oz * orr and r * c == oc:
        rows = _reshape_tms(ctx, x, (z, 1, oc))
        return None if rows is None else stack_tm(ctx, rows, "vstack", orr, out)
    if z == oz and r > 1 and orr % r == 0 and c == (orr // r) * oc:  # every row becomes n rows
        mats = _reshape_tms(ctx, stack_tm(ctx, x, "vslice", r, (z * r, 1, c)), (z * r, orr // r, oc))
        return None if mats is None else stack_tm(ctx, mats, "vstack", r, out)
    if z == oz and orr > 1 and r % orr == 0 and oc == (r // orr) * c:  # every n rows become one row
        rows = _reshape_tms(ctx, stack_tm(ctx, x, "vslice", orr, (z * orr, r // orr, c)), (z * orr, 1, oc))
        return None if rows is None else stack_tm(ctx, rows, "vstack", orr, out)
    return None


def _lower_flatten_rows(ctx, x, out):
    """(z, P, C) -> (z, 1, P*C) for tile-aligned C: picker matmul spreads row p to tile row p (row 0),
    then vslice(P) + hstack(P) place row p's tiles at column block p."""
    *_, p_rows, c = to4d(x.shape)
    picker = np.zeros((1, 1, 32 * p_rows, ceil_tile(p_rows)), dtype=np.float32)
    picker[0, 0, np.arange(p_rows) * 32, np.arange(p_rows)] = 1.0
    pk = ctx.constant_padded(picker, (32 * p_rows, p_rows), name_hint="flatten_picker")
    z = to4d(x.shape)[1]
    pk = ctx.broadcast_to(pk, (z, 32 * p_rows, p_rows), axes="z")
    spread = ctx.op("matmul", [pk, x], {}, pad_zero=(True, x.pad_zero[1]),
                    logical_shape=(*x.shape[:-2], 32 * p_rows, c))
    y = ctx.tm(spread, ("vslice", p_rows), (*x.shape[:-3], z * p_rows, 32, c) if len(x.shape) >= 3
               else (p_rows, 32, c))
    y = ctx.tm(y, ("hstack", p_rows), (*x.shape[:-3], z, 32, p_rows * c) if len(x.shape) >= 3 else (1, 32, p_rows * c))
    return ctx.relabel(y, out, pad_zero=(False, y.pad_zero[1]))


register(OpDef("reshape", _reshape_shape, lambda v, a: v[0].reshape(_reshape_shape([v[0].shape], a)),
               kind="tm", groups=_LAYOUT, lower=lambda ctx: _lower_as_reshape(ctx, ctx.operands[0]),
               backward=inverse_backward, inverse=lambda a, src, out: (("reshape", {"shape": list(src)}),)))


# ---- slices and stacks (last three dims, tile-level semantics when aligned) -----------------------

def _stack_shape(kind):
    def shape(shapes, attrs):
        s = shapes[0]
        if len(s) < 3:
            s = (1,) * (3 - len(s)) + tuple(s)
        *lead, z, r, c = s
        n = int(attrs["factor"])
        ok, out = {
            "hslice": (c % n == 0, (z * n, r, c // n)), "hstack": (z % n == 0, (z // n, r, c * n)),
            "vslice": (r % n == 0, (z * n, r // n, c)), "vstack": (z % n == 0, (z // n, r * n, c)),
        }[kind]
        if not ok:
            raise OpError(f"{kind} factor {n} does not divide shape {tuple(shapes[0])}")
        return (*lead, *out)
    return shape


def _stack_eval(kind):
    def ev(values, attrs):
        x = values[0]
        x3 = x.reshape((1,) * (3 - x.ndim) + x.shape) if x.ndim < 3 else x
        return apply_tm(x3, (kind, int(attrs["factor"])))
    return ev


def _blocks(n: int, width: int) -> np.ndarray:
    """Where the n*width positions of n blocks of `width` sit when each block starts at a tile boundary."""
    j = np.arange(n * width)
    return (j // width) * ceil_tile(width) + j % width


def stack_tm(ctx, x, kind: str, n: int, out: tuple):
    """x through an hslice/hstack/vslice/vstack of factor n, to logical shape `out`: a tile TM when the pieces
    are whole tiles; otherwise a slice first spreads the pieces to tile boundaries (a picker matmul) and slices
    whole tiles, a stack stacks whole tiles and then gathers the pieces together."""
    *_, z, r, c = to4d(x.shape)
    aligned = {"hslice": (c // n) % 32 == 0, "hstack": c % 32 == 0,
               "vslice": (r // n) % 32 == 0, "vstack": r % 32 == 0}[kind]
    if aligned:
        return ctx.tm(x, (kind, n), out)
    dim = -1 if kind[0] == "h" else -2
    if kind.endswith("slice"):
        width = x.shape[dim] // n
        spread = place(ctx, x, dim, np.arange(n * width), _blocks(n, width), n * ceil_tile(width), aux=f"{kind}_spread")
        return ctx.tm(spread, (kind, n), out)
    width = x.shape[dim]
    wide = list(out)
    wide[dim] = n * ceil_tile(width)
    stacked = ctx.tm(ctx.mask_padding(x, rows=dim == -2, cols=dim == -1), (kind, n), tuple(wide))
    return place(ctx, stacked, dim, _blocks(n, width), np.arange(n * width), n * width)


def _stack_lower(kind):
    return lambda ctx: stack_tm(ctx, ctx.operands[0], kind, int(ctx.node.attrs["factor"]), ctx.node.shape)


_INVERSE = {"hslice": "hstack", "hstack": "hslice", "vslice": "vstack", "vstack": "vslice"}


def _stack_backward(kind):
    def backward(ctx, index, grad):
        out = ctx.op(_INVERSE[kind], [grad], {"factor": int(ctx.attrs["factor"])})
        if len(ctx.shape(0)) < 3:  # the stack view added leading dims: drop them again
            out = ctx.op("reshape", [out], {"shape": list(ctx.shape(0))})
        return out
    return backward


for _k in ("hslice", "hstack", "vslice", "vstack"):
    register(OpDef(_k, _stack_shape(_k), _stack_eval(_k), kind="tm", groups={"rearranging"}, lower=_stack_lower(_k),
                   backward=_stack_backward(_k)))


# ---- pad / narrow / fill_padding / broadcast ------------------------------------------------------

def _pad_shape(shapes, attrs):
    target = tuple(int(d) for d in attrs["shape"])
    if len(target) != len(shapes[0]) or any(t < s for t, s in zip(target, shapes[0])):
        raise OpError(f"pad target {target} must have the rank of {shapes[0]} and not shrink it")
    return target


def _pad_eval(values, attrs):
    x = values[0]
    return np.pad(x, [(0, t - s) for t, s in zip(attrs["shape"], x.shape)])


def _lower_pad(ctx):
    (x,) = ctx.operands
    out = ctx.node.shape
    grows = [i for i in range(-len(out), 0) if out[i] != x.shape[i]]
    if any(i < -2 for i in grows) or any(ceil_tile(out[i]) != ceil_tile(x.shape[i]) for i in grows):
        raise OpError(f"op {ctx.node.name!r}: pad {x.shape} -> {out} beyond the tile padding is not supported "
                      "on device yet")
    if (-2 in grows and not x.pad_zero[0]) or (-1 in grows and not x.pad_zero[1]):
        x = ctx.mask_padding(x, rows=-2 in grows, cols=-1 in grows)
    return ctx.relabel(x, out)


def _pad_inverse(attrs, src: tuple, out: tuple) -> tuple:
    """The kept part: a narrow back along every padded dim."""
    return tuple(("narrow", {"dim": d, "start": 0, "length": n}) for d, (n, m) in enumerate(zip(src, out)) if n != m)


register(OpDef("pad", _pad_shape, _pad_eval, kind="tm", groups={"host_input_tm"}, lower=_lower_pad,
               backward=inverse_backward,
               inverse=_pad_inverse))


def _narrow_shape(shapes, attrs):
    s = list(shapes[0])
    d = norm_dim(int(attrs["dim"]), len(s))
    start, length = int(attrs["start"]), int(attrs["length"])
    if start < 0 or length < 1 or start + length > s[d]:
        raise OpError(f"narrow start={start} length={length} out of range for dim {d} of {tuple(s)}")
    s[d] = length
    return tuple(s)


def _narrow_eval(values, attrs):
    x = values[0]
    d = norm_dim(int(attrs["dim"]), x.ndim)
    idx = [slice(None)] * x.ndim
    idx[d] = slice(int(attrs["start"]), int(attrs["start"]) + int(attrs["length"]))
    return x[tuple(idx)]


def _lower_narrow(ctx):
    (x,) = ctx.operands
    d = norm_dim(int(ctx.node.attrs["dim"]), len(x.shape))
    length, start = int(ctx.node.attrs["length"]), int(ctx.node.attrs["start"])
    if d in (-1, -2) and start == 0 and ceil_tile(length) == ceil_tile(x.shape[d]):
        pz = list(x.pad_zero)
        pz[d + 2] = False  # the cut-off values now sit in the padding
        return ctx.relabel(x, ctx.node.shape, pad_zero=tuple(pz))
    if length == x.shape[d]:
        return ctx.relabel(x, ctx.node.shape)
    if d in (-1, -2):
        return pick(ctx, x, d, np.arange(start, start + length))
    raise OpError(f"op {ctx.node.name!r}: narrow of dim {d} start={start} length={length} of {x.shape} "
                  "needs data movement across z and has no device lowering yet (narrow of the last two dims has)")


def _decompose_narrow(ctx):
    """A channel slice of a (..., C, H, W) tensor (dim -3, H x W > 1) in the CNN layout: the (H*W, C) matrix's
    columns `start`..`start+length`, back to (..., length, H, W); between convolutions the layout changes cancel
    (`optimize`), so the device slices columns (`_lower_narrow`). Other dims stay."""
    shape = ctx.node_input_shape(0)
    if len(shape) < 3 or norm_dim(int(ctx.node.attrs["dim"]), len(shape)) != -3:
        return
    *lead, c, h, w = shape
    length = int(ctx.node.attrs["length"])
    if h * w == 1 or length == c:
        return
    matrix, lead = to_spatial_rows(ctx, ctx.operands[0], c, h, w)
    cols = ctx.op("narrow", [matrix], {"dim": -1, "start": int(ctx.node.attrs["start"]), "length": length})
    ctx.replace(from_spatial_rows(ctx, cols, lead, length, h, w, h * w))


def pick(ctx, x, dim: int, index: np.ndarray, aux: str | None = None):
    """Positions `index` of x along dim -1 or -2, by a constant 0/1 picker matmul (see `place`)."""
    return place(ctx, x, dim, np.asarray(index), np.arange(len(index)), len(index), aux)


def place(ctx, x, dim: int, src: np.ndarray, dst: np.ndarray, size: int, aux: str | None = None):
    """x with position src[i] moved to dst[i] along dim -1 (x @ P) or -2 (P @ x) of a result `size` long, the
    other positions zero; P is a constant 0/1 matrix, zero across x's padding, so x's padding never reaches the
    result and the result's padding is zero."""
    n = x.shape[dim]
    out = list(x.shape)
    out[dim] = size
    if dim == -2:
        picker = np.zeros((ceil_tile(size), ceil_tile(n)), dtype=np.float32)
        picker[dst, src] = 1.0
        pk = ctx.constant_padded(picker[None, None], (size, n), f"{aux or 'pick'}_picker")
        pk = ctx.broadcast_to(pk, (*x.shape[:-2], size, n), axes="z")
        return ctx.op("matmul", [pk, x], {}, pad_zero=(True, x.pad_zero[1]), logical_shape=tuple(out), aux=aux)
    picker = np.zeros((ceil_tile(n), ceil_tile(size)), dtype=np.float32)
    picker[src, dst] = 1.0
    pk = ctx.constant_padded(picker[None, None], (n, size), f"{aux or 'pick'}_picker")
    pk = ctx.broadcast_to(pk, (*x.shape[:-2], n, size), axes="z")
    return ctx.op("matmul", [x, pk], {}, pad_zero=(x.pad_zero[0], True), logical_shape=tuple(out), aux=aux)


def _narrow_backward(ctx, index, grad):
    """The gradient in place, zeros around it (a concatenation with zero constants)."""
    shape = ctx.shape(0)
    d = norm_dim(int(ctx.attrs["dim"]), len(shape))
    start, length = int(ctx.attrs["start"]), int(ctx.attrs["length"])
    parts = []
    for size in (start, None, shape[d] - start - length):
        if size is None:
            parts.append(grad)
        elif size:
            zeros = list(shape)
            zeros[d] = size
            parts.append(ctx.constant(np.zeros(zeros, dtype=np.float32)))
    return parts[0] if len(parts) == 1 else ctx.op("concatenate", parts, {"dim": d})


register(OpDef("narrow", _narrow_shape, _narrow_eval, kind="tm", groups={"rearranging", "host_output_tm"},
               decompose=_decompose_narrow, lower=_lower_narrow,
               backward=_narrow_backward))


def _lower_fill_padding(ctx):
    (x,) = ctx.operands
    d = norm_dim(int(ctx.node.attrs["dim"]), len(x.shape))
    if x.shape[d] % 32 == 0:
        return x
    return ctx.fill_padding(x, d, float(ctx.node.attrs["value"]))


# Logically the identity; on device it writes `value` into the tile padding along `dim`.
register(OpDef("fill_padding", lambda s, a: s[0], lambda v, a: v[0], kind="tm", lower=_lower_fill_padding,
               backward=lambda ctx, i, g: g))


def _broadcast_shape(shapes, attrs):
    target = tuple(int(d) for d in attrs["shape"])
    try:
        np.broadcast_shapes(shapes[0], target)
    except ValueError:
        raise OpError(f"cannot broadcast {shapes[0]} to {target}") from None
    return target


register(OpDef("broadcast", _broadcast_shape, lambda v, a: np.broadcast_to(v[0], tuple(a["shape"])).copy(),
               kind="tm", groups={"sign_keeping"},
               lower=lambda ctx: ctx.relabel(ctx.broadcast_to(ctx.operands[0], ctx.node.shape), ctx.node.shape),
               backward=lambda ctx, i, g: g))  # autograd sums the gradient over the broadcast dims
