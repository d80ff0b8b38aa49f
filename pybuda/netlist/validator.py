"""The backend's netlist rules (netlist-format.md §3), applied to the typed model.

`validate(netlist, arch=None)` collects every violation and raises `NetlistError`; `check(...)` returns the
list instead. Rules are grouped by family, one function each; every violation names its rule id:

    devices.*, netlist.*      §1.1 sections and arch selection
    queue.*, graph.*, op.*    §3.1 per-object checks;  attr.*  attribute rules;  name.*  unique names
    input.*, tm.*, shape.*    §3.1/§3.2 inputs exist, TM legality, producer -> consumer shapes after TMs
    dest.ublock_limit         §3.3
    df.*, arch.*, tile_dim.*, gradient.*, untilize.*, op.embedding/...   §3.4 data-format and attribute rules
    graph.cross_graph_input, grid.overlap, untilize.*, queue.alias, queue.input_count, queue.dram_overlap  §3.5
    program.*, queue_settings.*   §3.6
    grid.bounds, device.*     §3.7
    l1.budget                 §3.8
    fused.*                   §1.7 fused-op schedules

The arch is the one the backend would select (env `ARCH_NAME` there): `arch` if given (it must be listed in
`devices`), else the first listed arch this project has a device description for.
"""
from __future__ import annotations

from ..arch.fused import intermediate_tiles
from ..arch.l1 import InputBuffer, footprint
from ..arch.operands import OpGeometry, expected_input, input_count, prologue_tiles_per_core, transpose_illegal
from ..arch.optypes import BINARY_OPS, DATACOPY_OPS, OP_TYPES, SFPU_OPS
from ..arch.tms import TMError, edge_shape, shape_after_tms
from ..dataformat import DataFormat as DF
from ..dataformat import MathFidelity, tile_bytes
from ..device import DeviceSpec, arch_spec
from .errors import NetlistError, NetlistViolation
from .model import (SUPPORTED_ARCHS, VARINST_OPCODES, EndLoop, Execute, FusedOp, Graph, Loop, Netlist, Op, Param,
                    Program, Queue, QueueAlloc, Var, VarInst)
from .sizes import queue_buffer_bytes, tile_data_aligned

_FP32_ACC = (DF.Float32, DF.Int32)
_A = {DF.Float16, DF.Bfp8, DF.Bfp4, DF.Bfp2}
_B = {DF.Float16_b, DF.Bfp8_b, DF.Bfp4_b, DF.Bfp2_b}
_LOW_BFP = {DF.Bfp2, DF.Bfp2_b, DF.Bfp4, DF.Bfp4_b}
_INT_IN = {DF.Int8, DF.Int32, DF.UInt8, DF.UInt16}
_INT_OUT = {DF.Int8, DF.Int32, DF.UInt16, DF.UInt8}
_RAW = {DF.RawUInt8, DF.RawUInt16, DF.RawUInt32}
_UNTILIZE_DF = {DF.Float16, DF.Float16_b, DF.Float32}
_TRANSPOSE_TILE = {(32, 16): (16, 32), (16, 32): (32, 16)}
_TINY_OK_TYPES = DATACOPY_OPS | SFPU_OPS | BINARY_OPS | {"tilizer"}


def _obj(x) -> str:
    if isinstance(x, Op):
        return f"op {x.name}"
    if isinstance(x, Queue):
        return f"queue {x.name}"
    if isinstance(x, Graph):
        return f"graph {x.name}"
    if isinstance(x, Program):
        return f"program {x.name}"
    if isinstance(x, FusedOp):
        return f"fused_op {x.id}"
    return str(x)


class _Ctx:
    """What the rules share: the netlist, the selected arch and its device, derived maps, the findings."""

    def __init__(self, n: Netlist, arch: str, spec: DeviceSpec | None, chips: int | None):
        self.n = n
        self.arch = arch
        self.gs = arch == "grayskull"
        self.spec = spec
        self.chips = chips
        self.file = n.source
        self.errors: list[NetlistViolation] = []
        self.ops: dict = {}
        for g in n.graphs.values():
            for name, op in g.ops.items():
                self.ops.setdefault(name, op)
        # queue -> set of graphs in whose executes it is prologued
        self.prologue: dict = {}
        self.dynamic: set = set()
        self.aliased = lambda a, b: False
        for p in n.programs:
            for ins in p.instructions:
                if isinstance(ins, Execute):
                    for q, s in ins.queue_settings.items():
                        if _truthy(s.prologue):
                            self.prologue.setdefault(q, set()).add(ins.graph_name)
                elif isinstance(ins, QueueAlloc):
                    self.dynamic.update(ins.queues)

    def add(self, where, rule: str, message: str, expected=None, actual=None, line: int | None = None) -> None:
        ln = line if line is not None else getattr(where, "line", 0)
        self.errors.append(NetlistViolation(self.file, ln, _obj(where), rule, expected, actual, message))

    def producer(self, name: str, graph: Graph):
        op = graph.ops.get(name)
        if op is not None:
            return op
        q = self.n.queues.get(name)
        if q is not None:
            return q
        return self.ops.get(name)


def _truthy(v) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return v != 0
    if isinstance(v, str):
        return v.lower() in ("true", "1")
    return False


def _pos(*vals) -> bool:
    return all(isinstance(v, int) and v > 0 for v in vals)


# --- §1.1 devices / sections ---------------------------------------------------------------------------------------

def check_sections(c: _Ctx) -> None:
    n = c.n
    for name, items in (("queues", n.queues), ("graphs", n.graphs), ("programs", n.programs)):
        if not items:
            c.add("netlist", "netlist.empty_section", f"the {name} section is empty; the backend needs at least one",
                  f"at least one entry in {name}", 0, line=0)


# --- §3.1 queues, §3.7 DRAM channels ----------------------------------------------------------------------------

def check_queues(c: _Ctx) -> None:
    spec = c.spec
    for name, q in c.n.queues.items():
        if not _pos(q.t, *q.mblock, *q.ublock):
            c.add(q, "queue.dims", "t, mblock and ublock must be > 0", "> 0",
                  {"t": q.t, "mblock": list(q.mblock), "ublock": list(q.ublock)})
        if not _pos(*q.grid_size):
            c.add(q, "queue.dims", "grid_size must be > 0", "> 0", list(q.grid_size))
        if q.entries < 0:
            c.add(q, "queue.entries", "entries must be >= 0", ">= 0", q.entries)
        if any(d < 0 for d in q.devices):
            c.add(q, "queue.target_device", "target_device must be >= 0", ">= 0", q.target_device)
        if c.chips is not None and any(d >= c.chips for d in q.devices):
            c.add(q, "device.target_device", f"target_device {q.target_device} does not exist on a {c.chips}-chip "
                  "system", f"< {c.chips}", q.target_device)
        allocs = q.allocations
        buffers = q.grid_size[0] * q.grid_size[1]
        if len(allocs) != buffers:
            c.add(q, "queue.alloc_count", f"one {q.loc} allocation per grid buffer is needed", buffers, len(allocs))
        if q.loc == "dram" and q.host is not None or q.loc == "host" and q.dram is not None:
            c.add(q, "queue.loc", f"loc is {q.loc} but the queue also lists "
                  f"{'host' if q.loc == 'dram' else 'dram'} allocations", q.loc, "both")
        if q.tile_dim is not None and q.tile_dim != (32, 32) and c.gs:
            c.add(q, "arch.tile_dim", "grayskull supports only 32x32 tiles", [32, 32], list(q.tile_dim))
        if q.tile_dim is not None and not tile_data_aligned(q.df, q.tile_dim):
            c.add(q, "tile_dim.alignment", f"{q.df.value} tiles of {list(q.tile_dim)} are not 32 B aligned",
                  "a 32 B aligned tile", list(q.tile_dim))
        for ports_name in ("read_ports", "write_ports"):
            ports = getattr(q, ports_name)
            if ports is None:
                continue
            if c.arch != "wormhole_b0":
                c.add(q, "arch.ports", f"{ports_name} is only available on wormhole_b0", "wormhole_b0", c.arch)
            if q.loc != "dram" or len(ports) != buffers:
                c.add(q, "queue.ports", f"{ports_name} needs one entry per DRAM buffer", buffers, len(ports))
            if any(not 0 <= p <= 2 for p in ports):
                c.add(q, "queue.ports", f"{ports_name} values must be in 0..2", "0..2", ports)
        if spec is not None:
            for ch, addr in allocs:
                if q.loc == "dram" and not 0 <= ch < spec.dram_channels:
                    c.add(q, "device.dram_channel", f"DRAM channel {ch} does not exist on {c.arch}",
                          f"0..{spec.dram_channels - 1}", ch)
                elif q.loc == "host" and c.gs and ch != 0:
                    c.add(q, "device.host_channel", "grayskull host queues must use channel 0", 0, ch)
                if addr < 0:
                    c.add(q, "queue.address", "addresses must be >= 0", ">= 0", addr)
        if q.input_tms:
            for tm in q.input_tms:
                if tm[0] == "pad":
                    c.add(q, "tm.pad", "padding can't be done on queue inputs", "no pad", "pad")
                elif tm[0] == "tile_broadcast":
                    c.add(q, "tm.tile_broadcast", "tile_broadcast is only allowed in fused ops", "no tile_broadcast",
                          "tile_broadcast")
                elif tm[0] == "transpose":
                    c.add(q, "tm.transpose", "transpose can't be done on a queue input", "no transpose", "transpose")
        if q.alias is not None:
            _check_alias(c, q)
        if q.fed_by_op and q.input not in c.ops:
            c.add(q, "queue.producer_missing", f"producer op {q.input!r} of the queue does not exist",
                  "an op name or HOST", q.input)


