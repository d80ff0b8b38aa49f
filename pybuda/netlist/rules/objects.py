"""Rules on single objects (netlist-format.md §1.1, §3.1, §3.7): sections, queues, graphs and ops, names, grid."""
from __future__ import annotations

from ...arch.operands import input_count
from ...arch.optypes import OP_TYPES
from ..model import Graph, Netlist, Op, Queue
from .registry import Context, positive, rule, sized


@rule("netlist.empty_section", on=Netlist, section="§1.1")
def empty_section(c: Context) -> None:
    """The queues, graphs and programs sections each have at least one entry."""
    n = c.n
    for name, items in (("queues", n.queues), ("graphs", n.graphs), ("programs", n.programs)):
        if not items:
            c.fail("netlist", f"the {name} section is empty; the backend needs at least one",
                   f"at least one entry in {name}", 0, line=0)


# --- queues --------------------------------------------------------------------------------------------------------

@rule("queue.dims", on=Queue, section="§3.1")
def queue_dims(c: Context, q: Queue) -> None:
    """t, mblock, ublock and grid_size > 0."""
    if not positive(q.t, *q.mblock, *q.ublock):
        c.fail(q, "t, mblock and ublock must be > 0", "> 0",
               {"t": q.t, "mblock": list(q.mblock), "ublock": list(q.ublock)})
    if not positive(*q.grid_size):
        c.fail(q, "grid_size must be > 0", "> 0", list(q.grid_size))


@rule("queue.entries", on=Queue, section="§3.1")
def queue_entries(c: Context, q: Queue) -> None:
    """entries >= 0."""
    if q.entries < 0:
        c.fail(q, "entries must be >= 0", ">= 0", q.entries)


@rule("queue.target_device", on=Queue, section="§3.1")
def queue_target_device(c: Context, q: Queue) -> None:
    """target_device >= 0 (a list: at least one device)."""
    if not q.devices:
        c.fail(q, "target_device lists no device", "a device id >= 0 or a non-empty list of them", q.target_device)
    if any(d < 0 for d in q.devices):
        c.fail(q, "target_device must be >= 0", ">= 0", q.target_device)


@rule("device.target_device", on=Netlist, section="§3.7")
def device_target_device(c: Context) -> None:
    """A queue's or graph's target_device exists on the system (with a known chip count)."""
    if c.chips is None:
        return
    for x in (*c.n.queues.values(), *c.n.graphs.values()):
        if any(d >= c.chips for d in x.devices):
            c.fail(x, f"target_device {x.target_device} does not exist on a {c.chips}-chip system", f"< {c.chips}",
                   x.target_device)


@rule("queue.alloc_count", on=Queue, section="§3.1")
def queue_alloc_count(c: Context, q: Queue) -> None:
    """One DRAM or host allocation per grid buffer."""
    buffers = q.grid_size[0] * q.grid_size[1]
    if len(q.allocations) != buffers:
        c.fail(q, f"one {q.loc} allocation per grid buffer is needed", buffers, len(q.allocations))


@rule("queue.loc", on=Queue, section="§3.1")
def queue_loc(c: Context, q: Queue) -> None:
    """Allocations only of the queue's loc (no host list on a DRAM queue, no dram list on a host queue)."""
    if q.loc == "dram" and q.host is not None or q.loc == "host" and q.dram is not None:
        c.fail(q, f"loc is {q.loc} but the queue also lists {'host' if q.loc == 'dram' else 'dram'} allocations",
               q.loc, "both")


@rule("arch.tile_dim", on=(Queue, Op), when=lambda x: not isinstance(x, Op) or sized(x), section="§3.4")
def arch_tile_dim(c: Context, x) -> None:
    """Grayskull queues and ops use 32x32 tiles only."""
    if c.gs and x.tile_dim is not None and x.tile_dim != (32, 32):
        c.fail(x, "grayskull supports only 32x32 tiles", [32, 32], list(x.tile_dim))


@rule("arch.ports", on=Queue, section="§3.4")
def arch_ports(c: Context, q: Queue) -> None:
    """read_ports / write_ports only on wormhole_b0."""
    for ports_name in ("read_ports", "write_ports"):
        if getattr(q, ports_name) is not None and c.arch != "wormhole_b0":
            c.fail(q, f"{ports_name} is only available on wormhole_b0", "wormhole_b0", c.arch)


