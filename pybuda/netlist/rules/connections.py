"""Rules on what connects ops and queues (netlist-format.md §3.2, §3.5): inputs exist, TMs are legal and give
the shape the consumer expects (through the backend model's `expected_input` and `edge_shape`), untilized
outputs go to one host queue, queues agree on input_count."""
from __future__ import annotations

from ...arch.operands import OpGeometry, expected_input, transpose_illegal
from ...arch.tms import TMError, edge_shape, shape_after_tms
from ...dataformat import DataFormat as DF
from ..model import FusedOp, Graph, Netlist, Op, Queue
from .registry import Context, Edge, positive, rule, sized

TM_SHAPE_RULES = ("tm.divide", "tm.factor", "tm.broadcast_z_t", "tm.kind")
INPUT_SHAPE_RULES = ("shape.eltwise", "shape.matmul_in0", "shape.matmul_in1", "shape.matmul_bias", "shape.depthwise",
                     "shape.reduce")


def edge_pads(op: Op, index: int) -> tuple:
    """(unpad, pad) of input `index` as (rt, ct) pairs, None where not set."""
    unpad, pad = op.input_unpad.get(index), op.input_pad.get(index)
    return ((unpad.rt or 0, unpad.ct or 0) if unpad is not None else None,
            (pad.rt or 0, pad.ct or 0) if pad is not None else None)


def shape_of_edge(c: Context, e: Edge):
    """(t, rt, ct) the op reads through edge `e` (producer, unpad, TMs, pad), a TMError if a TM does not apply,
    None if the producer has no shape."""
    def compute():
        if not sized(e.producer):
            return None
        try:
            return edge_shape(e.producer.shape, e.tms, *edge_pads(e.op, e.index))
        except TMError as err:
            return err
    return c.memo(("edge", id(e.op), e.index), compute)


@rule("input.missing", on=Graph, section="§3.2")
def input_missing(c: Context, g: Graph) -> None:
    """Every input names a queue or an op."""
    for op in g.ops.values():
        if not sized(op):
            continue
        for i, src in enumerate(op.inputs):
            if c.producer(src, g) is None:
                c.fail(op, f"input {i} {src!r} is neither a queue nor an op", "a queue or an op of this graph", src)


@rule("graph.cross_graph_input", on=Edge, section="§3.5")
def cross_graph_input(c: Context, e: Edge) -> None:
    """An op reads another graph's op only through a queue (grayskull; other archs merge such graphs into one
    temporal epoch)."""
    prod = e.producer
    if isinstance(prod, Op) and e.src not in e.graph.ops and e.src not in c.n.queues and \
            (c.gs or prod.graph == e.graph.name):
        c.fail(e.op, f"input {e.index} {e.src!r} is an op of graph {prod.graph}; across graphs data must go through "
               "a queue", f"an op of {e.graph.name} or a queue", e.src)


# --- TMs -----------------------------------------------------------------------------------------------------------

def _tms_of(x) -> list:
    """(where, line, TMs) of a queue's input_tms or of each sub-op input of a fused op."""
    if isinstance(x, Queue):
        return [(x, None, x.input_tms or [])]
    return [(f"fused_op {x.id} sub-op {s.name}", s.line, tms) for s in x.sub_ops for tms in s.input_tms.values()]


@rule("tm.pad", on=(Queue, Edge, FusedOp), section="§3.2")
def tm_pad(c: Context, x) -> None:
    """Padding only on op inputs, specified once (a pad TM or input_N_pad), followed only by slices; never on
    queue inputs nor in fused ops."""
    if not isinstance(x, Edge):
        message = "padding can't be done on queue inputs" if isinstance(x, Queue) else "pad is not allowed in fused ops"
        for where, line, tms in _tms_of(x):
            for tm in tms:
                if tm[0] == "pad":
                    c.fail(where, message, "no pad", "pad", line=line)
        return
    seen_pad = False
    for tm in x.tms:
        if seen_pad and tm[0] not in ("hslice", "vslice"):
            c.fail(x.op, f"input {x.index}: only slices may follow a pad TM", "hslice/vslice", tm[0])
        if tm[0] == "pad":
            seen_pad = True
            if x.op.input_pad.get(x.index) is not None:
                c.fail(x.op, f"input {x.index}: padding must be specified once", "one pad",
                       f"pad TM and input_{x.index}_pad")