def _check_alias(c: _Ctx, q: Queue) -> None:
    if q.alias == q.name:
        c.add(q, "queue.alias", "a queue cannot alias itself", "another ram", q.alias)
        return
    other = c.n.queues.get(q.alias)
    if other is None:
        c.add(q, "queue.alias", f"alias {q.alias!r} is not a queue", "a ram of this netlist", q.alias)
        return
    if other.alias is not None:
        c.add(q, "queue.alias", f"alias {q.alias!r} is itself an alias", "a ram that is not an alias", other.alias)
    if q.type != "ram" or other.type != "ram":
        c.add(q, "queue.alias", "only a ram may alias a ram", "ram -> ram", f"{q.type} -> {other.type}")
    if q.allocations != other.allocations:
        c.add(q, "queue.alias", f"an alias must have the same allocation as {q.alias!r}", other.allocations,
              q.allocations)
    mine = q.entries * q.buffer_tiles * q.grid_size[0] * q.grid_size[1] * q.effective_tile_dim[0] * q.effective_tile_dim[1]
    theirs = other.entries * other.buffer_tiles * other.grid_size[0] * other.grid_size[1] * \
        other.effective_tile_dim[0] * other.effective_tile_dim[1]
    if mine != theirs:
        c.add(q, "queue.alias", f"an alias must hold as many elements (x entries) as {q.alias!r}", theirs, mine)


# --- §3.1 graphs and ops, §3.3 dest, §3.4 formats, §3.7 grid bounds, §3.5 overlap ----------------------------------

def check_graphs(c: _Ctx) -> None:
    seen_ops: dict = {}
    queues = c.n.queues
    rows, cols = (c.spec.grid_rows, c.spec.grid_cols) if c.spec else (None, None)
    for gname, g in c.n.graphs.items():
        if any(d < 0 for d in g.devices):
            c.add(g, "graph.target_device", "target_device must be >= 0", ">= 0", g.target_device)
        if c.chips is not None and any(d >= c.chips for d in g.devices):
            c.add(g, "device.target_device", f"target_device {g.target_device} does not exist on a {c.chips}-chip "
                  "system", f"< {c.chips}", g.target_device)
        if g.input_count is None or g.input_count < 1:
            c.add(g, "graph.input_count", "input_count must be set and >= 1", ">= 1", g.input_count)
        used: dict = {}
        for name, op in g.ops.items():
            if name in seen_ops:
                c.add(op, "name.duplicate_op", f"op names must be globally unique; {name!r} is also in graph "
                      f"{seen_ops[name]}", "a unique name", name)
            seen_ops.setdefault(name, gname)
            if name in queues:
                c.add(op, "name.op_queue_clash", f"{name!r} names both an op and a queue", "a unique name", name)
            _check_op(c, op)
            # §3.7 bounds and §3.5 overlap
            if op.grid_loc is None or not op.is_tensix or not _pos(*op.grid_size):
                continue
            r0, c0 = op.grid_loc
            h, w = op.footprint
            if r0 < 0 or c0 < 0:
                c.add(op, "grid.bounds", "grid_loc must be >= 0", ">= [0, 0]", list(op.grid_loc))
                continue
            if rows is not None and (r0 + h > rows or c0 + w > cols):
                c.add(op, "grid.bounds", f"{h}x{w} cores at {list(op.grid_loc)} exceed the {rows}x{cols} worker grid "
                      f"of {c.arch}", f"row+rows <= {rows}, col+cols <= {cols}", [r0 + h, c0 + w])
                continue
            clash = None
            for r in range(r0, r0 + h):
                for cc in range(c0, c0 + w):
                    other = used.get((r, cc))
                    if other is not None and clash is None:
                        clash = (other, (r, cc))
                    used[(r, cc)] = name
            if clash is not None:
                c.add(op, "grid.overlap", f"overlaps op {clash[0]!r} in graph {gname} at core {list(clash[1])}",
                      "disjoint cores", list(clash[1]))


def _check_op(c: _Ctx, op: Op) -> None:
    typ = op.type
    n_in = len(op.inputs)
    if typ not in OP_TYPES:
        c.add(op, "op.type", f"unknown op type {typ!r}", "a backend op type", typ)
    if not _pos(op.t, *op.mblock, *op.ublock):
        c.add(op, "op.dims", "t, mblock and ublock must be > 0", "> 0",
              {"t": op.t, "mblock": list(op.mblock), "ublock": list(op.ublock)})
        return
    if not _pos(*op.grid_size):
        c.add(op, "op.dims", "grid_size must be > 0", "> 0", list(op.grid_size))
        return
    if len(op.in_df) != n_in:
        c.add(op, "op.in_df_count", "in_df needs one data format per input", n_in, len(op.in_df))
    if op.input_buf_min_size_tiles is not None and len(op.input_buf_min_size_tiles) != n_in:
        c.add(op, "op.input_buf_count", "input_buf_min_size_tiles needs one entry per input", n_in,
              len(op.input_buf_min_size_tiles))
    if op.input_dram_io_buf_size_tiles is not None and len(op.input_dram_io_buf_size_tiles) != n_in:
        c.add(op, "op.input_buf_count", "input_dram_io_buf_size_tiles needs one entry per input", n_in,
              len(op.input_dram_io_buf_size_tiles))
    want = input_count(op.geometry)
    if want is not None and n_in != want:
        c.add(op, "op.input_count", f"a {typ} op takes {want} inputs", want, n_in)
    if op.buf_size_mb < 0:
        c.add(op, "op.buf_size_mb", "buf_size_mb must be >= 0", ">= 0", op.buf_size_mb)
    elif op.buf_size_mb > 1 and op.buf_size_mb % 2:
        c.add(op, "op.buf_size_mb", "buf_size_mb must be 1 or even", "1 or even", op.buf_size_mb)
    elif op.buf_size_mb > 1:
        half = op.buf_size_mb // 2
        if op.t % half and half % op.t:
            c.add(op, "op.buf_size_mb", f"buf_size_mb/2 = {half} and t = {op.t} must divide one another",
                  f"a divisor or multiple of t={op.t}", half)
    if typ == "matmul" and op.ublock_order != "r":
        c.add(op, "op.matmul_ublock_order", "matmul ops need ublock_order r", "r", op.ublock_order)
    if typ == "buffer" and op.mblock[0] != 1:
        c.add(op, "op.buffer_mblock", "buffer ops need mblock_m = 1", 1, op.mblock[0])
    if op.forked_dram_inputs is not None:
        for qn, other in op.forked_dram_inputs:
            if qn not in c.n.queues or qn not in op.inputs:
                c.add(op, "op.forked_dram_input", f"forked dram input {qn!r} must be a queue input of the op",
                      "a queue input of the op", qn)
            g = c.n.graphs.get(op.graph)
            if g is not None and other not in g.ops:
                c.add(op, "op.forked_dram_input", f"forked dram input {qn!r}: op {other!r} must be in the same "
                      "graph", f"an op of {op.graph}", other)
    if op.tile_dim is not None and op.tile_dim != (32, 32) and c.gs:
        c.add(op, "arch.tile_dim", "grayskull supports only 32x32 tiles", [32, 32], list(op.tile_dim))
    # §3.3 dest register
    limit = 4 if op.acc_df in _FP32_ACC else 8
    if op.ublock[0] * op.ublock[1] > limit:
        c.add(op, "dest.ublock_limit", f"ublock {list(op.ublock)} = {op.ublock[0] * op.ublock[1]} tiles does not "
              f"fit the dest register ({limit} tiles with acc_df {op.acc_df.value if op.acc_df else 'default'})",
              f"<= {limit} tiles", op.ublock[0] * op.ublock[1])
    _check_attributes(c, op)
    _check_formats(c, op)


