"""T-streaming on the hardware (pybuda-passes.md §7): an op's output for one input cut into `factor` slices along
its rows ("r") or columns ("c"), produced one after the other as extra t. A streamed op holds smaller blocks in L1
and hands its output on sooner; the edges around it get TMs so every op still reads the values it read before.

The TMs of an edge (`edge_tms`): the producer's slices stacked back (`unstream`), the edge's own TMs, then the
consumer's slicing of that operand (`restream`: a row-streamed matmul replays its whole second operand for every
slice, a column-streamed one its whole first operand: broadcast then slice), simplified (`simplify_tms`).

Inside an epoch a streamed producer hands its slices to the consumer through its output buffer (two mblocks): the
consumer must take them in the order they come. So an edge in an epoch is legal (`in_epoch_problem`) when its TMs,
simplified, hold no stack (the slicings agree), or are one row stack read by an operand that consumes rows in
order (an eltwise input, a matmul's first operand or bias, a sparse matmul's activations, a column reduction);
anything else needs the producer's whole output and goes through a DRAM queue (another epoch).
"""
from __future__ import annotations

import functools

from .tms import TM, simplify_tms

DIRECTIONS = ("r", "c")
STACK = {"r": "vstack", "c": "hstack"}
SLICE = {"r": "vslice", "c": "hslice"}

Stream = tuple  # (direction "r" | "c", factor >= 2), or () for an op that does not stream


def unstream(stream: Stream) -> tuple[TM, ...]:
    """TMs that put a streamed producer's slices back together."""
    return ((STACK[stream[0]], stream[1]),) if stream else ()


def restream(stream: Stream, op_type: str, index: int, identity: bool = False) -> tuple[TM, ...]:
    """TMs that cut operand `index` of an `op_type` consumer streaming as `stream`: slices along the streamed
    dimension, except a dense matmul's operand that does not carry that dimension, which is replayed whole for
    every slice (row streaming: operand 1 broadcast along columns then hsliced; column streaming: operand 0
    broadcast along rows then vsliced)."""
    if not stream:
        return ()
    direction, factor = stream
    if op_type == "matmul" and not identity and index == (1 if direction == "r" else 0):
        axis = "c" if direction == "r" else "r"
        return (("broadcast", axis, factor), (SLICE["c" if direction == "r" else "r"], factor))
    return ((SLICE[direction], factor),)


def replay_factor(stream: Stream, op_type: str, index: int, identity: bool = False) -> int:
    """How many times a streaming consumer reads operand `index` whole per input (1 unless it is replayed)."""
    return next((tm[2] for tm in restream(stream, op_type, index, identity) if tm[0] == "broadcast"), 1)


def edge_tms(producer: Stream, tms, consumer: Stream, op_type: str, index: int, identity: bool = False) -> tuple:
    """The TMs of an edge between a producer streaming as `producer` and operand `index` of an `op_type`
    consumer streaming as `consumer`, that carried `tms` without streaming."""
    return simplify_tms((*unstream(producer), *tms, *restream(consumer, op_type, index, identity)))


def row_ordered(op_type: str, index: int, *, identity: bool = False, reduce_dim: str | None = None,
                role: str = "both") -> bool:
    """Whether operand `index` of an `op_type` op is consumed in row order, so a row-streamed producer's slices
    can reach it one after the other (a fused op's operand: unless a matmul sub-op reads it as its second operand,
    `role` "cols")."""
    if op_type == "matmul":
        return index != 1 or identity
    if op_type == "reduce":
        return reduce_dim == "c"
    if op_type == "fused_op":
        return role != "cols"
    return op_type not in ("depthwise", "splice", "embedding", "topk", "tilizer")


@functools.lru_cache(maxsize=65536)
def in_epoch_problem(producer: Stream, tms, consumer: Stream, op_type: str, index: int, *, identity: bool = False,
                     reduce_dim: str | None = None, role: str = "both") -> str | None:
    """Why an edge inside one epoch cannot carry a producer streaming as `producer` into operand `index` of a
    consumer streaming as `consumer` (None: it can)."""
    if not producer:
        return None
    result = edge_tms(producer, tms, consumer, op_type, index, identity)
    stacks = [tm for tm in result if tm[0] in ("vstack", "hstack")]
    if not stacks:
        return None
    if len(result) == 1 and result[0][0] == STACK["r"] and row_ordered(op_type, index, identity=identity,
                                                                       reduce_dim=reduce_dim, role=role):
        return None
    return (f"the producer streams {producer[0].upper()}x{producer[1]} and operand {index} of the {op_type} consumer "
            f"(streaming {consumer[0].upper() + 'x' + str(consumer[1]) if consumer else 'not'}) would need its slices "
            f"out of order ({', '.join(_tm_text(tm) for tm in result)}): only a DRAM queue between them can hold them")


def _tm_text(tm: TM) -> str:
    return tm[0] if len(tm) == 1 else f"{tm[0]} {' '.join(str(x) for x in tm[1:])}"