@rule("tm.tile_broadcast", on=(Queue, Edge), section="§3.2")
def tm_tile_broadcast(c: Context, x) -> None:
    """tile_broadcast only inside fused-op schedules."""
    for tm in (x.input_tms or ()) if isinstance(x, Queue) else x.tms:
        if tm[0] != "tile_broadcast":
            continue
        if isinstance(x, Queue):
            c.fail(x, "tile_broadcast is only allowed in fused ops", "no tile_broadcast", "tile_broadcast")
        else:
            c.fail(x.op, f"input {x.index}: tile_broadcast is only allowed in fused ops", "a fused-op schedule",
                   x.op.type)


@rule("tm.transpose", on=(Queue, Edge, FusedOp), section="§3.2")
def tm_transpose(c: Context, x) -> None:
    """Transpose on matmul input 1, unary inputs and (off grayskull) binary input 0; never of an Int32 input, on a
    queue input or inside a fused op."""
    if not isinstance(x, Edge):
        queue = isinstance(x, Queue)
        message = "transpose can't be done on a queue input" if queue else "transpose is not supported inside fused ops"
        for where, line, tms in _tms_of(x):
            for tm in tms:
                if tm[0] == "transpose":
                    c.fail(where, message, "no transpose", "transpose", line=line)
        return
    op = x.op
    for tm in x.tms:
        if tm[0] != "transpose":
            continue
        illegal = transpose_illegal(op.type, x.index, c.arch)
        if illegal is not None:
            c.fail(op, *illegal)
        elif op.type != "matmul" and bool(op.in_df) and op.in_df[0] == DF.Int32:
            c.fail(op, "transpose of an Int32 input is not supported", "not Int32", "Int32")


@rule("tm.shape", on=Edge, ids=TM_SHAPE_RULES, section="§3.2")
def tm_shape(c: Context, e: Edge) -> None:
    """Each TM of an edge applies to the shape before it: slices and stacks divide it, factors >= 1, a z
    broadcast only at t == 1 (also the sub-op TMs of fused ops and the input_tms of queues)."""
    shape = shape_of_edge(c, e)
    if isinstance(shape, TMError):
        c.fail(e.op, f"input {e.index} ({e.src}): {shape}", shape.expected, shape.actual, rule=shape.rule)


# --- shapes --------------------------------------------------------------------------------------------------------

@rule("shape.input", on=Edge, when=lambda e: e.op.type != "fused_op", ids=INPUT_SHAPE_RULES, section="§3.2")
def shape_input(c: Context, e: Edge) -> None:
    """The producer's (t, rt, ct) after unpad, TMs and pad is what the consumer expects on that input: the op's own
    shape (eltwise, matmul bias), (t', rt, m_k*u_kt) / (t', m_k*u_kt, ct) for matmul in0 / in1 (t' = t*z under
    accumulate), one row or column of blocks per core for reduce, ..."""
    shape = shape_of_edge(c, e)
    if shape is None or isinstance(shape, TMError):
        return
    want, rule_id = expected_input(e.op.geometry, e.index)
    if want is not None and shape != want:
        kind = "queue" if isinstance(e.producer, Queue) else "op"
        c.fail(e.op, f"input {e.index} ({kind} {e.src}): post-TM producer (t, rt, ct) {shape} does not match what "
               f"the {e.op.type} consumer expects {want}", want, shape, rule=rule_id)


def _sub_op_geometry(op: Op, s) -> OpGeometry:
    """A fused sub-op runs on its fused op's grid and t with its own blocking and attributes."""
    return OpGeometry(s.type, tuple(op.grid_size), op.t, tuple(s.mblock), tuple(s.ublock), s.attrs)


@rule("shape.fused", on=Edge, when=lambda e: e.op.type == "fused_op", ids=("shape.fused", *TM_SHAPE_RULES),
      section="§3.2")
def shape_fused(c: Context, e: Edge) -> None:
    """A fused op's input matches every sub-op reading it, after the sub-op's own TMs."""
    shape = shape_of_edge(c, e)
    f = c.n.fused_op_of(e.op)
    if shape is None or isinstance(shape, TMError) or f is None:
        return
    name = f"input{e.index}"
    for s in f.sub_ops:
        if not positive(*s.mblock, *s.ublock):
            continue
        for j, x in enumerate(s.inputs):
            if x != name:
                continue
            want, _ = expected_input(_sub_op_geometry(e.op, s), j)
            try:
                got = shape_after_tms(shape, s.input_tms.get(j) or [])
            except TMError as err:
                c.fail(e.op, f"fused op {f.id}: sub-op {s.name} input {j}: {err}", err.expected, err.actual,
                       rule=err.rule)
                continue
            if want is not None and got != want:
                c.fail(e.op, f"input {e.index} ({e.src}) feeds sub-op {s.name} (input {j}) of fused op {f.id} with "
                       f"(t, rt, ct) {got} after its TMs, but the {s.type} sub-op expects {want}", want, got,
                       rule="shape.fused")