def _check_attributes(c: _Ctx, op: Op) -> None:
    a = op.attrs
    typ = op.type
    n_in = len(op.inputs)
    if typ == "matmul":
        if not (isinstance(a.m_k, int) and a.m_k > 0 and isinstance(a.u_kt, int) and a.u_kt > 0):
            c.add(op, "attr.matmul_mk", "matmul needs attributes m_k > 0 and u_kt > 0", "m_k > 0, u_kt > 0",
                  {"m_k": a.m_k, "u_kt": a.u_kt})
        if a.accumulate and a.identity:
            c.add(op, "attr.accumulate_identity", "accumulate and identity cannot both be set", "one of them",
                  "both")
    elif typ == "reduce":
        if a.dim is None or a.type is None:
            c.add(op, "attr.reduce", "reduce needs attributes dim and type", "dim and type",
                  {"dim": a.dim, "type": a.type})
        if a.dim in ("r", "c") and not (_pos(a.m_k or 1, a.u_kt or 1)):
            c.add(op, "attr.reduce", "reduce m_k and u_kt must be > 0", "> 0", {"m_k": a.m_k, "u_kt": a.u_kt})
        if a.dim == "z" and not _pos(a.z if a.z is not None else 1):
            c.add(op, "attr.z", "reduce z must be > 0", "> 0", a.z)
    elif typ == "splice":
        infos = a.splice or {}
        if sorted(infos) != list(range(n_in)):
            c.add(op, "attr.splice", "splice needs an inputN: [index, length, stride] attribute for every input",
                  [f"input{i}" for i in range(n_in)], [f"input{i}" for i in sorted(infos)])
        for i, (index, length, stride) in sorted(infos.items()):
            if index < 0 or length <= 0 or stride <= 0:
                c.add(op, "attr.splice", f"splice input{i}: index must be >= 0, length and stride > 0",
                      "index >= 0, length > 0, stride > 0", [index, length, stride])
    elif typ == "embedding":
        ni = a.num_indices or 0
        if ni % 32 or op.ublock[0] != 1 or ni // 32 != op.mblock[0]:
            c.add(op, "op.embedding", "embedding needs num_indices % 32 == 0, ublock_rt == 1 and "
                  "num_indices/32 == mblock_m", {"num_indices": f"{32 * op.mblock[0]}", "ublock_rt": 1},
                  {"num_indices": a.num_indices, "ublock_rt": op.ublock[0]})
    elif typ == "depthwise":
        if a.u_kt != 1 or not (isinstance(a.m_k, int) and a.m_k > 0):
            c.add(op, "op.depthwise", "depthwise needs u_kt == 1 and m_k > 0", {"u_kt": 1, "m_k": "> 0"},
                  {"u_kt": a.u_kt, "m_k": a.m_k})
    if a.z is not None:
        if typ == "reduce" and a.dim != "z":
            c.add(op, "attr.z", "attribute z is only valid for reduce dim: z", "dim: z", a.dim)
        elif typ == "matmul" and not a.accumulate:
            c.add(op, "attr.z", "attribute z is only valid for matmul with accumulate", "accumulate: true", None)
    if a.p is not None and not 0.0 <= a.p <= 1.0:
        c.add(op, "attr.p", "dropout probability must be in [0, 1]", "[0, 1]", a.p)
    if a.relu_threshold is not None and a.relu_threshold < 0:
        c.add(op, "attr.relu_threshold", "relu_threshold must be >= 0", ">= 0", a.relu_threshold)
    if a.min_buffer_input is not None:
        if a.min_buffer_input not in (0, 1) or (a.min_buffer_input == 1 and typ in ("buffer", "depthwise")):
            c.add(op, "attr.min_buffer_input", "min_buffer_input must be 0 or 1 (0 for buffer/depthwise)",
                  "0" if typ in ("buffer", "depthwise") else "0 or 1", a.min_buffer_input)
    if a.num_nz_strips is not None and len(a.num_nz_strips) != op.grid_size[0] * op.grid_size[1]:
        c.add(op, "attr.num_nz_strips", "num_nz_strips needs one entry per core", op.grid_size[0] * op.grid_size[1],
              len(a.num_nz_strips))
    for name in ("kernel_broadcast", "kernel_broadcast_per_t"):
        kb = getattr(a, name)
        for i in sorted(kb or {}):
            if i >= n_in:
                c.add(op, "attr.kernel_broadcast", f"{name} names input {i} but the op has {n_in} inputs",
                      f"< {n_in}", i)
    if a.single_tile is not None:
        for i in a.single_tile:
            if not 0 <= i < n_in:
                c.add(op, "attr.kernel_broadcast", f"single_tile names input {i} but the op has {n_in} inputs",
                      f"0..{n_in - 1}", i)
    kb_inputs = set(a.kernel_broadcast or {}) | set(a.kernel_broadcast_per_t or {}) | set(a.single_tile or [])
    for i in sorted(kb_inputs):
        if i < n_in and ((a.kernel_broadcast or {}).get(i, 1) > 0 and (a.kernel_broadcast_per_t or {}).get(i, 1) > 0):
            if not any(tm[0] == "broadcast" for tm in op.tms(i)):
                c.add(op, "attr.kernel_broadcast", f"kernel broadcast on input {i} needs a broadcast TM on that "
                      "input", "a broadcast TM", [list(t) for t in op.tms(i)])
    if a.identity and typ == "matmul":
        if n_in < 3 or (len(op.in_df) > 2 and op.in_df[2] not in _RAW):
            c.add(op, "op.identity_matmul", "an identity matmul needs >= 3 inputs with input 2 (encodings) in "
                  "RawUInt8/16/32", ">= 3 inputs, in_df[2] RawUInt*",
                  {"inputs": n_in, "in_df[2]": op.in_df[2].value if len(op.in_df) > 2 else None})
        tms2 = op.tms(2)
        if tms2 and tms2[0][0] != "broadcast":
            c.add(op, "op.identity_matmul", "identity matmul encodings (input 2) support only broadcast TMs",
                  "broadcast", tms2[0][0])
    if typ == "tilizer" and any(op.input_tms.values()):
        c.add(op, "op.tilizer", "a tilizer op may not have TMs on its input", "no TMs", "TMs")
    if a.l1_acc and c.arch not in ("wormhole_b0", "blackhole"):
        c.add(op, "arch.l1_acc", "L1 accumulation is only available on wormhole_b0", "wormhole_b0", c.arch)
    stoch = a.stoch_rnd_mode not in (None, "none") or bool(a.srnd_fpu_en)
    if stoch and c.arch != "wormhole_b0":
        c.add(op, "arch.stoch_rnd", "stochastic rounding is only available on wormhole_b0", "wormhole_b0", c.arch)
    if c.gs and a.sfpu_execution_thread not in (None, "math"):
        c.add(op, "arch.sfpu_thread", "grayskull runs SFPU only on the math thread", "math", a.sfpu_execution_thread)


