"""A fused op's sub-ops on the hardware (netlist-format.md §1.7).

Every sub-op runs on the fused op's grid and t with its own blocking (legacy netlists mix widths; this compiler's
fused ops take the op's blocking for every sub-op). An intermediate buffer holds one ublock of a value its own
schedule reads ublock by ublock, one mblock of a value a later schedule (or a matmul or reduce) reads; the inputs
split over the cores by how the sub-ops read them.
"""
from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class SubBlock:
    """What the L1 sizing needs of one sub-op: its schedule, type, operands and result (netlist names: input<k>,
    intermed<k>, dest, output) and blocking."""

    schedule: int
    type: str
    inputs: tuple
    output: str
    mblock: tuple
    ublock: tuple


def intermediate_tiles(subs: list[SubBlock]) -> int:
    """Tiles of L1 a fused op's intermediate buffers take per core: each buffer the largest, over the values
    written to it, of one ublock (a value read only by sub-ops of its own schedule, ublock by ublock) or one
    mblock of its writer (read by a later schedule, or by a matmul or reduce, which takes whole rows)."""
    size: dict[str, int] = {}
    for i, s in enumerate(subs):
        if not s.output.startswith("intermed"):
            continue
        readers = []
        for r in subs[i + 1:]:
            if s.output in r.inputs:
                readers.append(r)
            if r.output == s.output:
                break
        whole = any(r.schedule != s.schedule or r.type in ("matmul", "reduce") for r in readers)
        tiles = (s.mblock[0] * s.mblock[1] if whole else 1) * s.ublock[0] * s.ublock[1]
        size[s.output] = max(size.get(s.output, 0), tiles)
    return sum(size.values())


def input_roles(uses) -> tuple:
    """How a fused op's inputs are split over its cores, from the sub-op operands that read them: (input index,
    sub-op type, operand position) in schedule order; the first use decides: a matmul sub-op's first operand
    "rows", its second "cols", anything else "both"."""
    roles: dict[int, str] = {}
    for index, sub_type, position in uses:
        if index not in roles:
            roles[index] = ("rows" if position == 0 else "cols") if sub_type == "matmul" else "both"
    return tuple(roles.get(i, "both") for i in range(max(roles, default=-1) + 1))
