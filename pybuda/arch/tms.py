"""Tensor manipulations (TMs): shape math and numpy semantics on (..., z, R, C) arrays, one implementation for the
compiler's golden evaluation, the netlist validator, the simulator and the timing model.

A TM is a tuple: ("transpose",), ("broadcast", axis, factor) with axis "r" | "c" | "z" and factor in units of the
array's granularity (tiles on device tensors), ("hslice", n), ("hstack", n), ("vslice", n), ("vstack", n); netlist
edges also carry ("pad", rt, ct, value) (tiles of a value appended at the bottom/right) and, inside fused ops,
("tile_broadcast", axis) (a broadcast within each tile: the shape does not change). A broadcast repeats the whole
dimension `factor` times (on device tensors the source is one tile, so the factor counts tiles, as in the netlist).
"""
from __future__ import annotations

import numpy as np

from ..errors import UserInputError

TM = tuple
TILE = 32

TM_NAMES = ("transpose", "broadcast", "hslice", "hstack", "vslice", "vstack", "pad", "tile_broadcast")


class TMError(UserInputError):
    """A TM that does not apply to a shape; `rule` names the backend rule (tm.divide, tm.factor,
    tm.broadcast_z_t, tm.kind), `expected`/`actual` say what would be legal and what was found."""

    def __init__(self, rule: str, message: str, expected=None, actual=None):
        super().__init__(message)
        self.rule, self.expected, self.actual = rule, expected, actual