def _check_formats(c: _Ctx, op: Op) -> None:
    a = op.attrs
    typ = op.type
    out, im, acc = op.out_df, op.intermed_df, op.acc_df
    m_k = a.m_k or 0
    is_mm = typ == "matmul"
    grad = bool(op.gradient_op)
    if c.gs:
        if acc in _FP32_ACC:
            c.add(op, "df.grayskull_acc", f"grayskull has no {acc.value} dest accumulation", "a 16-bit acc_df",
                  acc.value)
        if out != im and (grad or m_k > 1):
            same = (out in _A and im in _A) or (out in _B and im in _B) or (out == DF.Float32 and im in _B)
            if not same:
                c.add(op, "df.grayskull_exp_width", "grayskull: out_df and intermed_df must share the exponent width "
                      "when the op accumulates", f"intermed_df with {'5' if out in _A else '8'}-bit exponent",
                      f"out_df {out.value}, intermed_df {im.value}")
        if grad and not (is_mm or typ == "multiply" or typ in DATACOPY_OPS):
            c.add(op, "gradient.grayskull_op", f"grayskull supports gradient_op only on matmul, multiply and "
                  f"datacopy, not {typ}", "matmul, multiply or datacopy", typ)
    if (grad or (is_mm and (m_k > 1 or a.bias))) and im in _LOW_BFP:
        c.add(op, "df.accumulate_bfp", "accumulating ops cannot use Bfp4/Bfp2 intermediates", "not Bfp4/Bfp2",
              im.value)
    if acc in _FP32_ACC:
        if is_mm:
            acc_en = bool(a.l1_acc) if c.arch == "wormhole_b0" else m_k > 1
            if acc_en and im != acc:
                c.add(op, "df.fp32_acc_intermed", f"matmul accumulation with acc_df {acc.value} needs intermed_df "
                      f"{acc.value}", acc.value, im.value)
        if acc == DF.Float32 and a.stoch_rnd_mode in ("fpu", "all"):
            c.add(op, "df.fp32_dest_stoch_rnd", "fpu stochastic rounding cannot be used with a Float32 dest",
                  "none or pack", a.stoch_rnd_mode)
        if acc == DF.Int32 and grad:
            c.add(op, "gradient.int32", "gradient accumulation with an Int32 dest is not supported", "not Int32",
                  acc.value)
    if grad:
        if im != out:
            c.add(op, "df.gradient_intermed", "gradient ops need intermed_df == out_df", out.value, im.value)
        has_t = any(tm[0] == "transpose" for tms in op.input_tms.values() for tm in tms)
        if has_t and not (is_mm or typ in DATACOPY_OPS):
            c.add(op, "gradient.transpose", "gradient ops support input transpose only on matmul and datacopy",
                  "no transpose", "transpose")
        if c.arch != "wormhole_b0" and acc == DF.Float32 and im != acc:
            c.add(op, "df.gradient_fp32_acc", "gradient ops with Float32 acc_df need intermed_df Float32 (GS/WH A0)",
                  "Float32", im.value)
        if typ == "maximum":
            c.add(op, "gradient.maximum", "gradient ops do not support maximum", "not maximum", typ)
        if is_mm and a.identity:
            c.add(op, "gradient.identity", "gradient accumulation is not supported on identity matmul",
                  "gradient_op false", True)
    if op.untilize_output:
        if op.ublock_order != "r":
            c.add(op, "untilize.ublock_order", "untilize_output needs ublock_order r", "r", op.ublock_order)
        if out not in _UNTILIZE_DF and not (out in (DF.Int8, DF.Int32) and not c.gs):
            c.add(op, "df.untilize", f"untilize_output does not support out_df {out.value}",
                  "Float16, Float16_b or Float32", out.value)
        if is_mm and (a.m_k or 1) != 1:
            c.add(op, "untilize.matmul_mk", "an untilizing matmul needs m_k == 1", 1, a.m_k)
        if typ == "reduce" and a.dim == "z":
            c.add(op, "untilize.reduce_z", "reduce dim z cannot untilize its output", "untilize_output false", True)
    if typ == "reduce":
        if a.dim == "z" and op.in_df and not (op.in_df[0] == im == out):
            c.add(op, "df.reduce_z", "reduce dim z needs in_df[0] == intermed_df == out_df", op.in_df[0].value,
                  f"intermed_df {im.value}, out_df {out.value}")
        if acc == DF.Float32 and op.in_df and op.in_df[0] in _A:
            c.add(op, "df.reduce_fp32_acc", "reduce with Float32 acc_df cannot take an 'A' format input",
                  "a B format input", op.in_df[0].value)
    if typ == "splice" and len(set(op.in_df)) > 1:
        c.add(op, "df.splice", "splice inputs must all have the same data format", op.in_df[0].value,
              [d.value for d in op.in_df])
    if a.l1_acc and im not in (DF.Float32, DF.Int32, DF.Float16_b):
        c.add(op, "df.l1_acc", "L1 accumulation needs intermed_df Float32, Int32 or Float16_b",
              "Float32, Int32 or Float16_b", im.value)
    _check_int_formats(c, op)


def _check_int_formats(c: _Ctx, op: Op) -> None:
    a = op.attrs
    typ = op.type
    out, im, acc = op.out_df, op.intermed_df, op.acc_df
    quant, requant, dequant = typ == "quantization", typ == "requantization", typ == "dequantization"
    fused = typ == "fused_op"
    if (quant or requant or dequant or typ == "reduce") and (DF.UInt8 in op.in_df or out == DF.UInt8):
        c.add(op, "df.uint8", f"{typ} ops cannot use UInt8", "not UInt8", [d.value for d in op.in_df] + [out.value])
    int_in = any(d in _INT_IN for d in op.in_df)
    if int_in and typ != "topk":
        problems = []
        if not (out in _INT_OUT or a.dequant or dequant or fused):
            problems.append(f"out_df {out.value} is not an integer format")
        if im not in (DF.Int8, DF.UInt8, DF.Int32):
            problems.append(f"intermed_df {im.value} is not Int8/UInt8/Int32")
        if op.math_fidelity != MathFidelity.HiFi4:
            problems.append(f"math_fidelity {op.math_fidelity.value} is not HiFi4")
        if acc != DF.Int32:
            problems.append(f"acc_df {acc.value if acc else None} is not Int32")
        if typ == "matmul" and len(op.in_df) >= 2:
            if op.in_df[0] not in (DF.Int8, DF.UInt8) or op.in_df[1] not in (DF.Int8, DF.UInt8):
                problems.append("matmul inputs 0 and 1 must be Int8/UInt8")
            if a.l1_acc:
                problems.append("integer matmul cannot use l1_acc")
        if problems:
            c.add(op, "df.int", "integer inputs: " + "; ".join(problems), "Int formats, HiFi4, acc_df Int32",
                  [d.value for d in op.in_df])
    elif acc == DF.Int32 and not (quant or fused):
        c.add(op, "df.int_acc", "acc_df Int32 needs integer inputs (or a quantization / fused op)", "a 16/32-bit "
              "float acc_df", acc.value)
    if not int_in and (a.requant or a.dequant):
        c.add(op, "df.int", "requant/dequant need integer inputs", "Int8/Int32 inputs", [d.value for d in op.in_df])
    if (dequant or requant) and len(op.in_df) >= 2:
        ok = op.in_df[0] in (DF.Int32, DF.Int8) and op.in_df[1] == DF.Float32 and acc == DF.Int32 and \
            out == (DF.Float32 if dequant else DF.Int8)
        if not ok:
            c.add(op, "df.quant", f"{typ} needs in_df [Int32, Float32], acc_df Int32 and out_df "
                  f"{'Float32' if dequant else 'Int8'}", None, [d.value for d in op.in_df] + [out.value])
    if quant and len(op.in_df) >= 2:
        if op.in_df[0] != DF.Float32 or op.in_df[1] != DF.Float32 or out != DF.Int8 or acc != DF.Int32:
            c.add(op, "df.quant", "quantization needs in_df Float32, out_df Int8 and acc_df Int32", None,
                  [d.value for d in op.in_df] + [out.value])


# --- §3.2 inputs, TMs and shapes; §3.4 tile dims; §3.5 untilize / cross-graph / input_count ---------------------------

def _tm_error(c: _Ctx, obj, where: str, e: TMError) -> None:
    c.add(obj, e.rule, f"{where}: {e}", e.expected, e.actual)


def _sub_op_geometry(op: Op, s) -> OpGeometry:
    """A fused sub-op runs on its fused op's grid and t with its own blocking and attributes."""
    return OpGeometry(s.type, tuple(op.grid_size), op.t, tuple(s.mblock), tuple(s.ublock), s.attrs)


def _check_fused_input(c: _Ctx, op: Op, index: int, src: str, shape: tuple) -> None:
    """A fused op's input `index` must match every sub-op reading `input<index>` after the sub-op's own TMs."""
    f = (c.n.fused_ops or {}).get(op.attrs.fused_op_id) if op.attrs.fused_op_id is not None else None
    if f is None:
        return
    name = f"input{index}"
    for sched in f.schedules:
        for s in sched:
            if not _pos(*s.mblock, *s.ublock):
                continue
            for j, x in enumerate(s.inputs):
                if x != name:
                    continue
                want, _ = expected_input(_sub_op_geometry(op, s), j)
                try:
                    got = shape_after_tms(shape, s.input_tms.get(j) or [])
                except TMError as e:
                    _tm_error(c, op, f"fused op {f.id}: sub-op {s.name} input {j}", e)
                    continue
                if want is not None and got != want:
                    c.add(op, "shape.fused", f"input {index} ({src}) feeds sub-op {s.name} (input {j}) of fused op "
                          f"{f.id} with (t, rt, ct) {got} after its TMs, but the {s.type} sub-op expects {want}",
                          want, got)


