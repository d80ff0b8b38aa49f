"""Data movement as the backend builds it (shared/reference/data-movement.md §1-§3): the pipes and streams of an
epoch, derived once from a description of its ops and queues (`MovingOp`, `QueueLayout`) that the netlist
(`pybuda.netlist.movement`) and the balancer's plan (`pybuda.balancer.plan_cost`) both give; the timing
(`pybuda.arch.perf`), the validator's resource rules and the reports read what this module derives.

Pipes (§2): one per consumer group of an op input (a matmul's first operand per grid row, multicast along the row;
its second per grid column; any other input per core): it gathers its tiles from the producer cores (or DRAM
buffers, or the host) that hold them and delivers them, multicasting where a group spans several cores. A pipe
runs on the producer core when it is a unicast from one op core, else on the consumer core (a multicast on the
edge core of its row or column). An op's output to a DRAM queue is one pipe per core into the buffers it feeds.

Prologue (§2.6): a prologued queue input stays transformed (post-TM, loaded once) when the post-TM tiles one
consumer group needs fit its kernel input buffer (`kernel_input_buffer_tiles`, which counts
input_buf_min_size_tiles); otherwise each queue buffer is copied raw into the L1 of one consumer core (pre-TM)
and the TM pipes re-stream it from those cores every input (`prologue_layout`).

NoC (§1): with core locations known, every pipe leg is routed on a NoC (`pybuda.arch.noc`) and its bytes per input
are summed per link and NIU; without them (the balancer comparing plans before placement) only the NIUs of the
cores it leaves and enters are loaded (a lower bound of the routed loads). An op's data-movement time per input
is its busiest link over the pipes into and out of it (`link_cycles`).

DRAM (§2.6): a channel serves the tiles the epoch's pipes read from and write to the buffers it holds
(`channel_bytes`): a matmul operand streamed from DRAM is read once per grid row (column) and multicast. A forked
DRAM input (the netlist's `forked_dram_inputs`, `forked_reads`) is not read again: the op that reads the queue the
same way forwards each group's tiles from the core its read lands on.

Streams (§3): per core, the multicast pipes it hosts, the extra streams (forked output buffers, gathers, DRAM
reads, pre-TM prologue buffers), DRAM reader and writer streams, distinct DRAM buffers it reads, destinations its
output feeds, stream phases and the L1 of the stream buffers pipegen adds (`core_streams`), each against its limit
on the device (`STREAM_LIMITS`, `overuses`; the buffers against the L1 the op's own buffers leave): what the
validator checks and the balancer keeps its plans within (`heaviest_input` names the input to change).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Callable, Iterable, Sequence

from ..device import DeviceSpec
from . import noc
from .operands import OpGeometry, input_buffer_tiles, input_granule
from .tilemap import edge_reads

MAX_OPTIMIZED_GATHER_STREAMS = 3     # net2pipe MAX_STREAMS_USED_FOR_OPTIMIZED_GATHER (§3.3)
DRAM_RECEIVE_BYTES = 26 * 1024       # a DRAM-reading stream's buffer: at least this, or the pipe's data (§4.6)
GATHER_RELAY_TILES = 12              # gather relay buffers: max(4, 12 // n) tiles per input of n (§4.6)
MULTICAST_TILES = 12                 # a multicast stream fed from one buffer (§4.6)


@dataclasses.dataclass(frozen=True)
class QueueLayout:
    """A queue as data movement sees it: one entry's (t, rt, ct) in tiles, its buffer grid, the DRAM channel of
    each buffer (`DeviceSpec.system_channel` ids, row-major; empty for a host queue), its chip and the bytes of
    one of its tiles."""

    name: str
    shape: tuple
    grid: tuple
    channels: tuple = ()
    chip: int = 0
    tile_bytes: int = 2080

    @property
    def host(self) -> bool:
        return not self.channels


@dataclasses.dataclass(frozen=True)
class MovingInput:
    """One input of an op: its producer (`src`, an op of the epoch when `queue` is None), the edge's TMs, unpad
    and pad ((rt, ct) or None), the tile bytes it arrives in, whether it is prologued, input_buf_min_size_tiles,
    input_dram_io_buf_size_tiles and `fork`: the op of the epoch whose read of the same DRAM queue it shares."""

    src: str
    tms: tuple = ()
    queue: QueueLayout | None = None
    unpad: tuple | None = None
    pad: tuple | None = None
    tile_bytes: int = 2080
    prologue: bool = False
    min_buffer_tiles: int = 0
    dram_io_tiles: int = 0
    fork: str | None = None


@dataclasses.dataclass(frozen=True, eq=False)
class MovingOp:
    """An op of an epoch as data movement sees it: its geometry, inputs, the queues it writes, where it sits
    (`loc`: its first core (row, col), None before placement; `transpose`: grid_transpose) and its chip."""

    name: str
    geometry: OpGeometry
    inputs: tuple = ()
    writes: tuple = ()
    loc: tuple | None = None
    transpose: bool = False
    chip: int = 0


@dataclasses.dataclass(frozen=True)
class Pipe:
    """One pipe per input: `bytes` moving from its `sources` ((kind, name, unit, tiles): kind "op" (unit = the
    producer core (row, col)), "dram" (a queue buffer (row, col)), "host", "hold" (a pre-TM prologue buffer on
    the consumer's core) or "fork" (the core op `name`'s read of the same DRAM queue lands on)) to `dests` (the
    consumer op's cores (row, col), or ("dram", queue, buffer) for an output pipe), owned by op `consumer` (its
    input `index`; -1 for the op's output). `multicast`: one copy travels a row or column; `on_producer`: the pipe
    runs on its producer core; `phases`: stream phases of the pipe."""

    consumer: str
    index: int
    sources: tuple
    dests: tuple
    tiles: float
    bytes: float
    multicast: bool = False
    on_producer: bool = False
    phases: int = 1

    @property
    def producers(self) -> set:
        """The ops whose cores the pipe reads (a forked DRAM read's: the op whose read it shares)."""
        return {name for kind, name, _, _ in self.sources if kind in ("op", "fork")}


def _role(op: OpGeometry, index: int) -> str:
    """How input `index` is grouped: "rows" (a matmul's first operand, read by every core of a grid row), "cols"
    or "both" (per core)."""
    if op.identity:
        return "cols" if index == 1 else "rows"
    if op.type in ("matmul", "depthwise") and index in (0, 1):
        return "rows" if index == 0 else "cols"
    if index < len(op.input_roles):
        return op.input_roles[index]
    return "both"


def _site(pipe: Pipe, consumer: MovingOp | None) -> tuple:
    """The logical consumer core a pipe runs on (`_pipe_core`), or its one destination where it runs on the
    producer."""
    return pipe.dests[0] if pipe.on_producer or consumer is None else _pipe_core(pipe, consumer)


def _dests(role: str, group: tuple, grid: tuple) -> tuple:
    """The consumer cores of a group."""
    gr, gc = grid
    if role == "rows":
        return tuple((group[1], c) for c in range(gc))
    if role == "cols":
        return tuple((r, group[1]) for r in range(gr))
    return ((group[1], group[2]),)


def kernel_input_buffer_tiles(op: OpGeometry, index: int, tile_bytes: int, min_tiles: int = 0) -> int:
    """Tiles of the kernel input buffer of input `index` (§4.4): two granules, at least the latency floor, at least
    input_buf_min_size_tiles; a kernel-broadcast input holds its broadcast tiles twice."""
    kb = op.attrs.kernel_broadcast_tiles(index)
    if kb:
        return max(2 * kb, min_tiles)
    return input_buffer_tiles(input_granule(op, index), tile_bytes, min_tiles=min_tiles)


def _producer_layout(inp: MovingInput, ops: dict) -> tuple | None:
    """(shape, grid) of the producer of an input: a queue entry over its buffers, or an op's output over its
    cores; None if the producer is not known."""
    if inp.queue is not None:
        return inp.queue.shape, inp.queue.grid
    producer = ops.get(inp.src)
    if producer is None:
        return None
    return producer.geometry.shape, producer.geometry.grid


def in_place(op: OpGeometry, index: int) -> bool:
    """An input the kernel reads in place from its prologue buffer (an identity matmul's sparse tiles and
    encoding): always transformed."""
    return op.identity and index != 1


def post_tm_fits(op: OpGeometry, index: int, need_tiles: float, tile_bytes: int, min_tiles: int = 0) -> bool:
    """Whether a prologued input stays transformed (§2.6): the post-TM tiles one consumer group needs per input
    fit its kernel input buffer (which input_buf_min_size_tiles can enlarge)."""
    return in_place(op, index) or need_tiles <= kernel_input_buffer_tiles(op, index, tile_bytes, min_tiles)


def prologue_layout(op: OpGeometry, index: int, queue_shape: tuple, queue_grid: tuple, tms: tuple,
                    unpad: tuple | None, pad: tuple | None, tile_bytes: int, min_tiles: int) -> tuple:
    """(post_tm, raw tiles per core) of a prologued queue input as the backend lays it out (§2.6): transformed
    (`post_tm_fits` of the post-TM tiles, or of a kernel broadcast's tiles; the kernel input buffer holds it, no
    extra L1), else the raw queue buffers copied into the
    consumer cores (buffer (r, c) on core (r mod rows, c mod cols)) and re-streamed every input: the busiest core's
    raw tiles are held besides its input buffer."""
    reads = edge_reads(queue_shape, queue_grid, tms, unpad, pad, op.grid, _role(op, index))
    need = op.attrs.kernel_broadcast_tiles(index) or max((g.tiles for g in reads), default=0)
    if post_tm_fits(op, index, need, tile_bytes, min_tiles):
        return True, 0
    return False, max(_held_tiles(queue_shape, queue_grid, op.grid).values(), default=0)


def prologue_bytes(op: OpGeometry, index: int, inp: MovingInput, read_bytes: float) -> float:
    """Bytes one core of `op` loads from DRAM before its epoch for prologued input `index` (§2.6): what it reads
    per input (`read_bytes`) where the backend keeps the queue transformed, else the raw tiles the busiest core
    holds, which the edge's TM pipes re-stream from L1 every input (a weight broadcast over t is loaded once, not
    once per t)."""
    if inp.queue is None or in_place(op, index):
        return read_bytes
    post_tm, raw = prologue_layout(op, index, inp.queue.shape, inp.queue.grid, inp.tms, inp.unpad, inp.pad,
                                   inp.tile_bytes, inp.min_buffer_tiles)
    return read_bytes if post_tm else raw * inp.tile_bytes


def _held_tiles(queue_shape: tuple, queue_grid: tuple, grid: tuple) -> dict:
    """Raw tiles each core of a grid holds of a pre-TM prologued queue: buffer (r, c) on core (r mod rows,
    c mod cols)."""
    t, rt, ct = queue_shape
    qr, qc = queue_grid
    per_buffer = t * (rt // max(qr, 1)) * (ct // max(qc, 1))
    held: dict = {}
    for r in range(qr):
        for c in range(qc):
            core = (r % grid[0], c % grid[1])
            held[core] = held.get(core, 0) + per_buffer
    return held


def input_pipes(op: MovingOp, index: int, ops: dict) -> list[Pipe]:
    """The pipes of input `index` of `op` per input (none for a transformed prologue: it moves once)."""
    inp = op.inputs[index]
    layout = _producer_layout(inp, ops)
    if layout is None:
        return []
    geom = op.geometry
    shape, grid = layout
    queue = inp.queue
    if queue is not None and inp.prologue:
        post_tm, _ = prologue_layout(geom, index, shape, grid, inp.tms, inp.unpad, inp.pad, inp.tile_bytes,
                                     inp.min_buffer_tiles)
        if post_tm:
            return []
    role = _role(geom, index)
    kb = geom.attrs.kernel_broadcast_tiles(index)
    pipes = []
    for reads in edge_reads(shape, grid, inp.tms, inp.unpad, inp.pad, geom.grid, role):
        if not reads.tiles:
            continue
        dests = _dests(role, reads.group, geom.grid)
        scale = min(1.0, kb / reads.tiles) if kb else 1.0    # kernel broadcast: only the broadcast tiles move
        if queue is None:
            sources = tuple(("op", inp.src, unit, n * scale) for unit, n in reads.sources)
        elif inp.prologue:       # pre-TM: from the consumer cores that hold the raw buffers
            sources = tuple(("hold", op.name, (unit[0] % geom.grid[0], unit[1] % geom.grid[1]), n * scale)
                            for unit, n in reads.sources)
        else:
            sources = tuple(("host" if queue.host else "dram", queue.name, unit, n * scale)
                            for unit, n in reads.sources)
        tiles = reads.tiles * scale
        multicast = len(dests) > 1
        on_producer = not multicast and queue is None and len(reads.sources) == 1
        pipes.append(Pipe(op.name, index, sources, dests, tiles, tiles * inp.tile_bytes, multicast, on_producer,
                          reads.phases))
    return _forwarded(op, index, pipes, ops) if inp.fork is not None else pipes


def receive_floor(op: MovingOp, read_bytes: Sequence[float], link_bw: float) -> float:
    """Cycles per input that one core of `op` needs at least to receive its inputs, wherever the op and its
    producers sit (`pipe_links`): a row (column) multicast reaches every core of the row (column) but the pipe's
    own through that core's NIU on the multicast's NoC, and a core's inputs all arrive through its two NIUs (one
    per NoC) at `link_bw` each. Counted at a core that runs no multicast pipe (row 0, column 1 where there are
    two columns): the row multicasts' bytes on one NIU, the column multicasts' on the other, every input's bytes
    over both. `read_bytes`: per input, the bytes one core reads per input (`operands.tiles_read_per_core`);
    prologued and kernel-broadcast inputs are left out (their pipes may stay in the core or move less)."""
    geom = op.geometry
    rows, cols = geom.grid
    by_role = {"rows": 0.0, "cols": 0.0, "both": 0.0}
    for k, (inp, nbytes) in enumerate(zip(op.inputs, read_bytes)):
        if inp.prologue or geom.attrs.kernel_broadcast_tiles(k):
            continue
        role = _role(geom, k)
        multicast = (role == "rows" and cols > 1) or (role == "cols" and rows > 1)
        by_role[role if multicast else "both"] += nbytes
    return max(by_role["rows"], by_role["cols"], sum(by_role.values()) / 2) / link_bw


def _read_key(op: MovingOp, index: int) -> tuple | None:
    """How input `index` reads its DRAM queue, as far as two ops must agree to share the read: the queue, the
    edge's TMs, unpad, pad and tile format, the op's chip, grid, t and blocking, the input's role and the tiles
    its kernel takes at a time; None for an input that does not stream a DRAM queue (an op of the epoch, the
    host, a prologue)."""
    inp = op.inputs[index]
    if inp.queue is None or inp.queue.host or inp.prologue:
        return None
    geom = op.geometry
    return (inp.queue.name, inp.tms, inp.unpad, inp.pad, inp.tile_bytes, inp.min_buffer_tiles, op.chip, geom.grid,
            geom.t, geom.mblock, geom.ublock, _role(geom, index), input_granule(geom, index),
            geom.attrs.kernel_broadcast_tiles(index))


def forked_reads(ops: Sequence[MovingOp]) -> dict[tuple[str, int], str]:
    """{(op, input index): reader op} of an epoch's DRAM reads that can be shared (`forked_dram_inputs`): inputs
    that read the same queue the same way (`_read_key`) take the tiles the reader (the first such op by name)
    reads; one per op and queue."""
    readers: dict[tuple, str] = {}
    forks: dict[tuple[str, int], str] = {}
    for op in sorted(ops, key=lambda o: o.name):
        seen: set = set()
        for k, inp in enumerate(op.inputs):
            key = _read_key(op, k)
            if key is None or inp.queue.name in seen:
                continue
            seen.add(inp.queue.name)
            reader = readers.setdefault(key, op.name)
            if reader != op.name:
                forks[(op.name, k)] = reader
    return forks


def with_forks(ops: Sequence[MovingOp], forks: dict[tuple[str, int], str]) -> list[MovingOp]:
    """`ops` with the inputs of `forks` (`forked_reads`) reading through their reader."""
    out = []
    for op in ops:
        inputs = tuple(dataclasses.replace(inp, fork=forks[(op.name, k)]) if (op.name, k) in forks else inp
                       for k, inp in enumerate(op.inputs))
        out.append(dataclasses.replace(op, inputs=inputs) if inputs != op.inputs else op)
    return out


def fork_mismatch(op: MovingOp, index: int, ops: dict) -> str | None:
    """Why input `index` of `op` cannot share the DRAM read of the op its `fork` names (None if it can): the reader
    is not another op of the epoch, or reads the queue another way (`_read_key`)."""
    inp = op.inputs[index]
    reader = ops.get(inp.fork)
    if reader is None:
        return f"{inp.fork!r} is not an op of the epoch"
    if reader is op:
        return "an op does not share its own read"
    key = _read_key(op, index)
    if key is None:
        return "the input does not stream a DRAM queue (a host queue, a prologue or an op of the epoch)"
    if _reading(reader, key) is None:
        return (f"op {reader.name!r} does not read {inp.queue.name!r} itself the same way (the same TMs, tile "
                f"format, grid, t, blocking and kernel input granule)")
    return None


def _reading(reader: MovingOp, key: tuple) -> int | None:
    """The input of `reader` that reads its DRAM queue itself as `key` says (`_read_key`), if any."""
    return next((k for k, inp in enumerate(reader.inputs) if inp.fork is None and _read_key(reader, k) == key), None)


def _forwarded(op: MovingOp, index: int, pipes: list[Pipe], ops: dict) -> list[Pipe]:
    """The pipes of a forked DRAM input: each group's tiles forwarded from the core the reader's pipe for the same
    group runs on, not read from DRAM again (as a read where the fork does not match: the validator reports it)."""
    if fork_mismatch(op, index, ops) is not None:
        return pipes
    reader = ops[op.inputs[index].fork]
    theirs = input_pipes(reader, _reading(reader, _read_key(op, index)), ops)
    return [dataclasses.replace(mine, sources=(("fork", reader.name, _site(their, reader), mine.tiles),))
            for mine, their in zip(pipes, theirs)]


def output_pipes(op: MovingOp) -> list[Pipe]:
    """The pipes that write the op's output to its DRAM and host queues: per core, into the queue buffers its
    tiles go to (a queue grid may subdivide the op's grid, or several cores share a buffer)."""
    geom = op.geometry
    pipes = []
    for queue in op.writes:
        for reads in edge_reads(geom.shape, geom.grid, (), None, None, queue.grid, "both"):
            buffer = (reads.group[1], reads.group[2])
            for unit, n in reads.sources:
                pipes.append(Pipe(op.name, -1, (("op", op.name, unit, n),), (("dram" if queue.channels else "host",
                                  queue.name, buffer),), n, n * queue.tile_bytes, on_producer=True))
    return pipes


def epoch_pipes(ops: Sequence[MovingOp]) -> list[Pipe]:
    """Every pipe of an epoch per input."""
    by_name = {o.name: o for o in ops}
    pipes = []
    for op in ops:
        for k in range(len(op.inputs)):
            pipes += input_pipes(op, k, by_name)
        pipes += output_pipes(op)
    return pipes


# --- NoC links --------------------------------------------------------------------------------------------------

def _physical(op: MovingOp, core: tuple) -> tuple:
    """The device core (row, col) of logical core `core` of a placed op (grid_transpose swaps the axes)."""
    r, c = (core[1], core[0]) if op.transpose else core
    return (op.loc[0] + r, op.loc[1] + c)


def _pipe_core(pipe: Pipe, consumer: MovingOp) -> tuple:
    """The logical consumer core a consumer-side pipe runs on: the multicast edge core (a row multicast starts at
    column 0 and goes east on NOC0, a column multicast at the last row and goes north on NOC1), else its one
    destination."""
    if not pipe.multicast:
        return pipe.dests[0]
    if len({d[0] for d in pipe.dests}) == 1:        # along a logical row
        return min(pipe.dests, key=lambda d: d[1])
    return max(pipe.dests, key=lambda d: d[0])


def _multicast_noc(pipe: Pipe, consumer: MovingOp) -> int:
    """NOC0 for a multicast along a device row, NOC1 along a device column (grid_transpose turns a logical row
    into a device column)."""
    along_row = len({d[0] for d in pipe.dests}) == 1
    return noc.NOC0 if along_row != consumer.transpose else noc.NOC1


def _xy(device: DeviceSpec, ops: dict, queues: dict, kind: str, name: str, unit) -> tuple | None:
    """NoC (x, y) of a pipe endpoint, None where it has none (the host) or is not placed yet."""
    if kind in ("op", "hold", "fork"):
        op = ops.get(name)
        return None if op is None or op.loc is None else noc.core_xy(device, _physical(op, unit))
    if kind == "dram":
        queue = queues[name]
        return noc.dram_xy(device, _channel(queue, unit))
    return None


def _channel(queue: QueueLayout, buffer: tuple) -> int:
    k = buffer[0] * queue.grid[1] + buffer[1]
    return queue.channels[k] if k < len(queue.channels) else 0


def _niu(direction: str, xy: tuple | None, kind: str, name: str, unit, queues: dict) -> tuple | None:
    """The NIU a transfer leaves ("out") or enters ("in") an endpoint by: a placed node's (NOC0's, where the
    NoC is not routed), an unplaced core's by op and core, a DRAM channel's; None for the host."""
    if xy is not None:
        return (direction, noc.NOC0, *xy)
    if kind in ("op", "hold", "fork"):
        return (direction, name, unit)
    if kind == "dram":
        return (direction, "dram", _channel(queues[name], unit))
    return None


def pipe_legs(device: DeviceSpec, pipe: Pipe, ops: dict, queues: dict) -> list[tuple[tuple, float]]:
    """A pipe's legs, each (its route, bytes per input; `leg_links` gives the links a route loads): every source to
    the core the pipe runs on (gather), then a multicast along the row or column. A route is ("unicast", src, dst)
    between placed nodes' NoC (x, y), ("multicast", src, dsts, noc) from a placed core, else ("nius", out, in),
    the NIUs it leaves and enters (of placed nodes, unplaced cores by op and core, DRAM channels; None: the host).
    A leg whose data is on its core already has none."""
    legs: list = []

    def leg(src: tuple, src_xy, dst: tuple, dst_xy, nbytes: float) -> None:
        if src[:3] == dst[:3]:
            return          # the data is on that core already
        if src_xy is not None and dst_xy is not None:
            if src_xy != dst_xy:
                legs.append((("unicast", src_xy, dst_xy), nbytes))
        else:
            legs.append((("nius", _niu("out", src_xy, *src, queues), _niu("in", dst_xy, *dst, queues)), nbytes))

    if pipe.index < 0:                          # an op's output into a queue buffer (or the host)
        (kind, name, unit, _), = pipe.sources
        dst = pipe.dests[0]
        leg((kind, name, unit), _xy(device, ops, queues, kind, name, unit), dst,
            _xy(device, ops, queues, *dst), pipe.bytes)
        return legs
    consumer = ops.get(pipe.consumer)
    core = _site(pipe, consumer)
    site = ("op", pipe.consumer, core)
    site_xy = _xy(device, ops, queues, *site)
    tile_bytes = pipe.bytes / pipe.tiles if pipe.tiles else 0.0
    for kind, name, unit, n in pipe.sources:
        src = ("op" if kind in ("hold", "fork") else kind, name, unit)
        leg(src, _xy(device, ops, queues, kind, name, unit), site, site_xy, n * tile_bytes)
    if pipe.multicast:
        if site_xy is not None:
            dsts = tuple(noc.core_xy(device, _physical(consumer, d)) for d in pipe.dests)
            legs.append((("multicast", site_xy, dsts, _multicast_noc(pipe, consumer)), pipe.bytes))
        else:
            legs.append((("nius", ("out", pipe.consumer, core),
                          *(("in", pipe.consumer, d) for d in pipe.dests if d != core)), pipe.bytes))
    return legs


def leg_links(device: DeviceSpec, route: tuple) -> tuple:
    """The links and NIUs a leg's route (`pipe_legs`) loads."""
    if route[0] == "unicast":
        return noc.unicast_links(device, route[1], route[2])
    if route[0] == "multicast":
        return noc.multicast_links(device, route[1], list(route[2]), route[3])
    return tuple(link for link in route[1:] if link is not None)


def pipe_links(device: DeviceSpec, pipe: Pipe, ops: dict, queues: dict) -> dict:
    """{link: bytes per input} a pipe loads (its legs, `pipe_legs`): each leg routed on a NoC where both its ends
    are placed, else the NIUs it leaves and enters; the host end has none."""
    loads: dict = {}
    for route, nbytes in pipe_legs(device, pipe, ops, queues):
        for link in leg_links(device, route):
            loads[link] = loads.get(link, 0.0) + nbytes
    return loads


def link_loads(device: DeviceSpec, ops: Sequence[MovingOp], pipes: Sequence[Pipe]) -> tuple[dict, dict]:
    """(bytes per input of every link, the links each op's pipes load) over an epoch's pipes: an op's are those of
    its input pipes, its output pipes and the pipes that read its cores."""
    by_name = {o.name: o for o in ops}
    queues = {q.name: q for o in ops for q in (*o.writes, *(i.queue for i in o.inputs if i.queue is not None))}
    totals: dict = {}
    touched: dict = {o.name: set() for o in ops}
    for pipe in pipes:
        loads = pipe_links(device, pipe, by_name, queues)
        for link, nbytes in loads.items():
            totals[link] = totals.get(link, 0.0) + nbytes
        for name in {pipe.consumer, *pipe.producers}:
            if name in touched:
                touched[name].update(loads)
    return totals, touched


def channel_bytes(ops: Sequence[MovingOp], pipes: Sequence[Pipe]) -> dict[int, float]:
    """Bytes per input each DRAM channel serves for an epoch's pipes: every tile a pipe reads from a queue buffer
    (a matmul operand once per grid row or column, which the pipe then multicasts) and every tile an op writes
    into one, counted in the channel of that buffer (`DeviceSpec.system_channel` ids)."""
    queues = {q.name: q for o in ops for q in (*o.writes, *(i.queue for i in o.inputs if i.queue is not None))}
    served: dict[int, float] = {}
    for pipe in pipes:
        tile_bytes = pipe.bytes / pipe.tiles if pipe.tiles else 0.0
        ends = [(name, unit, n * tile_bytes) for kind, name, unit, n in pipe.sources if kind == "dram"]
        ends += [(dest[1], dest[2], pipe.bytes) for dest in pipe.dests if dest[0] == "dram"]
        for name, buffer, nbytes in ends:
            channel = _channel(queues[name], buffer)
            served[channel] = served.get(channel, 0.0) + nbytes
    return served


def link_cycles(device: DeviceSpec, totals: dict, links: Iterable) -> tuple[float, tuple | None]:
    """(cycles per input, link) of the busiest of `links`: its bytes per input over the link bandwidth (ties: the
    first link in repr order, so the report is the same whatever the set order)."""
    links = list(links)
    if not links:
        return 0.0, None
    most = max(totals[link] for link in links)
    worst = min((link for link in links if totals[link] == most), key=repr)
    return most / device.noc_link_bytes_per_cycle, worst


def describe_link(device: DeviceSpec, link: tuple) -> str:
    """A link for reports: a routed NoC link or NIU (`pybuda.arch.noc.describe`), or the NIU of an unplaced op
    core or of a DRAM channel."""
    role = {"out": "sender", "in": "receiver"}.get(link[0], "")
    if link[0] == "link" or isinstance(link[1], int):
        return noc.describe(device, link)
    if link[1] == "dram":
        return f"dram{link[2]} {role}"
    return f"{role} {link[1]}[{link[2][0]},{link[2][1]}]"


def link_ends(device: DeviceSpec, link: tuple) -> tuple:
    """(from, to) worker cores (row, col) of a routed link or NIU (`pybuda.arch.noc.ends`); (None, None) for the NIU
    of an unplaced op core or of a DRAM channel."""
    if link[0] == "link" or isinstance(link[1], int):
        return noc.ends(device, link)
    return None, None


# --- per-core stream resources ------------------------------------------------------------------------------------

@dataclasses.dataclass
class CoreStreams:
    """Stream resources one core of an op uses (§3): multicast pipes it hosts, extra streams, DRAM reader and
    writer streams, distinct DRAM buffers it reads, destinations its output feeds, the stream phases of the
    pipes it consumes and produces, and the L1 of the stream buffers pipegen adds (§4.6)."""

    multicast: int = 0
    extra: int = 0
    dram_readers: int = 0
    dram_writers: int = 0
    dram_buffers: int = 0
    fan_out: int = 0
    consumer_phases: int = 0
    producer_phases: int = 0
    buffer_bytes: int = 0       # L1 of the streams' own buffers: DRAM receive, gather relays, multicast


def core_streams(ops: Sequence[MovingOp], pipes: Sequence[Pipe]) -> dict:
    """{(op, core): CoreStreams} of an epoch's pipes (§3.3): a multicast uses a multicast stream on the core it
    runs on; a gather from n > 1 sources min(3, n) extra streams there; a DRAM-reading pipe one extra stream and a
    DRAM reader; a forked output buffer (a producer core feeding k pipes) k - 1 extra streams; a pre-TM prologue
    buffer one extra stream; an output into a DRAM queue a DRAM writer; a forked DRAM read one extra stream on the
    reader's core."""
    by_name = {o.name: o for o in ops}
    usage: dict = {}

    def at(name: str, core: tuple) -> CoreStreams:
        return usage.setdefault((name, core), CoreStreams())

    dram_buffers: dict = {}
    fan: dict = {}
    for pipe in pipes:
        consumer = by_name.get(pipe.consumer)
        if pipe.index < 0:
            (_, name, unit, _), = pipe.sources
            if pipe.dests[0][0] == "dram":
                at(name, unit).dram_writers += 1
            at(name, unit).producer_phases += pipe.phases
            continue
        core = _site(pipe, consumer)
        site = at(pipe.consumer, core)
        units = {(kind, name, unit) for kind, name, unit, _ in pipe.sources}
        tile_bytes = pipe.bytes / pipe.tiles if pipe.tiles else 0.0
        if pipe.multicast:
            site.multicast += 1
            site.buffer_bytes += int(MULTICAST_TILES * tile_bytes)
        if len(units) > 1:
            site.extra += min(MAX_OPTIMIZED_GATHER_STREAMS, len(units))
        relayed = [u for u in units if u[0] in ("op", "hold")]
        if len(relayed) > 1:     # an L1 gather: relay buffers per input
            site.buffer_bytes += int(len(relayed) * max(4, GATHER_RELAY_TILES // len(relayed)) * tile_bytes)
        drams = {u for u in units if u[0] == "dram"}
        if drams:
            site.extra += 1
            site.dram_readers += 1
            inp = consumer.inputs[pipe.index] if consumer is not None else None
            if inp is None or not inp.dram_io_tiles:     # the op's input_dram_io_buf_size_tiles is its buffer
                site.buffer_bytes += int(min(pipe.bytes, DRAM_RECEIVE_BYTES))
            dram_buffers.setdefault((pipe.consumer, core), set()).update(drams)
        for dest in pipe.dests:
            at(pipe.consumer, dest).consumer_phases += pipe.phases
        for kind, name, unit, _ in pipe.sources:
            if kind in ("op", "hold"):
                fan.setdefault((name, unit), set()).add((pipe.consumer, pipe.index, pipe.dests))
                at(name, unit).producer_phases += pipe.phases
            elif kind == "fork":      # the reader's DRAM stream forks a copy to this pipe
                at(name, unit).extra += 1
    for key, buffers in dram_buffers.items():
        usage[key].dram_buffers = len(buffers)
    holders = {(n, u) for p in pipes for kind, n, u, _ in p.sources if kind == "hold"}
    for (name, unit), destinations in fan.items():
        streams = at(name, unit)
        streams.fan_out = len(destinations)
        streams.extra += max(0, len(destinations) - 1) + int((name, unit) in holders)
    return usage


def epoch_streams(ops: Sequence[MovingOp]) -> dict:
    """`core_streams` of an epoch (its pipes derived here)."""
    return core_streams(ops, epoch_pipes(ops))


def per_input_bytes(pipes: Iterable[Pipe]) -> float:
    """Bytes per input the pipes move."""
    return math.fsum(p.bytes for p in pipes)


@dataclasses.dataclass(frozen=True)
class CoreBudget:
    """What an op's own model sets of a core's limits: its overlay blob beyond the default and the L1 its op
    buffers take (None: not known, so its stream buffers are not checked here; the validator's l1.budget rule
    sums both)."""

    overlay_size: int = 0
    l1_bytes: int | None = None


@dataclasses.dataclass(frozen=True)
class StreamLimit:
    """A per-core stream resource (a `CoreStreams` field), what it counts, which side of a pipe uses it and its
    limit on a device for an op of a given `CoreBudget` (None: no limit)."""

    resource: str
    what: str
    producer_side: bool
    limit: Callable[[DeviceSpec, CoreBudget], int | None]


STREAM_LIMITS = (
    StreamLimit("multicast", "multicast streams", False, lambda d, _: d.gather_multicast_streams),
    StreamLimit("extra", "extra streams", False, lambda d, _: d.extra_streams),
    StreamLimit("dram_readers", "DRAM reader streams", False, lambda d, _: d.dram_reader_streams),
    StreamLimit("dram_writers", "DRAM writer streams", True, lambda d, _: d.dram_writer_streams),
    StreamLimit("dram_buffers", "DRAM input buffers", False, lambda d, _: d.dram_input_buffers),
    StreamLimit("fan_out", "output destinations", True, lambda d, _: d.fan_out_streams),
    StreamLimit("consumer_phases", "consumer stream phases", False, lambda d, b: d.phase_budget(b.overlay_size)),
    StreamLimit("producer_phases", "producer stream phases", True, lambda d, b: d.phase_budget(b.overlay_size)),
    StreamLimit("buffer_bytes", "B of stream buffers beside its op buffers", False,
                lambda d, b: None if b.l1_bytes is None else d.l1_data_buffer_bytes - b.l1_bytes),
)
LIMIT_OF = {limit.resource: limit for limit in STREAM_LIMITS}


@dataclasses.dataclass(frozen=True)
class Overuse:
    """A core of an op that needs more of a stream resource than the device gives it."""

    op: str
    core: tuple
    resource: str
    count: int
    limit: int

    def __str__(self) -> str:
        return (f"core {list(self.core)} of op {self.op} uses {self.count} {LIMIT_OF[self.resource].what}; a core "
                f"has {self.limit}")


EXTENDED_OVERLAY_BYTES = 128 * 1024   # the overlay blob the legacy compiler gives an op short of phases (§6)


def phase_hungry(device: DeviceSpec, usage: dict) -> set[str]:
    """Ops of `usage` (`core_streams`) with a core that needs more stream phases on one side than the default
    overlay blob holds: the ops the legacy compiler gives an `EXTENDED_OVERLAY_BYTES` blob where their L1 allows
    (data-movement.md, `kPhases32kb` / `kPhases64kb`)."""
    budget = device.phase_budget()
    return {name for (name, _), streams in usage.items()
            if max(streams.consumer_phases, streams.producer_phases) > budget}


def overuses(device: DeviceSpec, usage: dict, budget: Callable[[str], CoreBudget] = lambda _: CoreBudget(),
             resources: Iterable[str] | None = None) -> list[Overuse]:
    """Every (op, core) of `usage` (`core_streams`) over a limit of `STREAM_LIMITS` (those of `resources`, or
    all), in (op, core, limit) order; `budget(op)`: what the op's own model sets of the limits."""
    limits = [LIMIT_OF[r] for r in resources] if resources is not None else STREAM_LIMITS
    found = []
    for (name, core), streams in sorted(usage.items()):
        for limit in limits:
            count, most = getattr(streams, limit.resource), limit.limit(device, budget(name))
            if most is not None and count > most:
                found.append(Overuse(name, core, limit.resource, count, most))
    return found


def heaviest_input(pipes: Sequence[Pipe], overuse: Overuse) -> tuple[str, int]:
    """(consumer op, input index) whose pipes use most of the overused resource at the core: for a producer-side
    resource the consumer input its output feeds most (index -1: its queue writes), else the op's own input."""
    share: dict = {}
    for pipe in pipes:
        if LIMIT_OF[overuse.resource].producer_side:
            units = {(name, unit) for kind, name, unit, _ in pipe.sources if kind in ("op", "hold")}
            if (overuse.op, overuse.core) not in units:
                continue
        elif pipe.consumer != overuse.op or pipe.index < 0 or overuse.core not in pipe.dests:
            continue
        key = (pipe.consumer, pipe.index)
        share[key] = share.get(key, 0) + (pipe.phases if overuse.resource.endswith("phases") else 1)
    return max(sorted(share), key=lambda k: share[k]) if share else (overuse.op, -1)
