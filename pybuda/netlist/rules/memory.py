"""Memory rules (netlist-format.md §3.5, §3.7, §3.8): DRAM and host buffers fit their channel and do not overlap;
each op's buffers fit a core's L1 data-buffer space."""
from __future__ import annotations

from ...arch.fused import intermediate_tiles
from ...arch.l1 import InputBuffer, footprint
from ...arch.movement import in_place, prologue_layout
from ...arch.operands import prologue_tiles_per_core
from ...dataformat import tile_bytes
from ..model import Netlist, Op, Queue, QueueAlloc
from ..sizes import queue_buffer_bytes
from .registry import Context, positive, rule, sized
from .streams import stream_buffer_bytes


def _buffer_bytes(c: Context, q: Queue) -> int:
    """Bytes of one buffer; data is untilized (no tile headers) when an untilize_output op writes it."""
    prod = c.ops.get(q.input) if q.fed_by_op else None
    return queue_buffer_bytes(q, tilized=not (prod is not None and prod.untilize_output))


def _ranges(c: Context, q: Queue) -> list:
    """[((device, loc, channel), start, end)] of the queue's buffers."""
    if not positive(q.t, *q.mblock, *q.ublock) or q.entries < 0:
        return []
    size = _buffer_bytes(c, q)
    return [((dev, q.loc, ch), addr, addr + size) for dev in q.devices for ch, addr in q.allocations]


@rule("device.dram_capacity", on=Queue, when=lambda q: q.loc == "dram", section="§3.7", needs_device=True)
def device_dram_capacity(c: Context, q: Queue) -> None:
    """A static DRAM buffer ends inside its channel."""
    if q.name in c.dynamic:
        return
    cap = c.spec.dram_channel_bytes
    for (_, _, ch), a0, a1 in _ranges(c, q):
        if a1 > cap:
            c.fail(q, f"buffer [{a0:#x}, {a1:#x}) runs past the end of DRAM channel {ch} ({cap:#x} bytes)",
                   f"end <= {cap:#x}", hex(a1))
            break


def _aliases(c: Context, static: dict) -> dict:
    """queue -> the queue it aliases: an explicit `alias`, or among static rams with identical allocations (the
    runtime treats those as dual views of one buffer) the one with the most entries."""
    base: dict = {}
    by_alloc: dict = {}
    for name, rs in static.items():
        q = c.n.queues[name]
        if q.alias is not None:
            base[name] = q.alias
        elif q.type == "ram" and rs:
            by_alloc.setdefault(tuple(rs), []).append(name)
    for names in by_alloc.values():
        if len(names) > 1:
            head = max(names, key=lambda n: c.n.queues[n].entries)
            for n in names:
                if n != head:
                    base[n] = head
    return base


@rule("queue.dram_overlap", on=Netlist, section="§3.5")
def queue_dram_overlap(c: Context) -> None:
    """Buffers do not overlap (per device, location and channel), except aliased rams; a dynamic queue
    (allocate_queue) overlaps neither static buffers nor queues allocated at the same time."""
    static = {name: _ranges(c, q) for name, q in c.n.queues.items() if name not in c.dynamic}
    base = _aliases(c, static)

    def aliased(a: str, b: str) -> bool:
        return base.get(a, a) == base.get(b, b)

    spans: dict = {}
    for name, rs in static.items():
        for key, a0, a1 in rs:
            spans.setdefault(key, []).append((a0, a1, name))
    for (dev, loc, ch), items in spans.items():
        items.sort()
        open_: list = []          # (end, name) of buffers that may still overlap
        for a0, a1, name in items:
            open_ = [(e, n) for e, n in open_ if e > a0]
            for e, other in open_:
                if other != name and not aliased(name, other):
                    c.fail(c.n.queues[name], f"{loc} buffer [{a0:#x}, {a1:#x}) on device {dev} channel {ch} overlaps "
                           f"queue {other!r} (which ends at {e:#x})", f"start >= {e:#x}", hex(a0))
                    break
            open_.append((a1, name))
    if c.dynamic:
        _dynamic_overlaps(c, spans, aliased)