def check_connections(c: _Ctx) -> None:
    n = c.n
    queues = n.queues
    untilizers = set()
    for gname, g in n.graphs.items():
        for name, op in g.ops.items():
            if op.untilize_output:
                untilizers.add(name)
            if not _pos(op.t, *op.mblock, *op.ublock, *op.grid_size):
                continue
            in_tiles = []
            for i, src in enumerate(op.inputs):
                prod = g.ops.get(src)
                if prod is None:
                    prod = queues.get(src)
                    if prod is None:
                        other = c.ops.get(src)
                        if other is None:
                            c.add(op, "input.missing", f"input {i} {src!r} is neither a queue nor an op",
                                  "a queue or an op of this graph", src)
                            in_tiles.append(None)
                            continue
                        if c.gs or other.graph == gname:
                            c.add(op, "graph.cross_graph_input", f"input {i} {src!r} is an op of graph {other.graph}; "
                                  "across graphs data must go through a queue", f"an op of {gname} or a queue", src)
                        prod = other
                tms = op.tms(i)
                _check_tm_legality(c, op, i, tms)
                # tile dims seen by the input (§3.4)
                td = prod.effective_tile_dim
                for tm in tms:
                    if tm[0] == "transpose":
                        td = _TRANSPOSE_TILE.get(td, td)
                in_tiles.append(td)
                if isinstance(prod, Op) and prod.untilize_output:
                    c.add(op, "untilize.feeds_op", f"input {i} {src!r} has untilize_output; untilized output may "
                          "not feed ops", "a tilized producer", src)
                if not _pos(prod.t, *prod.mblock, *prod.ublock, *prod.grid_size):
                    continue
                try:
                    shape = edge_shape(prod.shape, tms, *_edge_pads(op, i))
                except TMError as e:
                    _tm_error(c, op, f"input {i} ({src})", e)
                    continue
                if op.type == "fused_op":
                    _check_fused_input(c, op, i, src, shape)
                    continue
                want, rule = expected_input(op.geometry, i)
                if want is not None and shape != want:
                    kind = "queue" if isinstance(prod, Queue) else "op"
                    c.add(op, rule, f"input {i} ({kind} {src}): post-TM producer (t, rt, ct) {shape} does not match "
                          f"what the {op.type} consumer expects {want}", want, shape)
            _check_tile_dims(c, op, in_tiles)
    # queues fed by ops: shapes, tile dims, untilize
    untilize_queue: dict = {}
    for qname, q in queues.items():
        if not q.fed_by_op:
            continue
        prod = c.ops.get(q.input)
        if prod is None:
            continue
        if prod.name in untilizers:
            if q.grid_size != (1, 1):
                c.add(q, "untilize.queue_grid", f"a queue fed by untilize_output op {prod.name!r} needs grid_size "
                      "[1, 1]", [1, 1], list(q.grid_size))
            if prod.name in untilize_queue:
                c.add(prod, "untilize.queue_count", f"an untilize_output op must feed exactly one queue; it feeds "
                      f"{untilize_queue[prod.name]!r} and {qname!r}", 1, 2)
            untilize_queue.setdefault(prod.name, qname)
        if prod.effective_tile_dim != q.effective_tile_dim:
            c.add(q, "tile_dim.queue", f"a queue must have its producer {prod.name!r}'s tile_dim",
                  list(prod.effective_tile_dim), list(q.effective_tile_dim))
        if not (_pos(prod.t, *prod.mblock, *prod.ublock, *prod.grid_size) and _pos(q.t, *q.mblock, *q.ublock,
                                                                                      *q.grid_size)):
            continue
        try:
            shape = shape_after_tms(prod.shape, q.input_tms or [])
        except TMError as e:
            _tm_error(c, q, f"input_tms ({prod.name})", e)
            continue
        if shape != q.shape:
            c.add(q, "shape.queue", f"producer op {prod.name} writes (t, rt, ct) {shape} but the queue holds "
                  f"{q.shape}", q.shape, shape)
    for name in untilizers:
        if name not in untilize_queue:
            op = c.ops[name]
            c.add(op, "untilize.queue_count", "an untilize_output op must feed a queue", 1, 0)
    for qname in untilize_queue.values():
        for g in n.graphs.values():
            for op in g.ops.values():
                if qname in op.inputs:
                    c.add(op, "untilize.feeds_op", f"input {qname!r} is written by an untilize_output op; untilized "
                          "output may not feed ops", "a tilized queue", qname)
    # §3.5 queue input_count: every graph consuming a `queue` must agree
    counts: dict = {}
    for g in n.graphs.values():
        for op in g.ops.values():
            for src in op.inputs:
                q = queues.get(src)
                if q is not None and q.type == "queue" and g.input_count is not None:
                    counts.setdefault(src, {}).setdefault(g.input_count, g.name)
    for qname, by_count in counts.items():
        if len(by_count) > 1:
            c.add(queues[qname], "queue.input_count", "graphs consuming a queue must have the same input_count",
                  "one input_count", {v: k for k, v in by_count.items()})


def _edge_pads(op: Op, index: int) -> tuple:
    """(unpad, pad) of input `index` as (rt, ct) pairs, None where not set."""
    unpad, pad = op.input_unpad.get(index), op.input_pad.get(index)
    return ((unpad.rt or 0, unpad.ct or 0) if unpad is not None else None,
            (pad.rt or 0, pad.ct or 0) if pad is not None else None)


def _check_tm_legality(c: _Ctx, op: Op, index: int, tms: list) -> None:
    typ = op.type
    seen_pad = False
    for tm in tms:
        kind = tm[0]
        if seen_pad and kind not in ("hslice", "vslice"):
            c.add(op, "tm.pad", f"input {index}: only slices may follow a pad TM", "hslice/vslice", kind)
        if kind == "pad":
            seen_pad = True
            if op.input_pad.get(index) is not None:
                c.add(op, "tm.pad", f"input {index}: padding must be specified once", "one pad", "pad TM and "
                      f"input_{index}_pad")
        elif kind == "tile_broadcast":
            c.add(op, "tm.tile_broadcast", f"input {index}: tile_broadcast is only allowed in fused ops",
                  "a fused-op schedule", typ)
        elif kind == "transpose":
            illegal = transpose_illegal(typ, index, c.arch)
            if illegal is not None:
                c.add(op, "tm.transpose", *illegal)
            elif typ != "matmul" and bool(op.in_df) and op.in_df[0] == DF.Int32:
                c.add(op, "tm.transpose", "transpose of an Int32 input is not supported", "not Int32", "Int32")


def _check_tile_dims(c: _Ctx, op: Op, in_tiles: list) -> None:
    typ = op.type
    out_td = op.effective_tile_dim
    if all(td in (None, (32, 32)) for td in in_tiles) and out_td == (32, 32):
        return
    a = op.attrs
    dense = typ == "matmul" and not a.identity
    ident = typ == "matmul" and bool(a.identity)
    elt = typ in _TINY_OK_TYPES
    for i, td in enumerate(in_tiles):
        if td in (None, (32, 32)):
            continue
        ok = (dense and (td == (1, 32) or i != 2)) or (ident and i == 1) or elt
        if not ok:
            c.add(op, "tile_dim.op_input", f"tile_dim {list(td)} on input {i} of a {typ} op: tiny tiles are "
                  "supported on dense matmul inputs 0/1, identity matmul input 1 and datacopy/SFPU/binary ops",
                  [32, 32], list(td))
    if not tile_data_aligned(op.out_df, out_td):
        c.add(op, "tile_dim.alignment", f"{op.out_df.value} output tiles of {list(out_td)} are not 32 B aligned",
              "a 32 B aligned tile", list(out_td))
    for i, td in enumerate(in_tiles):
        if td is not None and i < len(op.in_df) and not tile_data_aligned(op.in_df[i], td):
            c.add(op, "tile_dim.alignment", f"input {i}: {op.in_df[i].value} tiles of {list(td)} are not 32 B aligned",
                  "a 32 B aligned tile", list(td))
    ints = (DF.Int8, DF.Int32)
    if any(d in ints for d in op.in_df) or op.out_df in ints:
        c.add(op, "tile_dim.int", "tiny tiles are not supported with Int8/Int32 formats", [32, 32],
              [list(t) for t in in_tiles if t] + [list(out_td)])
    first = in_tiles[0] if in_tiles else None
    if typ in BINARY_OPS and len(in_tiles) >= 2 and None not in in_tiles[:2] and in_tiles[0] != in_tiles[1]:
        c.add(op, "tile_dim.binary", "binary op inputs must have the same tile dims", list(in_tiles[0]),
              list(in_tiles[1]))
    if elt and first is not None and (first == (32, 16)) != (out_td == (32, 16)):
        c.add(op, "tile_dim.32x16", "32x16 input tiles need 32x16 output tiles and vice versa", list(first),
              list(out_td))
    if typ in SFPU_OPS and first is not None and first not in ((32, 32), (32, 16)) and a.vector not in (None, "r"):
        c.add(op, "tile_dim.sfpu_vector", "SFPU ops on Nx32 tiles need vector mode r", "r", a.vector)
    if typ in SFPU_OPS and first == (32, 16) and a.vector not in (None, "c"):
        c.add(op, "tile_dim.sfpu_vector", "SFPU ops on 32x16 tiles need vector mode c", "c", a.vector)
    if typ == "matmul" and len(in_tiles) > 1 and in_tiles[1] is not None:
        if (in_tiles[1] == (32, 16)) != (out_td == (32, 16)):
            c.add(op, "tile_dim.matmul_32x16", "matmul input 1 tiles and output tiles must both be 32x16 or neither",
                  list(in_tiles[1]), list(out_td))
    if dense and (a.sfpu_op is not None or op.gradient_op):
        c.add(op, "tile_dim.matmul_features", "matmul with tiny tiles cannot fuse an SFPU op or accumulate gradients",
              "32x32 tiles", list(out_td))
    if typ in DATACOPY_OPS and op.gradient_op and first is not None and first != out_td:
        c.add(op, "tile_dim.gradient_datacopy", "a gradient datacopy needs equal input and output tile dims",
              list(out_td), list(first))


