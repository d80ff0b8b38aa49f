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

TM = tuple

TM_NAMES = ("transpose", "broadcast", "hslice", "hstack", "vslice", "vstack", "pad", "tile_broadcast")


class TMError(ValueError):
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
    raise ValueError(f"unknown TM {tm!r}; legal: {', '.join(TM_NAMES)}")


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
