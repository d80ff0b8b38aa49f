"""Placer: puts op grids on the core grid epoch by epoch, first-fit in row-major order, honouring
user start coordinates, transposed placement and epoch breaks. Epochs are contiguous schedule ranges."""
from __future__ import annotations

import dataclasses

from ..device import DeviceSpec
from .op_model import BalancerError


@dataclasses.dataclass(frozen=True)
class PlacedOp:
    epoch: int
    loc: tuple          # (row, col) of the top-left core
    transpose: bool     # grid_transpose: footprint is (cols, rows)


class Occupancy:
    """Which cores of the grid are taken: one bit mask of columns per row."""

    def __init__(self, rows: int, cols: int):
        self.cols = cols
        self.masks = [0] * rows

    def any(self) -> bool:
        return any(self.masks)

    def clear(self) -> None:
        self.masks = [0] * len(self.masks)

    def free(self, r: int, c: int, h: int, w: int) -> bool:
        window = ((1 << w) - 1) << c
        return not any(m & window for m in self.masks[r:r + h])

    def take(self, r: int, c: int, h: int, w: int) -> None:
        window = ((1 << w) - 1) << c
        for i in range(r, r + h):
            self.masks[i] |= window

    def first_fit(self, h: int, w: int) -> tuple | None:
        """Top-left (row, col) of the first free h x w window in row-major order, None if there is none."""
        window = (1 << w) - 1
        for r in range(len(self.masks) - h + 1):
            used = 0
            for m in self.masks[r:r + h]:
                used |= m
            for c in range(self.cols - w + 1):
                if not (used >> c) & window:
                    return (r, c)
        return None


def place(schedule: list[str], grids: dict[str, tuple], device: DeviceSpec, *, starts: dict | None = None,
          transposed: set | None = None, breaks: set | None = None) -> dict[str, PlacedOp]:
    """Place every op of `schedule` (grid sizes from `grids`) on `device`; new epoch when one is full."""
    starts, transposed, breaks = starts or {}, transposed or set(), breaks or set()
    occ = Occupancy(device.grid_rows, device.grid_cols)
    epoch, placed = 0, {}
    for name in schedule:
        h, w = grids[name][::-1] if name in transposed else grids[name]
        if h > device.grid_rows or w > device.grid_cols:
            raise BalancerError(f"op {name!r}: footprint {h}x{w}{' (transposed)' if name in transposed else ''} "
                                f"exceeds the {device.name} core grid {device.grid_rows}x{device.grid_cols}")
        if name in breaks and occ.any():
            epoch += 1
            occ.clear()
        if name in starts:
            r, c = starts[name]
            if r + h > device.grid_rows or c + w > device.grid_cols:
                raise BalancerError(f"override_op_placement({name!r}, start={(r, c)}): a {h}x{w} grid there "
                                    f"leaves the {device.grid_rows}x{device.grid_cols} core grid of {device.name}")
            if not occ.free(r, c, h, w):
                epoch += 1
                occ.clear()
            loc = (r, c)
        else:
            loc = occ.first_fit(h, w)
            if loc is None:
                epoch += 1
                occ.clear()
                loc = occ.first_fit(h, w)
        occ.take(*loc, h, w)
        placed[name] = PlacedOp(epoch, loc, name in transposed)
    return placed


def pack_epoch(grids: list[tuple], rows: int, cols: int, starts: list[tuple | None],
               transposed: list[bool | None]) -> list[tuple[tuple, bool]] | None:
    """(top-left core, transposed) of each op grid of one epoch on a rows x cols core grid, or None if this
    first-fit packing finds no room: ops with a start override where they asked, then the others first-fit
    row-major in the given order (each as is unless `transposed` forces it, transposed where only that fits),
    then, if that fails, the same in order of decreasing height."""
    for order in (range(len(grids)), sorted(range(len(grids)), key=lambda i: (-min(grids[i]), -max(grids[i]), i))):
        occ = Occupancy(rows, cols)
        out: list = [None] * len(grids)
        for i, start in enumerate(starts):
            if start is not None:
                h, w = grids[i][::-1] if transposed[i] else grids[i]
                if start[0] + h > rows or start[1] + w > cols or not occ.free(*start, h, w):
                    return None
                occ.take(*start, h, w)
                out[i] = (tuple(start), bool(transposed[i]))
        for i in order:
            if out[i] is not None:
                continue
            out[i] = _take_first_fit(occ, rows, cols, grids[i], transposed[i])
            if out[i] is None:
                break
        if all(o is not None for o in out):
            return out
    return None


def place_beside(placed: list[tuple[tuple, tuple, bool]], rows: int, cols: int, grid: tuple,
                 transposed: bool | None) -> tuple[tuple, bool] | None:
    """(top-left core, transposed) of the first free window, row-major, for `grid` on a rows x cols core grid
    where the `placed` grids (top-left core, grid, transposed) stay; None if there is none."""
    occ = Occupancy(rows, cols)
    for loc, placed_grid, flip in placed:
        occ.take(*loc, *(placed_grid[::-1] if flip else placed_grid))
    return _take_first_fit(occ, rows, cols, grid, transposed)


def _take_first_fit(occ: Occupancy, rows: int, cols: int, grid: tuple,
                    transposed: bool | None) -> tuple[tuple, bool] | None:
    """Take the first free window, row-major, for `grid` (as is, else transposed, unless `transposed` forces
    one); (top-left core, transposed), or None if there is none."""
    flips = (False, True) if transposed is None and grid[0] != grid[1] else (bool(transposed),)
    for flip in flips:
        h, w = grid[::-1] if flip else grid
        loc = occ.first_fit(h, w) if h <= rows and w <= cols else None
        if loc is not None:
            occ.take(*loc, h, w)
            return loc, flip
    return None