# --- §1.7 fused ops --------------------------------------------------------------------------------------------

def check_fused_ops(c: _Ctx) -> None:
    fused = c.n.fused_ops or {}
    for f in fused.values():
        if f.inputs < 0 or f.intermediates < 0:
            c.add(f, "fused.counts", "inputs and intermediates must be >= 0", ">= 0",
                  {"inputs": f.inputs, "intermediates": f.intermediates})
        for sched in f.schedules:
            if not sched:
                c.add(f, "fused.empty_schedule", "a schedule needs at least one op", ">= 1 op", 0)
            prev = ""
            for s in sched:
                where = f"fused_op {f.id} sub-op {s.name}"
                dest_in = "dest" in s.inputs
                for name in s.inputs:
                    if name == "dest":
                        continue
                    if name.startswith("input"):
                        idx = name[5:]
                        if not (idx.isdigit() and int(idx) < f.inputs):
                            c.add(where, "fused.input_name", f"{name!r} is not one of the fused op's {f.inputs} "
                                  "inputs", f"input0..input{f.inputs - 1}", name, line=s.line)
                    elif name.startswith("intermed"):
                        idx = name[8:]
                        if not (idx.isdigit() and int(idx) < f.intermediates):
                            c.add(where, "fused.input_name", f"{name!r} is not one of the fused op's "
                                  f"{f.intermediates} intermediates", f"intermed0..intermed{f.intermediates - 1}",
                                  name, line=s.line)
                    else:
                        c.add(where, "fused.input_name", f"sub-op input {name!r} must be inputN, intermedN or dest",
                              "inputN, intermedN or dest", name, line=s.line)
                out = s.output
                if not (out in ("dest", "output") or (out.startswith("intermed") and out[8:].isdigit()
                                                       and int(out[8:]) < f.intermediates)):
                    c.add(where, "fused.output_name", f"sub-op output {out!r} must be dest, output or intermedN",
                          "dest, output or intermedN", out, line=s.line)
                if prev == "dest" and not dest_in:
                    c.add(where, "fused.dest_read", "the previous sub-op writes dest, so this one must read dest",
                          "dest among the inputs", s.inputs, line=s.line)
                if dest_in and prev != "dest":
                    c.add(where, "fused.dest_first", "reads dest but the previous sub-op does not write dest" +
                          (" (it is the first of the schedule)" if not prev else ""), "previous output dest",
                          prev or None, line=s.line)
                if s.output == "output" and s.type == "matmul" and (s.attrs.m_k or 1) > 1:
                    c.add(where, "fused.matmul_output", "a matmul with m_k > 1 cannot be the schedule's output",
                          "m_k == 1", s.attrs.m_k, line=s.line)
                for i, tms in s.input_tms.items():
                    for tm in tms:
                        if tm[0] == "transpose":
                            c.add(where, "tm.transpose", "transpose is not supported inside fused ops", "no transpose",
                                  "transpose", line=s.line)
                        elif tm[0] == "pad":
                            c.add(where, "tm.pad", "pad is not allowed in fused ops", "no pad", "pad", line=s.line)
                if s.pop_last:
                    for p in s.pop_last:
                        if not p.startswith("intermed"):
                            c.add(where, "fused.pop", f"pop_last {p!r} must be an intermediate buffer", "intermedN", p,
                                  line=s.line)
                prev = s.output
    # graph ops using fused ops
    for g in c.n.graphs.values():
        for op in g.ops.values():
            if op.type != "fused_op":
                continue
            fid = op.attrs.fused_op_id
            f = fused.get(fid) if fid is not None else None
            if f is None:
                c.add(op, "fused.missing_id", f"fused_op_id {fid!r} is not in the fused_ops section",
                      "an id of fused_ops", fid)
                continue
            if f.inputs != len(op.inputs):
                c.add(op, "fused.input_count", f"fused op {fid} has {f.inputs} inputs", f.inputs, len(op.inputs))
            limit = 4 if op.acc_df in _FP32_ACC else 8
            for sched in f.schedules:
                for s in sched:
                    if not _pos(*s.mblock, *s.ublock):
                        c.add(op, "fused.dims", f"sub-op {s.name}: mblock and ublock must be > 0", "> 0",
                              {"mblock": list(s.mblock), "ublock": list(s.ublock)})
                        continue
                    if s.ublock[0] * s.ublock[1] > limit:
                        c.add(op, "dest.ublock_limit", f"fused sub-op {s.name}: ublock {list(s.ublock)} does not fit "
                              f"the dest register", f"<= {limit} tiles", s.ublock[0] * s.ublock[1])
                    if s.output == "output" and (tuple(s.mblock) != tuple(op.mblock) or
                                                 tuple(s.ublock) != tuple(op.ublock)):
                        c.add(op, "fused.output_dims", f"sub-op {s.name} writes the output, so its mblock/ublock must "
                              f"equal the op's", {"mblock": list(op.mblock), "ublock": list(op.ublock)},
                              {"mblock": list(s.mblock), "ublock": list(s.ublock)})


# --- §3.6 programs and queue settings -----------------------------------------------------------------------------

_BOOL_SETTINGS = ("prologue", "epilogue", "zero", "read_only")
_PTR_SETTINGS = ("rd_ptr_local", "rd_ptr_global", "wr_ptr_global", "rd_ptr_autoinc", "global_rdptr_autoinc",
                 "global_wrptr_autoinc")


def check_programs(c: _Ctx) -> None:
    n = c.n
    io: dict = {}
    for gname, g in n.graphs.items():
        s = set()
        for op in g.ops.values():
            s.update(x for x in op.inputs if x in n.queues)
        io[gname] = s
    for qname, q in n.queues.items():
        if q.fed_by_op:
            op = c.ops.get(q.input)
            if op is not None and op.graph in io:
                io[op.graph].add(qname)
    grad_queues: dict = {}
    for qname, q in n.queues.items():
        op = c.ops.get(q.input) if q.fed_by_op else None
        if op is not None and op.gradient_op:
            grad_queues.setdefault(op.graph, []).append(qname)
    for p in n.programs:
        _check_program(c, p, io, grad_queues)


