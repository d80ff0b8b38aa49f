"""reduce (type max; dims r, c, z)."""
from __future__ import annotations

import numpy as np

from pybuda.netlist import Op

from ..errors import SimulatorError
from ..formats import quantize
from .common import TILE, expect_inputs, int_math, src


def reduce(op: Op, ins: list[np.ndarray]) -> np.ndarray:
    """Max over the reduced dimension of each core's input block, on source-register values, then acc_df.

    dim c: the max of each row of a core's K input tiles lands in column 0 of the core's output tile column
    (other columns 0); dim r: likewise into row 0; dim z: elementwise max over z consecutive t-slices.
    """
    expect_inputs(op, ins, 1)
    a = op.attrs
    if (a.type or "max") != "max":
        raise SimulatorError(f"op {op.name!r}: reduce type {a.type!r} is not supported (max only)")
    dim = a.dim or ""
    gr, gc = op.grid_size
    x = src(ins[0], int_math(op))
    *lead, t, rows, cols = x.shape
    if dim == "z":
        z = 1 if a.z is None else a.z
        if t % z:
            raise SimulatorError(f"op {op.name!r}: reduce z={z} does not divide the input t={t}")
        y = x.reshape(*lead, t // z, z, rows, cols).max(axis=-3)
    elif dim == "c":
        if op.mblock[1] * op.ublock[1] != 1:
            raise SimulatorError(f"op {op.name!r}: reduce dim c with mblock_n*ublock_ct = "
                                 f"{op.mblock[1] * op.ublock[1]} output tiles per core is not supported (1 only)")
        m = x.reshape(*lead, t, rows, gc, cols // gc).max(axis=-1)
        y = np.zeros((*lead, t, rows, gc * TILE), dtype=x.dtype)
        y[..., ::TILE] = m
    elif dim == "r":
        if op.mblock[0] * op.ublock[0] != 1:
            raise SimulatorError(f"op {op.name!r}: reduce dim r with mblock_m*ublock_rt = "
                                 f"{op.mblock[0] * op.ublock[0]} output tiles per core is not supported (1 only)")
        m = x.reshape(*lead, t, gr, rows // gr, cols).max(axis=-2)
        y = np.zeros((*lead, t, gr * TILE, cols), dtype=x.dtype)
        y[..., ::TILE, :] = m
    else:
        raise SimulatorError(f"op {op.name!r}: reduce needs attribute dim r, c or z, got {dim!r}")
    return quantize(y, op.effective_acc_df)
