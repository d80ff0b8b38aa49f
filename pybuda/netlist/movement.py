"""A netlist's epochs as the backend model's data movement sees them (`pybuda.arch.movement`): each op with its
geometry, location, inputs (the edge's TMs, unpad and pad, input tile format, prologue flag,
input_buf_min_size_tiles, the op whose DRAM read it shares) and the queues it writes, each queue with its buffer
grid and DRAM channels. The simulator's timing and the validator's stream rules read the pipes derived from it."""
from __future__ import annotations

from typing import Callable, Iterable

from ..arch.movement import MovingInput, MovingOp, QueueLayout
from ..arch.operands import OpGeometry
from ..device import DeviceSpec
from .model import Graph, Netlist, Op, Queue


def queue_layout(q: Queue, spec: DeviceSpec) -> QueueLayout:
    """A netlist queue as data movement sees it (DRAM channels as `DeviceSpec.system_channel` ids)."""
    channels = tuple(spec.system_channel(q.devices[0], ch) for ch, _ in q.allocations) if q.loc == "dram" else ()
    return QueueLayout(q.name, q.shape, tuple(q.grid_size), channels, q.devices[0], q.df.tile_bytes)


def _pair(pad) -> tuple | None:
    return None if pad is None else (pad.rt or 0, pad.ct or 0)


def moving_op(nl: Netlist, graph: Graph, op: Op, geometry: OpGeometry, spec: DeviceSpec,
              prologued: Callable[[str], bool], writes: Iterable[str]) -> MovingOp:
    """One netlist op as data movement sees it; `prologued(queue)`: the execute prologues that input queue;
    `writes`: the queues it feeds."""
    inputs = []
    mins = op.input_buf_min_size_tiles or ()
    dram_io = op.input_dram_io_buf_size_tiles or ()
    forks = dict(op.forked_dram_inputs or ())
    for k, src in enumerate(op.inputs):
        q = nl.queues.get(src)
        df = op.in_df[k] if k < len(op.in_df) else op.out_df
        inputs.append(MovingInput(src, tuple(op.tms(k)), queue_layout(q, spec) if q is not None else None,
                                  _pair(op.input_unpad.get(k)), _pair(op.input_pad.get(k)), df.tile_bytes,
                                  q is not None and prologued(src), mins[k] if k < len(mins) else 0,
                                  dram_io[k] if k < len(dram_io) else 0,
                                  forks.pop(src, None) if q is not None else None))
    return MovingOp(op.name, geometry, tuple(inputs), tuple(queue_layout(nl.queues[w], spec) for w in writes),
                    tuple(op.grid_loc) if op.grid_loc is not None else None, bool(op.grid_transpose),
                    graph.devices[0])


def fed_queues(nl: Netlist, ops: Iterable[str]) -> dict[str, list[str]]:
    """The queues each of `ops` writes (netlist queue order)."""
    names = set(ops)
    written: dict[str, list[str]] = {}
    for qname, q in nl.queues.items():
        if q.input in names:
            written.setdefault(q.input, []).append(qname)
    return written