def _check_program(c: _Ctx, p: Program, io: dict, grad_queues: dict) -> None:
    n = c.n
    if not p.instructions:
        c.add(p, "program.empty", "a program needs at least one instruction", ">= 1 instruction", 0)
        return
    declared: set = set()
    params: set = set()
    depth = 0
    loop_lines = []

    def use(v, ins, what: str):
        if isinstance(v, str) and v.startswith("$") and v not in declared:
            c.add(p, "program.undefined_var", f"{what} uses variable {v!r} before it is declared",
                  "a declared variable", v, line=ins.line)

    for idx, ins in enumerate(p.instructions):
        if isinstance(ins, Param):
            if idx != 0:
                c.add(p, "program.param_first", "param must be the first instruction of a program", 0, idx,
                      line=ins.line)
            for v in ins.names:
                if v in declared:
                    c.add(p, "program.var_redeclared", f"variable {v!r} is declared twice", "a new name", v,
                          line=ins.line)
                declared.add(v)
                params.add(v)
        elif isinstance(ins, Var):
            for v in ins.vars:
                if not (isinstance(v, str) and v.startswith("$")):
                    c.add(p, "program.var_name", f"variable names start with $: {v!r}", "$name", v, line=ins.line)
                if v in declared:
                    c.add(p, "program.var_redeclared", f"variable {v!r} is declared twice", "a new name", v,
                          line=ins.line)
                if depth and v.startswith("$c_"):
                    c.add(p, "program.const_in_loop", f"constant {v!r} may not be initialized inside a loop",
                          "outside loops", f"loop depth {depth}", line=ins.line)
                declared.add(v)
        elif isinstance(ins, VarInst):
            want = VARINST_OPCODES.get(ins.op)
            if want is None:
                c.add(p, "program.varinst", f"invalid varinst opcode {ins.op!r}", "one of " +
                      ", ".join(VARINST_OPCODES), ins.op, line=ins.line)
            elif len(ins.args) != want:
                c.add(p, "program.varinst", f"varinst {ins.op} takes {want} operand(s) after the output", want,
                      len(ins.args), line=ins.line)
            for arg in ins.args:
                use(arg, ins, "varinst")
                if not isinstance(arg, (int, str)) or isinstance(arg, bool):
                    c.add(p, "program.varinst", f"varinst operand {arg!r} must be an integer or a variable",
                          "int or $var", arg, line=ins.line)
            if ins.op in ("inc", "incwrap"):
                use(ins.dst, ins, "varinst")      # read-modify-write
            elif isinstance(ins.dst, str) and ins.dst.startswith("$"):
                declared.add(ins.dst)             # set/add/mul create a local variable if needed
            else:
                c.add(p, "program.var_name", f"varinst output {ins.dst!r} must be a $variable", "$name", ins.dst,
                      line=ins.line)
            if depth and ins.dst.startswith("$c_"):
                c.add(p, "program.const_in_loop", f"constant {ins.dst!r} may not be modified inside a loop",
                      "outside loops", f"loop depth {depth}", line=ins.line)
        elif isinstance(ins, Loop):
            cnt = ins.count
            if isinstance(cnt, bool) or not isinstance(cnt, (int, str)) or (isinstance(cnt, int) and cnt < 1):
                c.add(p, "program.loop_count", "loop needs a count >= 1 or a variable", ">= 1 or $var", cnt,
                      line=ins.line)
            elif isinstance(cnt, str):
                if not cnt.startswith("$"):
                    c.add(p, "program.loop_count", "loop needs a count >= 1 or a variable", ">= 1 or $var", cnt,
                          line=ins.line)
                use(cnt, ins, "loop")
            depth += 1
            loop_lines.append(ins.line)
        elif isinstance(ins, EndLoop):
            if depth == 0:
                c.add(p, "program.loop_balance", "endloop without a loop", "a matching loop", "endloop",
                      line=ins.line)
            else:
                depth -= 1
                loop_lines.pop()
        elif isinstance(ins, QueueAlloc):
            for q in ins.queues:
                if q not in n.queues:
                    c.add(p, "program.unknown_queue", f"{ins.opcode} names queue {q!r} which does not exist",
                          "a queue of this netlist", q, line=ins.line)
        elif isinstance(ins, Execute):
            _check_execute(c, p, ins, io, grad_queues, params, use)
    if depth:
        c.add(p, "program.loop_balance", f"{depth} loop(s) are not closed by endloop", 0, depth, line=loop_lines[-1])


def _check_execute(c: _Ctx, p: Program, ins: Execute, io: dict, grad_queues: dict, params: set, use) -> None:
    n = c.n
    g = n.graphs.get(ins.graph_name)
    if g is None:
        c.add(p, "program.unknown_graph", f"execute names graph {ins.graph_name!r} which does not exist",
              "a graph of this netlist", ins.graph_name, line=ins.line)
        return
    graph_io = io.get(ins.graph_name, set())
    for qname, s in ins.queue_settings.items():
        line = s.line or ins.line
        q = n.queues.get(qname)
        if q is None:
            c.add(p, "queue_settings.unknown_queue", f"queue_settings for {qname!r} which is not a queue",
                  "a queue of this netlist", qname, line=line)
            continue
        if qname not in graph_io:
            c.add(p, "queue_settings.not_graph_io", f"queue_settings for {qname!r}, which graph {ins.graph_name} "
                  "neither reads nor writes", f"an input or output queue of {ins.graph_name}", qname, line=line)
        if s.rd_ptr_global is None:
            c.add(p, "queue_settings.rd_ptr_global", f"queue_settings for {qname!r} need rd_ptr_global",
                  "rd_ptr_global", None, line=line)
        if q.type == "queue":
            if s.wr_ptr_global is not None:
                c.add(p, "queue_settings.queue_ptrs", f"{qname!r} is a queue: wr_ptr_global is only for rams",
                      "no wr_ptr_global", s.wr_ptr_global, line=line)
            if s.rd_ptr_local is None:
                c.add(p, "queue_settings.queue_ptrs", f"{qname!r} is a queue: it needs rd_ptr_local and "
                      "rd_ptr_global", "rd_ptr_local", None, line=line)
            if _truthy(s.epilogue) and q.fed_by_op:
                c.add(p, "queue_settings.epilogue_op_fed", f"{qname!r} is an op-fed queue: epilogue: true is not "
                      "supported", "epilogue false", s.epilogue, line=line)
        else:
            if s.rd_ptr_local is not None:
                c.add(p, "queue_settings.ram_ptrs", f"{qname!r} is a ram: rd_ptr_local is only for queues",
                      "no rd_ptr_local", s.rd_ptr_local, line=line)
            if s.wr_ptr_global is None:
                c.add(p, "queue_settings.ram_ptrs", f"{qname!r} is a ram: it needs rd_ptr_global and wr_ptr_global",
                      "wr_ptr_global", None, line=line)
        default_rd = "1" if q.type == "queue" else "0"
        rd = str(s.rd_ptr_autoinc) if s.rd_ptr_autoinc is not None else default_rd
        grd = str(s.global_rdptr_autoinc) if s.global_rdptr_autoinc is not None else "0"
        if grd != "0" and rd != "0" and rd != grd:
            c.add(p, "queue_settings.autoinc", f"{qname!r}: rd_ptr_autoinc and global_rdptr_autoinc must be equal "
                  "when both are set", grd, rd, line=line)
        for f in _BOOL_SETTINGS:
            v = getattr(s, f)
            if v is None:
                continue
            if isinstance(v, str) and v.startswith("$"):
                use(v, ins, f"queue_settings {qname}.{f}")
                if f in ("prologue", "epilogue") and v in params:
                    c.add(p, "queue_settings.static", f"{qname!r}: {f} cannot be a runtime parameter", "a constant",
                          v, line=line)
            elif not (isinstance(v, bool) or (isinstance(v, int) and v in (0, 1)) or
                      (isinstance(v, str) and v.lower() in ("true", "false"))):
                c.add(p, "queue_settings.value", f"{qname!r}: {f} must be a boolean or a variable", "true/false/$var",
                      v, line=line)
        for f in _PTR_SETTINGS:
            v = getattr(s, f)
            if v is None:
                continue
            if isinstance(v, str) and v.startswith("$"):
                use(v, ins, f"queue_settings {qname}.{f}")
            elif isinstance(v, bool) or not isinstance(v, int):
                c.add(p, "queue_settings.value", f"{qname!r}: {f} must be an integer or a variable", "int or $var", v,
                      line=line)
    for qname in sorted(graph_io):
        q = n.queues[qname]
        if qname not in ins.queue_settings and q.input == "HOST" and q.type == "queue":
            c.add(p, "queue_settings.missing", f"execute of {ins.graph_name} has no queue_settings for input queue "
                  f"{qname!r}", f"queue_settings for {qname}", None, line=ins.line)
    for qname in grad_queues.get(ins.graph_name, []):
        if qname not in ins.queue_settings:
            c.add(p, "queue_settings.gradient_missing", f"execute of {ins.graph_name}: gradient output queue "
                  f"{qname!r} needs a queue_setting", f"queue_settings for {qname}", None, line=ins.line)


# --- §3.5 DRAM / host buffers ---------------------------------------------------------------------------------------

def _buffer_bytes(c: _Ctx, q: Queue) -> int:
    """Bytes of one buffer; data is untilized (no tile headers) when an untilize_output op writes it."""
    prod = c.ops.get(q.input) if q.fed_by_op else None
    return queue_buffer_bytes(q, tilized=not (prod is not None and prod.untilize_output))


def _ranges(c: _Ctx, q: Queue) -> list:
    """[((device, loc, channel), start, end)] of the queue's buffers."""
    if not _pos(q.t, *q.mblock, *q.ublock) or q.entries < 0:
        return []
    size = _buffer_bytes(c, q)
    return [((dev, q.loc, ch), addr, addr + size) for dev in q.devices for ch, addr in q.allocations]


