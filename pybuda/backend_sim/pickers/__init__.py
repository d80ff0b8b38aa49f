"""Picker structures an identity matmul's shapes can imply (pybuda.backend_sim.sparse_figures), one module per
family: conv/pool taps (`conv`), resize and pad over square images (`image`), concatenation and reshape runs
(`blocks`). Each kind's `implied(k_tiles, tile_rows)` gives the picker of that kind with exactly those
activation and output tile rows (its own choice when several fit), or None; a picker's `pairs()` are its
non-zero (output tile row, activation tile) pairs."""
from __future__ import annotations

import dataclasses
from typing import Callable, Protocol

import numpy as np

from . import blocks, conv, image


class Picker(Protocol):
    tile_rows: int

    def pairs(self) -> tuple[np.ndarray, np.ndarray]: ...


@dataclasses.dataclass(frozen=True)
class Kind:
    """A picker kind: the words of a legacy op name that name it (the source op before `.dc.`, e.g.
    `concatenate_12` in `concatenate_12.dc.sparse_matmul.3`), whether its non-zeros are weights rather than ones,
    and the picker its shapes imply."""

    name: str
    words: tuple[str, ...]
    weighted: bool
    implied: Callable[[int, int], Picker | None]


# the order in which kinds are tried when the op's name and format do not decide (see `kind_order`)
KINDS: tuple[Kind, ...] = (
    Kind("conv", ("conv", "pool"), False, conv.implied),
    Kind("upsample", ("resize", "upsample", "interpolate"), False, image.implied_nearest),
    Kind("bilinear", ("resize", "upsample", "interpolate"), True, image.implied_bilinear),
    Kind("downsample", ("resize", "downsample"), False, image.implied_downsample),
    Kind("pad", ("pad",), False, image.implied_pad),
    Kind("concat", ("concat", "reshape"), False, blocks.implied_compaction),
    Kind("reshape", ("reshape",), False, blocks.implied_spread),
)
KIND = {k.name: k for k in KINDS}


def kind_order(op_name: str, weighted: bool) -> tuple[str, ...]:
    """The kinds in the order they are tried for an op: the kinds its name names first, then those whose
    non-zeros are of its sparse tiles' kind (weights or ones), then the order of KINDS."""
    source = op_name.split(".dc.")[0].lower()
    rank = {k.name: (not any(w in source for w in k.words), k.weighted != weighted, i) for i, k in enumerate(KINDS)}
    return tuple(sorted(rank, key=rank.__getitem__))


def implied_picker(k_tiles: int, tile_rows: int, order: tuple[str, ...]) -> tuple[str, Picker] | None:
    """(kind, picker) of the first kind in `order` whose shapes fit (None if none does)."""
    for name in order:
        picker = KIND[name].implied(k_tiles, tile_rows)
        if picker is not None:
            return name, picker
    return None
