"""embedding: row gather from a (flat-layout) table by RawUInt32 indices."""
from __future__ import annotations

import numpy as np

from pybuda.netlist import Op

from ..errors import SimulatorError
from .common import TILE, expect_inputs

INVALID_INDEX = 0xFFFFFFFF


def embedding(op: Op, ins: list[np.ndarray]) -> np.ndarray:
    """Input 0: the table (rows are its logical rows), input 1: indices. Per grid row, the first `num_indices`
    values of that row's block of input 1 (row-major) select table rows; index 0xFFFFFFFF gives a zero row
    (backend `ops/embedding_op.cpp`). Output per grid row: num_indices rows (a multiple of 32) x the table width.
    """
    expect_inputs(op, ins, 2)
    table, idx = ins
    n = op.attrs.num_indices or 0
    if n <= 0 or n % TILE:
        raise SimulatorError(f"op {op.name!r}: embedding num_indices must be a positive multiple of 32, got {n}")
    gr = op.grid_size[0]
    *lead_t, tt, rows, cols = table.shape
    if tt != 1:
        raise SimulatorError(f"op {op.name!r}: embedding table must have t=1, got t={tt}")
    *lead_i, ti, irows, icols = idx.shape
    if irows % gr:
        raise SimulatorError(f"op {op.name!r}: embedding indices ({irows} rows) do not split into {gr} grid rows")
    blocks = idx.reshape(*lead_i, ti, gr, irows // gr, icols).swapaxes(-4, -3)  # (..., gr, t, r, c)
    flat = blocks.reshape(*lead_i, gr, -1)
    if flat.shape[-1] < n:
        raise SimulatorError(f"op {op.name!r}: a grid row of the indices holds {flat.shape[-1]} values, fewer than "
                             f"num_indices={n}")
    sel = flat[..., :n].astype(np.int64)
    invalid = sel == INVALID_INDEX
    bad = (~invalid) & ((sel < 0) | (sel >= rows))
    if bad.any():
        raise SimulatorError(f"op {op.name!r}: embedding index {int(sel[bad][0])} outside the table's {rows} rows")
    safe = np.where(invalid, 0, sel)
    tab = table.reshape(*lead_t, rows, cols)
    if tab.ndim == 2 or int(np.prod(tab.shape[:-2], dtype=np.int64)) == 1:
        out = tab.reshape(rows, cols)[safe]  # (..., gr, n, cols)
    else:
        lead = np.broadcast_shapes(tuple(lead_t), tuple(lead_i))
        tab_b = np.broadcast_to(tab, lead + (rows, cols)).reshape(-1, rows, cols)
        safe_b = np.broadcast_to(safe, lead + safe.shape[-2:]).reshape(-1, gr, n)
        out = np.stack([tab_b[i][safe_b[i]] for i in range(tab_b.shape[0])]).reshape(lead + (gr, n, cols))
    out = np.where(invalid[..., None], 0.0, out).astype(np.float32)
    return out.reshape(out.shape[:-3] + (1, gr * n, cols))