def check_dram(c: _Ctx) -> None:
    """Static buffers may not overlap (per device, location, channel), except aliased rams: an explicit `alias`,
    or static rams with identical allocations (the runtime treats those as dual views of one buffer)."""
    cap = c.spec.dram_channel_bytes if c.spec else None
    static: dict = {}
    base: dict = {}      # queue -> the queue it aliases
    by_alloc: dict = {}
    for name, q in c.n.queues.items():
        if name in c.dynamic:
            continue
        rs = _ranges(c, q)
        static[name] = rs
        if q.alias is not None:
            base[name] = q.alias
        elif q.type == "ram" and rs:
            by_alloc.setdefault(tuple(rs), []).append(name)
        if cap is not None and q.loc == "dram":
            for (_, _, ch), a0, a1 in rs:
                if a1 > cap:
                    c.add(q, "device.dram_capacity", f"buffer [{a0:#x}, {a1:#x}) runs past the end of DRAM channel "
                          f"{ch} ({cap:#x} bytes)", f"end <= {cap:#x}", hex(a1))
                    break
    for names in by_alloc.values():
        if len(names) > 1:
            head = max(names, key=lambda n: c.n.queues[n].entries)
            for n in names:
                if n != head:
                    base[n] = head
    c.aliased = lambda a, b: base.get(a, a) == base.get(b, b)
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
                if other != name and not c.aliased(name, other):
                    c.add(c.n.queues[name], "queue.dram_overlap", f"{loc} buffer [{a0:#x}, {a1:#x}) on device {dev} "
                          f"channel {ch} overlaps queue {other!r} (which ends at {e:#x})", f"start >= {e:#x}",
                          hex(a0))
                    break
            open_.append((a1, name))
    _check_dynamic(c, spans)


def _check_dynamic(c: _Ctx, static_spans: dict) -> None:
    """Dynamically allocated queues must not overlap static buffers nor other live dynamic buffers."""
    if not c.dynamic:
        return
    n = c.n

    def spans_of(q):
        return _ranges(c, q)

    reported = set()
    for p in n.programs:
        live: dict = {}
        for ins in p.instructions:
            if not isinstance(ins, QueueAlloc):
                continue
            for qname in ins.queues:
                q = n.queues.get(qname)
                if q is None:
                    continue
                if ins.opcode == "deallocate_queue":
                    live.pop(qname, None)
                    continue
                mine = spans_of(q)
                for key, a0, a1 in mine:
                    for b0, b1, other in static_spans.get(key, []):
                        if a0 < b1 and b0 < a1 and (qname, other) not in reported and not c.aliased(qname, other):
                            reported.add((qname, other))
                            c.add(q, "queue.dram_overlap", f"dynamic buffer [{a0:#x}, {a1:#x}) overlaps static queue "
                                  f"{other!r} on {key[1]} channel {key[2]}", "disjoint buffers", hex(a0))
                    for other, theirs in live.items():
                        for k2, b0, b1 in theirs:
                            if k2 == key and a0 < b1 and b0 < a1 and (qname, other) not in reported and \
                                    not c.aliased(qname, other):
                                reported.add((qname, other))
                                c.add(q, "queue.dram_overlap", f"dynamic buffer [{a0:#x}, {a1:#x}) overlaps queue "
                                      f"{other!r}, allocated at the same time, on {key[1]} channel {key[2]}",
                                      "disjoint buffers", hex(a0))
                live[qname] = mine


# --- §3.8 L1 budget ---------------------------------------------------------------------------------------------

def op_l1_bytes(c: _Ctx, op: Op) -> dict:
    """L1 bytes one core of `op` needs, by buffer kind (`pybuda.arch.l1.footprint` with the legal minimum input
    buffers; a prologued queue holds the core's whole slice; see docs/netlist.md "L1 budget")."""
    geom = c.n.geometry_of(op)
    inputs = []
    for i, src in enumerate(op.inputs):
        tb = tile_bytes(op.in_df[i] if i < len(op.in_df) else op.out_df)
        q = c.n.queues.get(src)
        slice_tiles = 0
        if q is not None and op.graph in c.prologue.get(src, ()) and _pos(q.t, *q.mblock, *q.ublock, *q.grid_size):
            slice_tiles = prologue_tiles_per_core(geom, i, q.shape)
        inputs.append(InputBuffer(tb, prologue_tiles=slice_tiles,
                                  min_size_tiles=_listed(op.input_buf_min_size_tiles, i),
                                  dram_io_tiles=_listed(op.input_dram_io_buf_size_tiles, i)))
    f = c.n.fused_op_of(op) if op.type == "fused_op" else None
    fused_tiles = intermediate_tiles(f.sub_blocks()) if f else 0
    return footprint(geom, inputs, out_tile_bytes=tile_bytes(op.out_df, op.effective_tile_dim,
                                                             tilized=not op.untilize_output),
                     intermed_tile_bytes=tile_bytes(op.intermed_df, op.effective_tile_dim),
                     intermed_separate=op.intermed_df != op.out_df, buf_size_mb=op.buf_size_mb,
                     gradient_op=bool(op.gradient_op), fused_intermed_tiles=fused_tiles,
                     overlay_size=op.overlay_size or 0, latency_hiding=False)


def _listed(values: list | None, index: int) -> int:
    return values[index] if values and index < len(values) else 0


DATA_BUFFER_SPACE_BASE = 0x33000   # L1 below this holds firmware, kernels, tile headers and the overlay blob


def l1_capacity(spec: DeviceSpec) -> int:
    """L1 bytes per core the backend can give op buffers: everything above DATA_BUFFER_SPACE_BASE (§3.8)."""
    return spec.l1_size - DATA_BUFFER_SPACE_BASE


def check_l1(c: _Ctx) -> None:
    if c.spec is None:
        return
    budget = l1_capacity(c.spec)
    for g in c.n.graphs.values():
        for op in g.ops.values():
            if not op.is_tensix or not _pos(op.t, *op.mblock, *op.ublock, *op.grid_size):
                continue
            h, w = op.footprint
            if h > c.spec.grid_rows or w > c.spec.grid_cols:
                continue      # reported by grid.bounds
            parts = op_l1_bytes(c, op)
            total = sum(parts.values())
            if total > budget:
                detail = ", ".join(f"{k} {v:,}" for k, v in parts.items() if v)
                c.add(op, "l1.budget", f"needs {total:,} B of L1 per core ({detail}), more than the {budget:,} B "
                      f"of data-buffer space on {c.arch}", f"<= {budget:,} B", f"{total:,} B")


# --- entry points ---------------------------------------------------------------------------------------------

RULE_FAMILIES = (check_sections, check_queues, check_graphs, check_connections, check_fused_ops, check_programs,
                 check_dram, check_l1)


def check(netlist, arch: str | None = None, chips: int | None = None,
          device: DeviceSpec | str | None = None) -> list[NetlistViolation]:
    """Every violation of the backend's rules (empty list: the netlist is valid).

    `arch` selects among the archs `devices` lists (default: the first one with a device description);
    `device` (a DeviceSpec or a name such as "e75") checks against that device's grid and chip count instead of
    the arch's largest single chip; `chips` bounds target_device."""
    if not isinstance(netlist, Netlist):
        from .reader import load
        netlist = load(netlist)
    if isinstance(device, str):
        from ..device import get_device
        device = get_device(device)
    if device is not None:
        arch = arch or device.arch
        chips = chips if chips is not None else device.chips
    archs = netlist.archs
    spec = None
    errors: list[NetlistViolation] = []
    chosen = arch or netlist.arch
    if arch is not None and arch not in archs:
        errors.append(NetlistViolation(netlist.source, netlist.devices.line, "devices", "devices.arch",
                                       f"one of {archs}", arch, f"arch {arch!r} is not listed in devices"))
    if device is not None and device.arch == chosen:
        spec = device
    elif chosen in SUPPORTED_ARCHS:
        spec = arch_spec(chosen)
    else:
        errors.append(NetlistViolation(netlist.source, netlist.devices.line, "devices", "devices.arch",
                                       "grayskull or wormhole_b0", chosen,
                                       f"no device description for arch {chosen!r}; device rules not checked"))
    c = _Ctx(netlist, chosen, spec, chips)
    c.errors.extend(errors)
    for rule in RULE_FAMILIES:
        rule(c)
    return c.errors


def validate(netlist, arch: str | None = None, chips: int | None = None,
             device: DeviceSpec | str | None = None) -> Netlist:
    """Apply the backend's rules (see `check`); raise `NetlistError` listing every violation, else return the
    netlist. Accepts a Netlist, a path or YAML text."""
    if not isinstance(netlist, Netlist):
        from .reader import load
        netlist = load(netlist)
    errors = check(netlist, arch, chips, device)
    if errors:
        raise NetlistError(errors)
    return netlist