def _op_fed(c: Context, q: Queue) -> bool:
    return q.fed_by_op and q.input in c.ops


@rule("shape.queue", on=Queue, ids=("shape.queue", *TM_SHAPE_RULES), section="§3.2")
def shape_queue(c: Context, q: Queue) -> None:
    """A queue fed by an op holds the op's output shape after the queue's input_tms."""
    prod = c.ops.get(q.input) if q.fed_by_op else None
    if prod is None or not (sized(prod) and sized(q)):
        return
    try:
        shape = shape_after_tms(prod.shape, q.input_tms or [])
    except TMError as err:
        c.fail(q, f"input_tms ({prod.name}): {err}", err.expected, err.actual, rule=err.rule)
        return
    if shape != q.shape:
        c.fail(q, f"producer op {prod.name} writes (t, rt, ct) {shape} but the queue holds {q.shape}", q.shape, shape,
               rule="shape.queue")


# --- untilize ------------------------------------------------------------------------------------------------------

def _untilize_queue(c: Context) -> dict:
    """untilize_output op -> the first queue it writes (by queue order)."""
    def compute():
        out: dict = {}
        for qname, q in c.n.queues.items():
            if q.fed_by_op and q.input in c.untilizers and q.input in c.ops:
                out.setdefault(q.input, qname)
        return out
    return c.memo("untilize_queue", compute)


@rule("untilize.queue_grid", on=Queue, section="§3.5")
def untilize_queue_grid(c: Context, q: Queue) -> None:
    """A queue written by an untilize_output op has grid_size [1, 1]."""
    if q.fed_by_op and q.input in c.untilizers and q.input in c.ops and q.grid_size != (1, 1):
        c.fail(q, f"a queue fed by untilize_output op {q.input!r} needs grid_size [1, 1]", [1, 1], list(q.grid_size))


@rule("untilize.queue_count", on=Netlist, section="§3.5")
def untilize_queue_count(c: Context) -> None:
    """An untilize_output op writes exactly one queue."""
    first = _untilize_queue(c)
    for qname, q in c.n.queues.items():
        if q.fed_by_op and q.input in first and first[q.input] != qname:
            c.fail(c.ops[q.input], f"an untilize_output op must feed exactly one queue; it feeds "
                   f"{first[q.input]!r} and {qname!r}", 1, 2)
    for name in sorted(c.untilizers, key=list(c.ops).index):
        if name not in first:
            c.fail(c.ops[name], "an untilize_output op must feed a queue", 1, 0)


@rule("untilize.feeds_op", on=Netlist, section="§3.5")
def untilize_feeds_op(c: Context) -> None:
    """Untilized data (of an untilize_output op or the queue it writes) feeds no op."""
    for e in c.edges():
        if isinstance(e.producer, Op) and e.producer.untilize_output:
            c.fail(e.op, f"input {e.index} {e.src!r} has untilize_output; untilized output may not feed ops",
                   "a tilized producer", e.src)
    for qname in _untilize_queue(c).values():
        for g in c.n.graphs.values():
            for op in g.ops.values():
                if qname in op.inputs:
                    c.fail(op, f"input {qname!r} is written by an untilize_output op; untilized output may not feed "
                           "ops", "a tilized queue", qname)


@rule("queue.input_count", on=Netlist, section="§3.5")
def queue_input_count(c: Context) -> None:
    """The graphs that read a `queue` agree on input_count."""
    counts: dict = {}
    queues = c.n.queues
    for g in c.n.graphs.values():
        for op in g.ops.values():
            for src in op.inputs:
                q = queues.get(src)
                if q is not None and q.type == "queue" and g.input_count is not None:
                    counts.setdefault(src, {}).setdefault(g.input_count, g.name)
    for qname, by_count in counts.items():
        if len(by_count) > 1:
            c.fail(queues[qname], "graphs consuming a queue must have the same input_count", "one input_count",
                   {v: k for k, v in by_count.items()})