@rule("queue.ports", on=Queue, section="§3.1")
def queue_ports(c: Context, q: Queue) -> None:
    """read_ports / write_ports: one entry in 0..2 per DRAM buffer."""
    buffers = q.grid_size[0] * q.grid_size[1]
    for ports_name in ("read_ports", "write_ports"):
        ports = getattr(q, ports_name)
        if ports is None:
            continue
        if q.loc != "dram" or len(ports) != buffers:
            c.fail(q, f"{ports_name} needs one entry per DRAM buffer", buffers, len(ports))
        if any(not 0 <= p <= 2 for p in ports):
            c.fail(q, f"{ports_name} values must be in 0..2", "0..2", ports)


@rule("device.dram_channel", on=Queue, section="§3.7", needs_device=True)
def device_dram_channel(c: Context, q: Queue) -> None:
    """DRAM buffers on channels the device has."""
    if q.loc != "dram":
        return
    for ch, _ in q.allocations:
        if not 0 <= ch < c.spec.dram_channels:
            c.fail(q, f"DRAM channel {ch} does not exist on {c.arch}", f"0..{c.spec.dram_channels - 1}", ch)


@rule("device.host_channel", on=Queue, section="§3.7", needs_device=True)
def device_host_channel(c: Context, q: Queue) -> None:
    """Grayskull host queues use channel 0."""
    if q.loc == "host" and c.gs:
        for ch, _ in q.allocations:
            if ch != 0:
                c.fail(q, "grayskull host queues must use channel 0", 0, ch)


@rule("queue.address", on=Queue, section="§3.1", needs_device=True)
def queue_address(c: Context, q: Queue) -> None:
    """Buffer addresses >= 0."""
    for _, addr in q.allocations:
        if addr < 0:
            c.fail(q, "addresses must be >= 0", ">= 0", addr)


@rule("queue.producer_missing", on=Queue, section="§3.1")
def queue_producer_missing(c: Context, q: Queue) -> None:
    """The op a queue names as its input exists."""
    if q.fed_by_op and q.input not in c.ops:
        c.fail(q, f"producer op {q.input!r} of the queue does not exist", "an op name or HOST", q.input)


@rule("queue.alias", on=Queue, when=lambda q: q.alias is not None, section="§3.5")
def queue_alias(c: Context, q: Queue) -> None:
    """An alias names another ram of this netlist that is not itself an alias, with the same allocation and as
    many elements."""
    if q.alias == q.name:
        c.fail(q, "a queue cannot alias itself", "another ram", q.alias)
        return
    other = c.n.queues.get(q.alias)
    if other is None:
        c.fail(q, f"alias {q.alias!r} is not a queue", "a ram of this netlist", q.alias)
        return
    if other.alias is not None:
        c.fail(q, f"alias {q.alias!r} is itself an alias", "a ram that is not an alias", other.alias)
    if q.type != "ram" or other.type != "ram":
        c.fail(q, "only a ram may alias a ram", "ram -> ram", f"{q.type} -> {other.type}")
    if q.allocations != other.allocations:
        c.fail(q, f"an alias must have the same allocation as {q.alias!r}", other.allocations, q.allocations)
    mine, theirs = _elements(q), _elements(other)
    if mine != theirs:
        c.fail(q, f"an alias must hold as many elements (x entries) as {q.alias!r}", theirs, mine)


def _elements(q: Queue) -> int:
    h, w = q.effective_tile_dim
    return q.entries * q.buffer_tiles * q.grid_size[0] * q.grid_size[1] * h * w


# --- graphs and ops ------------------------------------------------------------------------------------------------

@rule("graph.target_device", on=Graph, section="§3.1")
def graph_target_device(c: Context, g: Graph) -> None:
    """target_device >= 0 (a list: at least one device)."""
    if not g.devices:
        c.fail(g, "target_device lists no device", "a device id >= 0 or a non-empty list of them", g.target_device)
    if any(d < 0 for d in g.devices):
        c.fail(g, "target_device must be >= 0", ">= 0", g.target_device)


@rule("graph.input_count", on=Graph, section="§3.1")
def graph_input_count(c: Context, g: Graph) -> None:
    """input_count set and >= 1."""
    if g.input_count is None or g.input_count < 1:
        c.fail(g, "input_count must be set and >= 1", ">= 1", g.input_count)


