"""Placer: puts op grids on the core grid epoch by epoch, first-fit in row-major order, honouring
user start coordinates, transposed placement and epoch breaks. Epochs are contiguous schedule ranges."""
from __future__ import annotations

import dataclasses

import numpy as np

from ..device import DeviceSpec
from .op_model import BalancerError


@dataclasses.dataclass(frozen=True)
class PlacedOp:
    epoch: int
    loc: tuple          # (row, col) of the top-left core
    transpose: bool     # grid_transpose: footprint is (cols, rows)


def _first_fit(occ: np.ndarray, h: int, w: int) -> tuple | None:
    rows, cols = occ.shape
    for r in range(rows - h + 1):
        for c in range(cols - w + 1):
            if not occ[r:r + h, c:c + w].any():
                return (r, c)
    return None


def place(schedule: list[str], grids: dict[str, tuple], device: DeviceSpec, *, starts: dict | None = None,
          transposed: set | None = None, breaks: set | None = None) -> dict[str, PlacedOp]:
    """Place every op of `schedule` (grid sizes from `grids`) on `device`; new epoch when one is full."""
    starts, transposed, breaks = starts or {}, transposed or set(), breaks or set()
    occ = np.zeros((device.grid_rows, device.grid_cols), dtype=bool)
    epoch, placed = 0, {}

    def new_epoch():
        nonlocal epoch
        epoch += 1
        occ[:] = False

    for name in schedule:
        h, w = grids[name][::-1] if name in transposed else grids[name]
        if h > device.grid_rows or w > device.grid_cols:
            raise BalancerError(f"op {name!r}: footprint {h}x{w}{' (transposed)' if name in transposed else ''} "
                                f"exceeds the {device.name} core grid {device.grid_rows}x{device.grid_cols}")
        if name in breaks and occ.any():
            new_epoch()
        if name in starts:
            r, c = starts[name]
            if r + h > device.grid_rows or c + w > device.grid_cols:
                raise BalancerError(f"override_op_placement({name!r}, start={(r, c)}): a {h}x{w} grid there "
                                    f"leaves the {device.grid_rows}x{device.grid_cols} core grid of {device.name}")
            if occ[r:r + h, c:c + w].any():
                new_epoch()
            loc = (r, c)
        else:
            loc = _first_fit(occ, h, w)
            if loc is None:
                new_epoch()
                loc = _first_fit(occ, h, w)
        occ[loc[0]:loc[0] + h, loc[1]:loc[1] + w] = True
        placed[name] = PlacedOp(epoch, loc, name in transposed)
    return placed