def apply_tm(x: np.ndarray, tm: TM) -> np.ndarray:
    """Apply one TM to an array whose last three dims are (z, R, C)."""
    kind = tm[0]
    z, r, c = x.shape[-3:]
    lead = x.shape[:-3]
    if kind == "transpose":
        return np.swapaxes(x, -1, -2)
    if kind == "tile_broadcast":
        return tile_broadcast(x, tm[1])
    if kind == "broadcast":
        axis, factor = tm[1], int(tm[2])
        if axis == "z":
            return np.repeat(x, factor, axis=-3) if z == 1 else np.tile(x, (1,) * len(lead) + (factor, 1, 1))
        reps = [1] * x.ndim
        reps[-2 if axis == "r" else -1] = factor
        return np.tile(x, reps)
    n = int(tm[1])
    if kind == "hslice":  # (z, R, C) -> (z*n, R, C/n): column blocks become consecutive z slices
        return x.reshape(*lead, z, r, n, c // n).swapaxes(-3, -2).reshape(*lead, z * n, r, c // n)
    if kind == "hstack":  # inverse of hslice
        return x.reshape(*lead, z // n, n, r, c).swapaxes(-3, -2).reshape(*lead, z // n, r, c * n)
    if kind == "vslice":  # (z, R, C) -> (z*n, R/n, C)
        return x.reshape(*lead, z * n, r // n, c)
    if kind == "vstack":
        return x.reshape(*lead, z // n, r * n, c)
    raise UserInputError(f"unknown TM {tm!r}; legal: {', '.join(TM_NAMES)}")


def tile_broadcast(x: np.ndarray, axis: str) -> np.ndarray:
    """Within-tile broadcast of an array of whole 32x32 tiles: "r" copies row 0 of every tile to all its rows,
    "c" column 0 to all its columns."""
    *lead, rows, cols = x.shape
    v = x.reshape(*lead, rows // TILE, TILE, cols // TILE, TILE)
    if axis == "r":
        v = np.broadcast_to(v[..., :, 0:1, :, :], v.shape)
    elif axis == "c":
        v = np.broadcast_to(v[..., :, :, :, 0:1], v.shape)
    else:
        raise UserInputError(f"tile_broadcast axis must be r or c, got {axis!r}")
    return np.ascontiguousarray(v).reshape(x.shape)


def apply_tms(x: np.ndarray, tms: list) -> np.ndarray:
    for tm in tms:
        x = apply_tm(x, tm)
    return x


def tm_shape(shape: tuple, tm: TM) -> tuple:
    """Shape (..., z, R, C) after one TM, in the same units as `shape`; TMError if the TM does not apply."""
    *lead, z, r, c = shape
    kind = tm[0]
    if kind == "transpose":
        return (*lead, z, c, r)
    if kind == "tile_broadcast":
        return tuple(shape)
    if kind == "pad":
        return (*lead, z, r + int(tm[1]), c + int(tm[2]))
    if kind == "broadcast":
        axis, f = tm[1], int(tm[2])
        if f < 1:
            raise TMError("tm.factor", f"broadcast factor must be >= 1, got {f}", ">= 1", f)
        if axis == "z" and z != 1:
            raise TMError("tm.broadcast_z_t", f"broadcast z needs t == 1 at that point, but t is {z}", "t == 1", z)
        return {"z": (*lead, z * f, r, c), "r": (*lead, z, r * f, c), "c": (*lead, z, r, c * f)}[axis]
    if kind not in _SLICES:
        raise TMError("tm.kind", f"unknown TM {tm!r}; legal: {', '.join(TM_NAMES)}", TM_NAMES, kind)
    n = int(tm[1])
    if n < 1:
        raise TMError("tm.factor", f"{kind} factor must be >= 1, got {n}", ">= 1", n)
    divided, what, out = _SLICES[kind](z, r, c, n)
    if divided % n:
        raise TMError("tm.divide", f"{kind} {n} does not divide {what} = {divided}", f"{what} divisible by {n}",
                      divided)
    return (*lead, *out)


_SLICES = {   # kind -> (z, r, c, n) -> (dimension that n must divide, its name, (z, r, c) after the TM)
    "hslice": lambda z, r, c, n: (c, "columns", (z * n, r, c // n)),
    "hstack": lambda z, r, c, n: (z, "t", (z // n, r, c * n)),
    "vslice": lambda z, r, c, n: (r, "rows", (z * n, r // n, c)),
    "vstack": lambda z, r, c, n: (z, "t", (z // n, r * n, c)),
}


def shape_after_tms(shape: tuple, tms) -> tuple:
    """Shape after a list of TMs (TMError on the first that does not apply)."""
    for tm in tms:
        shape = tm_shape(shape, tm)
    return tuple(shape)


def edge_shape(shape: tuple, tms=(), unpad: tuple | None = None, pad: tuple | None = None) -> tuple:
    """(t, rt, ct) an op reads through a netlist edge: the producer's shape with `input_N_unpad` (rt, ct) removed,
    the edge's TMs applied, then `input_N_pad` (rt, ct) added."""
    t, r, c = shape
    if unpad is not None:
        r, c = r - unpad[0], c - unpad[1]
    t, r, c = shape_after_tms((t, r, c), tms)
    if pad is not None:
        r, c = r + pad[0], c + pad[1]
    return (t, r, c)


_KIND = {"vslice": ("v", 1), "vstack": ("v", -1), "hslice": ("h", 1), "hstack": ("h", -1)}
_COMMUTES = {"v": lambda tm: (tm[0] == "broadcast" and tm[1] == "c") or tm[0] == "tile_broadcast",
             "h": lambda tm: (tm[0] == "broadcast" and tm[1] == "r") or tm[0] == "tile_broadcast"}


def _scale(tm: TM) -> tuple[str, float] | None:
    """(axis, factor) of a slice (factor n) or stack (1/n); None for any other TM."""
    if tm[0] not in _KIND:
        return None
    axis, sign = _KIND[tm[0]]
    return axis, float(tm[1]) ** sign


def _as_tm(axis: str, factor: float) -> tuple:
    """The TMs of a net slice (> 1) / stack (< 1) factor along axis "v" or "h"; () if it is 1, None if it is not a
    whole slice or stack factor."""
    if factor == 1:
        return ()
    n = factor if factor > 1 else 1 / factor
    if abs(n - round(n)) > 1e-9:
        return None
    return ((f"{axis}{'slice' if factor > 1 else 'stack'}", int(round(n))),)


def simplify_tms(tms) -> tuple:
    """An equivalent, shorter TM list (same result on every tensor it applies to), by these rewrites until none
    applies: adjacent slices and stacks of one axis combine (vslice(a) vstack(a) and vstack(a) vslice(a) cancel,
    vstack(a) vslice(b) is vstack(a/b) when b divides a, vslice(a) vslice(b) is vslice(a*b), ...); a stack and a
    slice of one factor around a TM that commutes with them cancel (vstack(f) X vslice(f) -> X for X a column or tile
    broadcast; hstack(f) X hslice(f) -> X for X a row or tile broadcast); a stack and a slice of one factor around a
    transpose cancel (vstack(f) transpose hslice(f) -> transpose, hstack(f) transpose vslice(f) -> transpose)."""
    out = list(tms)
    changed = True
    while changed:
        changed = False
        for i in range(len(out) - 1):
            a, b = _scale(out[i]), _scale(out[i + 1])
            if a and b and a[0] == b[0]:
                merged = _as_tm(a[0], a[1] * b[1])
                if merged is not None:
                    out[i:i + 2] = merged
                    changed = True
                    break
            if i + 2 < len(out):
                c = _scale(out[i + 2])
                if not (a and c and a[1] < 1 and c[1] == 1 / a[1]):
                    continue
                middle = out[i + 1]
                if a[0] == c[0] and _COMMUTES[a[0]](middle):
                    out[i:i + 3] = [middle]
                    changed = True
                    break
                if middle[0] == "transpose" and a[0] != c[0]:
                    out[i:i + 3] = [middle]
                    changed = True
                    break
    return tuple(out)