def _dynamic_overlaps(c: Context, static_spans: dict, aliased) -> None:
    reported = set()
    for p in c.n.programs:
        live: dict = {}
        for ins in p.instructions:
            if not isinstance(ins, QueueAlloc):
                continue
            for qname in ins.queues:
                q = c.n.queues.get(qname)
                if q is None:
                    continue
                if ins.opcode == "deallocate_queue":
                    live.pop(qname, None)
                    continue
                mine = _ranges(c, q)
                for key, a0, a1 in mine:
                    for b0, b1, other in static_spans.get(key, []):
                        if a0 < b1 and b0 < a1 and (qname, other) not in reported and not aliased(qname, other):
                            reported.add((qname, other))
                            c.fail(q, f"dynamic buffer [{a0:#x}, {a1:#x}) overlaps static queue {other!r} on "
                                   f"{key[1]} channel {key[2]}", "disjoint buffers", hex(a0))
                    for other, theirs in live.items():
                        for k2, b0, b1 in theirs:
                            if k2 == key and a0 < b1 and b0 < a1 and (qname, other) not in reported and \
                                    not aliased(qname, other):
                                reported.add((qname, other))
                                c.fail(q, f"dynamic buffer [{a0:#x}, {a1:#x}) overlaps queue {other!r}, allocated at "
                                       f"the same time, on {key[1]} channel {key[2]}", "disjoint buffers", hex(a0))
                live[qname] = mine


# --- L1 ------------------------------------------------------------------------------------------------------------

def op_l1_bytes(c: Context, op: Op) -> dict:
    """L1 bytes one core of `op` needs, by buffer kind (`pybuda.arch.l1.footprint` with the legal minimum input
    buffers; a prologued queue as the backend lays it out (`pybuda.arch.movement.prologue_layout`): transformed in
    its input buffer, or raw besides it; an identity matmul's sparse tiles and encoding whole, read in place; see
    docs/netlist.md "L1 budget")."""
    geom = c.n.geometry_of(op)
    inputs = []
    for i, src in enumerate(op.inputs):
        tb = tile_bytes(op.in_df[i] if i < len(op.in_df) else op.out_df)
        q = c.n.queues.get(src)
        minimum = _listed(op.input_buf_min_size_tiles, i)
        in_place_tiles = raw = 0
        if q is not None and op.graph in c.prologue.get(src, ()) and sized(q):
            if in_place(geom, i):
                in_place_tiles = prologue_tiles_per_core(geom, i, q.shape)
            else:
                raw = prologue_layout(geom, i, q.shape, tuple(q.grid_size), tuple(op.tms(i)),
                                      _pad(op.input_unpad.get(i)), _pad(op.input_pad.get(i)), tb, minimum)[1]
        inputs.append(InputBuffer(tb, in_place_tiles=in_place_tiles, raw_tiles=raw, min_size_tiles=minimum,
                                  dram_io_tiles=_listed(op.input_dram_io_buf_size_tiles, i)))
    f = c.n.fused_op_of(op) if op.type == "fused_op" else None
    fused_tiles = intermediate_tiles(f.sub_blocks()) if f else 0
    return footprint(geom, inputs, out_tile_bytes=tile_bytes(op.out_df, op.effective_tile_dim,
                                                             tilized=not op.untilize_output),
                     intermed_tile_bytes=tile_bytes(op.intermed_df, op.effective_tile_dim),
                     intermed_separate=op.intermed_df != op.out_df, buf_size_mb=op.buf_size_mb,
                     gradient_op=bool(op.gradient_op), fused_intermed_tiles=fused_tiles,
                     overlay_size=op.overlay_size or 0, latency_hiding=False)


def _pad(pad) -> tuple | None:
    return None if pad is None else (pad.rt or 0, pad.ct or 0)


def _listed(values: list | None, index: int) -> int:
    return values[index] if values and index < len(values) else 0


@rule("l1.budget", on=Op, when=lambda op: op.is_tensix and sized(op), section="§3.8", needs_device=True)
def l1_budget(c: Context, op: Op) -> None:
    """An op's buffers per core (output, intermediate, input buffers, prologued data, overlay, and the stream
    buffers pipegen adds: DRAM receive, gather relay, multicast) fit the L1 above the device's data-buffer base
    (839,680 B on grayskull, 1,290,240 B on wormhole_b0)."""
    h, w = op.footprint
    if h > c.spec.grid_rows or w > c.spec.grid_cols:
        return      # reported by grid.bounds
    budget = c.spec.l1_data_buffer_bytes
    parts = {**op_l1_bytes(c, op), "streams": stream_buffer_bytes(c, op)}
    total = sum(parts.values())
    if total > budget:
        detail = ", ".join(f"{k} {v:,}" for k, v in parts.items() if v)
        c.fail(op, f"needs {total:,} B of L1 per core ({detail}), more than the {budget:,} B of data-buffer space on "
               f"{c.arch}", f"<= {budget:,} B", f"{total:,} B")
