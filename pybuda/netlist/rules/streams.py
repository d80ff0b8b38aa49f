"""Per-core stream resources (shared/reference/data-movement.md §3, §6): the streams, phases and stream buffers
the backend builds for a graph's pipes (`pybuda.arch.movement.core_streams`, on the netlist as
`pybuda.netlist.movement` describes it), each against the device description's limit."""
from __future__ import annotations

from ...arch.movement import CoreBudget, CoreStreams, epoch_streams, fork_mismatch, overuses
from ..model import Graph, Op
from ..movement import fed_queues, moving_op
from .objects import outside, placed
from .registry import Context, rule, sized


def graph_streams(c: Context, g: Graph) -> dict:
    """{(op, core): CoreStreams} of a graph's pipes (computed once per graph); none where they cannot be built: a
    graph or queue without a target device, an op outside the worker grid, a queue of more buffers than the device
    has cores (`graph.target_device`, `queue.target_device`, `grid.bounds` and `queue.alloc_count` report those; a
    mutated netlist's grid of a million cores would otherwise be enumerated core by core)."""
    def compute():
        cores = c.spec.grid_rows * c.spec.grid_cols
        if not g.devices or any(not q.devices or q.grid_size[0] * q.grid_size[1] > cores for q in c.n.queues.values()) \
                or any(placed(op) and outside(c, op) for op in g.ops.values()):
            return {}
        return epoch_streams(graph_moving(c, g))
    return c.memo(("streams", g.name), compute)


def graph_moving(c: Context, g: Graph) -> list:
    """The graph's sized ops as data movement sees them (`pybuda.netlist.movement.moving_op`), computed once."""
    def compute():
        written = fed_queues(c.n, g.ops)
        return [moving_op(c.n, g, op, c.n.geometry_of(op), c.spec, lambda q: g.name in c.prologue.get(q, ()),
                          written.get(op.name, [])) for op in g.ops.values() if sized(op)]
    return c.memo(("moving", g.name), compute)


def _per_core(c: Context, g: Graph, *resources: str) -> None:
    """A violation for every core of the graph over its limit of one of `resources` (`STREAM_LIMITS`)."""
    budget = {name: CoreBudget(op.overlay_size or 0) for name, op in g.ops.items()}
    for overuse in overuses(c.spec, graph_streams(c, g), lambda name: budget.get(name, CoreBudget()), resources):
        if overuse.op in g.ops:
            c.fail(g.ops[overuse.op], str(overuse), f"<= {overuse.limit}", overuse.count)


@rule("streams.multicast", on=Graph, section="§3.2", needs_device=True)
def streams_multicast(c: Context, g: Graph) -> None:
    """The multicast pipes a core hosts fit its gather/multicast stream IDs (3 on grayskull, 4 on wormhole_b0)."""
    _per_core(c, g, "multicast")


@rule("streams.extra", on=Graph, section="§3.2", needs_device=True)
def streams_extra(c: Context, g: Graph) -> None:
    """A core's extra streams (forked output buffers, gathers, DRAM reads, pre-TM prologue buffers) fit the 24
    general-purpose stream IDs."""
    _per_core(c, g, "extra")


@rule("streams.dram_readers", on=Graph, section="§3.2", needs_device=True)
def streams_dram_readers(c: Context, g: Graph) -> None:
    """A core runs at most 8 DRAM-reading streams."""
    _per_core(c, g, "dram_readers")


@rule("streams.dram_writers", on=Graph, section="§3.2", needs_device=True)
def streams_dram_writers(c: Context, g: Graph) -> None:
    """A core runs at most 8 DRAM-writing streams."""
    _per_core(c, g, "dram_writers")


@rule("streams.dram_buffers", on=Graph, section="§6", needs_device=True)
def streams_dram_buffers(c: Context, g: Graph) -> None:
    """A core reads at most 39 distinct DRAM buffers (the legacy compiler's kMaxDRAMInQueues)."""
    _per_core(c, g, "dram_buffers")


@rule("streams.fan_out", on=Graph, section="§6", needs_device=True)
def streams_fan_out(c: Context, g: Graph) -> None:
    """A producer core feeds at most 16 destinations (pipes; a multicast counts once; kMaxFanOutStreams)."""
    _per_core(c, g, "fan_out")


@rule("overlay.phases", on=Graph, section="§3.4", needs_device=True)
def overlay_phases(c: Context, g: Graph) -> None:
    """The stream phases a core consumes and produces each fit half its overlay blob (38 B per phase: 862 with
    the default 64 KiB blob, more with the op's overlay_size)."""
    _per_core(c, g, "consumer_phases", "producer_phases")


@rule("streams.consumers", on=Op, when=sized, section="§6", needs_device=True)
def streams_consumers(c: Context, op: Op) -> None:
    """An op feeds at most 8 data users, ops and queues (the legacy compiler's kMaxDRAMOutQueues)."""
    g = c.graph_of[id(op)]
    users = {o.name for o in g.ops.values() if op.name in o.inputs} | set(fed_queues(c.n, [op.name]).get(op.name, []))
    if len(users) > c.spec.op_consumers:
        c.fail(op, f"op {op.name} feeds {len(users)} data users; an op feeds at most {c.spec.op_consumers}",
               f"<= {c.spec.op_consumers}", len(users))


@rule("streams.inputs", on=Op, section="§3.1", needs_device=True)
def streams_inputs(c: Context, op: Op) -> None:
    """An op has at most 16 inputs (input operand stream IDs 0-15)."""
    if len(op.inputs) > c.spec.input_operands:
        c.fail(op, f"op {op.name} has {len(op.inputs)} inputs; a core has {c.spec.input_operands} input operand "
               "streams", f"<= {c.spec.input_operands}", len(op.inputs))


@rule("streams.forked_read", on=Graph, section="§3.1", needs_device=True)
def streams_forked_read(c: Context, g: Graph) -> None:
    """An op sharing another op's DRAM read (`forked_dram_inputs`) reads the queue the same way as that op, which
    reads it itself: the same TMs, tile format, grid, t, blocking and kernel input granule."""
    if not graph_streams(c, g):         # not computable here: the rules graph_streams names report why
        return
    ops = {o.name: o for o in graph_moving(c, g)}
    for op in ops.values():
        for k, inp in enumerate(op.inputs):
            if inp.fork is not None and inp.fork in ops:    # a reader outside the graph: op.forked_dram_input
                why = fork_mismatch(op, k, ops)
                if why is not None:
                    c.fail(g.ops[op.name], f"forked dram input {inp.src!r}: {why}",
                           "an op of the graph that reads the queue itself the same way", inp.fork)


def stream_buffer_bytes(c: Context, op: Op) -> int:
    """The most L1 the stream buffers of one core of `op` take (DRAM receive, gather relay, multicast; §4.6)."""
    g = c.graph_of.get(id(op))
    if g is None or c.spec is None:
        return 0
    usage: dict = graph_streams(c, g)
    return max((u.buffer_bytes for (name, _), u in usage.items() if name == op.name), default=0)


__all__ = ["CoreStreams", "graph_streams", "stream_buffer_bytes"]
