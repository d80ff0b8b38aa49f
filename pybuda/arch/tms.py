"""Tensor manipulations (TMs) carried on edges, with numpy semantics on (..., z, R, C) arrays.

A TM is a tuple: ("transpose",), ("broadcast", axis, factor) with axis "r" | "c" | "z" and factor in
units of the array's granularity (tiles on device tensors), ("hslice", n), ("hstack", n), ("vslice", n),
("vstack", n). The same functions serve the compiler's golden evaluation and the backend simulator.
A broadcast repeats the whole dimension `factor` times (on device tensors the source is one tile, so the
factor counts tiles, as in the netlist).
"""
from __future__ import annotations

import numpy as np

TM = tuple

TM_NAMES = ("transpose", "broadcast", "hslice", "hstack", "vslice", "vstack")


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
    """Shape (..., z, R, C) after one TM, in the same units as `shape`; ValueError if the TM does not divide."""
    *lead, z, r, c = shape
    kind = tm[0]
    if kind == "transpose":
        return (*lead, z, c, r)
    if kind == "broadcast":
        axis, f = tm[1], int(tm[2])
        if axis == "z" and z != 1:
            raise ValueError(f"TM broadcast z needs t == 1, got t = {z}")
        return {"z": (*lead, z * f, r, c), "r": (*lead, z, r * f, c), "c": (*lead, z, r, c * f)}[axis]
    n = int(tm[1])
    rules = {
        "hslice": (c % n == 0, (*lead, z * n, r, c // n)),
        "hstack": (z % n == 0, (*lead, z // n, r, c * n)),
        "vslice": (r % n == 0, (*lead, z * n, r // n, c)),
        "vstack": (z % n == 0, (*lead, z // n, r * n, c)),
    }
    if kind not in rules:
        raise ValueError(f"unknown TM {tm!r}; legal: {', '.join(TM_NAMES)}")
    ok, out = rules[kind]
    if not ok:
        raise ValueError(f"TM {kind}: {n} does not divide shape (z, r, c) = {(z, r, c)}")
    return out