@rule("name.duplicate_op", on=Netlist, section="§3.1")
def name_duplicate_op(c: Context) -> None:
    """Op names are unique across graphs."""
    seen: dict = {}
    for gname, g in c.n.graphs.items():
        for name, op in g.ops.items():
            if name in seen:
                c.fail(op, f"op names must be globally unique; {name!r} is also in graph {seen[name]}",
                       "a unique name", name)
            seen.setdefault(name, gname)


@rule("name.op_queue_clash", on=Op, section="§3.1")
def name_op_queue_clash(c: Context, op: Op) -> None:
    """No op has a queue's name."""
    if op.name in c.n.queues:
        c.fail(op, f"{op.name!r} names both an op and a queue", "a unique name", op.name)


@rule("op.type", on=Op, section="§3.1")
def op_type(c: Context, op: Op) -> None:
    """A backend op type (netlist-format.md §1.6)."""
    if op.type not in OP_TYPES:
        c.fail(op, f"unknown op type {op.type!r}", "a backend op type", op.type)


@rule("op.dims", on=Op, section="§3.1")
def op_dims(c: Context, op: Op) -> None:
    """t, mblock, ublock and grid_size > 0 (the rules that need an op's shape skip an op that breaks this)."""
    if not positive(op.t, *op.mblock, *op.ublock):
        c.fail(op, "t, mblock and ublock must be > 0", "> 0",
               {"t": op.t, "mblock": list(op.mblock), "ublock": list(op.ublock)})
    elif not positive(*op.grid_size):
        c.fail(op, "grid_size must be > 0", "> 0", list(op.grid_size))


@rule("op.in_df_count", on=Op, when=sized, section="§3.1")
def op_in_df_count(c: Context, op: Op) -> None:
    """in_df has one data format per input."""
    if len(op.in_df) != len(op.inputs):
        c.fail(op, "in_df needs one data format per input", len(op.inputs), len(op.in_df))


@rule("op.input_buf_count", on=Op, when=sized, section="§3.1")
def op_input_buf_count(c: Context, op: Op) -> None:
    """input_buf_min_size_tiles and input_dram_io_buf_size_tiles have one entry per input."""
    for name in ("input_buf_min_size_tiles", "input_dram_io_buf_size_tiles"):
        values = getattr(op, name)
        if values is not None and len(values) != len(op.inputs):
            c.fail(op, f"{name} needs one entry per input", len(op.inputs), len(values))


@rule("op.input_count", on=Op, when=sized, section="§3.1")
def op_input_count(c: Context, op: Op) -> None:
    """An op type with a fixed input count has that many inputs."""
    want = input_count(op.geometry)
    if want is not None and len(op.inputs) != want:
        c.fail(op, f"a {op.type} op takes {want} inputs", want, len(op.inputs))


@rule("op.buf_size_mb", on=Op, when=sized, section="§3.1")
def op_buf_size_mb(c: Context, op: Op) -> None:
    """buf_size_mb >= 0, 1 or even, and buf_size_mb/2 and t divide one another."""
    if op.buf_size_mb < 0:
        c.fail(op, "buf_size_mb must be >= 0", ">= 0", op.buf_size_mb)
    elif op.buf_size_mb > 1 and op.buf_size_mb % 2:
        c.fail(op, "buf_size_mb must be 1 or even", "1 or even", op.buf_size_mb)
    elif op.buf_size_mb > 1:
        half = op.buf_size_mb // 2
        if op.t % half and half % op.t:
            c.fail(op, f"buf_size_mb/2 = {half} and t = {op.t} must divide one another",
                   f"a divisor or multiple of t={op.t}", half)


@rule("op.matmul_ublock_order", on=Op, when=sized, section="§3.1")
def op_matmul_ublock_order(c: Context, op: Op) -> None:
    """Matmul ops use ublock_order r."""
    if op.type == "matmul" and op.ublock_order != "r":
        c.fail(op, "matmul ops need ublock_order r", "r", op.ublock_order)


@rule("op.buffer_mblock", on=Op, when=sized, section="§3.1")
def op_buffer_mblock(c: Context, op: Op) -> None:
    """Buffer ops have mblock_m = 1."""
    if op.type == "buffer" and op.mblock[0] != 1:
        c.fail(op, "buffer ops need mblock_m = 1", 1, op.mblock[0])


@rule("op.forked_dram_input", on=Op, when=lambda op: sized(op) and op.forked_dram_inputs is not None,
      section="§3.1")
def op_forked_dram_input(c: Context, op: Op) -> None:
    """A forked DRAM input is a queue input of the op, forked to an op of the same graph."""
    for qn, other in op.forked_dram_inputs:
        if qn not in c.n.queues or qn not in op.inputs:
            c.fail(op, f"forked dram input {qn!r} must be a queue input of the op", "a queue input of the op", qn)
        g = c.n.graphs.get(op.graph)
        if g is not None and other not in g.ops:
            c.fail(op, f"forked dram input {qn!r}: op {other!r} must be in the same graph", f"an op of {op.graph}",
                   other)


@rule("dest.ublock_limit", on=Op, section="§3.3", needs_device=True)
def dest_ublock_limit(c: Context, op: Op) -> None:
    """ublock_rt x ublock_ct fits the dest register: the device's tiles for the op's acc_df (8 with a 16-bit
    dest, 4 with Float32/Int32); fused sub-ops too."""
    limit = c.spec.dest_tiles(op.acc_df)
    tiles = op.ublock[0] * op.ublock[1]
    if sized(op) and tiles > limit:
        c.fail(op, f"ublock {list(op.ublock)} = {tiles} tiles does not fit the dest register ({limit} tiles with "
               f"acc_df {op.acc_df.value if op.acc_df else 'default'})", f"<= {limit} tiles", tiles)
    f = c.n.fused_op_of(op) if op.type == "fused_op" else None
    for s in (f.sub_ops if f is not None else ()):
        if positive(*s.mblock, *s.ublock) and s.ublock[0] * s.ublock[1] > limit:
            c.fail(op, f"fused sub-op {s.name}: ublock {list(s.ublock)} does not fit the dest register",
                   f"<= {limit} tiles", s.ublock[0] * s.ublock[1])


# --- grid ----------------------------------------------------------------------------------------------------------

def placed(op: Op) -> bool:
    """A Tensix op with a location and a positive grid."""
    return op.grid_loc is not None and op.is_tensix and positive(*op.grid_size)


@rule("grid.bounds", on=Op, when=placed, section="§3.7")
def grid_bounds(c: Context, op: Op) -> None:
    """A Tensix op's cores (grid_transpose applied) lie inside the device's worker grid."""
    r0, c0 = op.grid_loc
    h, w = op.footprint
    if r0 < 0 or c0 < 0:
        c.fail(op, "grid_loc must be >= 0", ">= [0, 0]", list(op.grid_loc))
    elif c.spec is not None and outside(c, op):
        rows, cols = c.spec.grid_rows, c.spec.grid_cols
        c.fail(op, f"{h}x{w} cores at {list(op.grid_loc)} exceed the {rows}x{cols} worker grid of {c.arch}",
               f"row+rows <= {rows}, col+cols <= {cols}", [r0 + h, c0 + w])


def outside(c: Context, op: Op) -> bool:
    """Whether a placed op's cores leave the device's worker grid (`grid.bounds`)."""
    r0, c0 = op.grid_loc
    h, w = op.footprint
    return r0 < 0 or c0 < 0 or (c.spec is not None and (r0 + h > c.spec.grid_rows or c0 + w > c.spec.grid_cols))


@rule("grid.overlap", on=Graph, section="§3.5")
def grid_overlap(c: Context, g: Graph) -> None:
    """The Tensix ops of a graph occupy disjoint cores (grid_transpose applied)."""
    used: dict = {}
    for name, op in g.ops.items():
        if not placed(op) or outside(c, op):
            continue
        r0, c0 = op.grid_loc
        h, w = op.footprint
        clash = None
        for r in range(r0, r0 + h):
            for cc in range(c0, c0 + w):
                other = used.get((r, cc))
                if other is not None and clash is None:
                    clash = (other, (r, cc))
                used[(r, cc)] = name
        if clash is not None:
            c.fail(op, f"overlaps op {clash[0]!r} in graph {g.name} at core {list(clash[1])}", "disjoint cores",
                   list(clash[1]))
