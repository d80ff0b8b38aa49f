"""The Buda netlist as typed dataclasses (netlist-format.md §1, §2), each record declared once.

Every field of the backend's schema is a typed attribute declared with `schema.spec`: its YAML key, its kind
(parser, legal values, plain-data form), whether it is required, the op types it applies to; declaration order is
the legacy writer's order. The reader and the writer walk these declarations (`schema.record_schema`). Optional
fields are `None` when the netlist leaves them out (so a read -> write -> read round trip is exact); the
`effective_*` helpers give the backend's defaults. Shapes are in tiles: `(t, RT, CT)` with
`RT = grid_r*mblock_m*ublock_rt` and `CT = grid_c*mblock_n*ublock_ct`.

TMs are tuples, the same form `pybuda.arch.tms` uses: `("transpose",)`, `("broadcast", "r"|"c"|"z", n)`,
`("hslice", n)`, `("hstack", n)`, `("vslice", n)`, `("vstack", n)`, `("pad", rt, ct, value)` and, in fused-op
schedules only, `("tile_broadcast", "r"|"c")`.

Source lines (`line`) are 1-based lines of the YAML the object was read from (0 when built in memory); they
take no part in equality.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Union

from yaml.nodes import SequenceNode

from ..arch.cycles import FusedStep
from ..arch.fused import SubBlock
from ..arch.fused import input_roles as fused_input_roles
from ..arch.operands import OpGeometry
from ..arch.optypes import NON_TENSIX_OPS, SFPU_OPS
from ..dataformat import DataFormat, MathFidelity
from .schema import (ANY, BOOL, DF, DF_LIST, DRAM, FIDELITY, FLOAT, FORKED, FUSED_ID, GRID_LOC, HOST, INT,
                     INT_LIST, INT_OR_LIST, KERNEL_BROADCAST, NOT_IN_SUB_OPS, PAIR, SCALAR, SPLICE, STR, STR_LIST,
                     TMS, Bad, Kind, Noun, enum, read_str, record_data, record_items, record_kind, spec,
                     tile_dim_kind)

Pair = tuple  # (int, int)
TM = tuple
Scalar = Union[bool, int, float, str]

ARCHS = ("grayskull", "wormhole", "wormhole_b0", "blackhole")
SUPPORTED_ARCHS = ("grayskull", "wormhole_b0")   # archs this project has device descriptions for
TILE_DIMS = ((32, 32), (16, 32), (8, 32), (4, 32), (2, 32), (1, 32), (32, 16))
TILE_DIM = tile_dim_kind(TILE_DIMS)
UBLOCK_ORDER = enum(("r", "c"))

# varinst opcodes with their operand counts (excluding the output)
VARINST_OPCODES = {"set": 1, "add": 2, "mul": 2, "inc": 1, "incwrap": 2}


def shape_of(grid: Pair, t: int, mblock: Pair, ublock: Pair) -> tuple:
    """(t, RT, CT) in tiles of a blocked tensor."""
    return (t, grid[0] * mblock[0] * ublock[0], grid[1] * mblock[1] * ublock[1])


def elements_of(shape: tuple, tile_dim: Pair) -> tuple:
    """(t, R, C) in elements of a (t, RT, CT) tile shape with tiles of `tile_dim` (h, w)."""
    t, rt, ct = shape
    return (t, rt * tile_dim[0], ct * tile_dim[1])


def _read_arch(n):
    names = [read_str(x) for x in n.value] if n.__class__ is SequenceNode else [read_str(n)]
    for a in names:
        if a not in ARCHS:
            raise Bad(f"unknown arch {a!r}", "one of " + ", ".join(ARCHS), a, rule="schema.value", whole=True)
    if not names:
        raise Bad("the arch list is empty", "an arch", "[]", rule="schema.value", whole=True)
    return names if n.__class__ is SequenceNode else names[0]


ARCH = Kind("arch", _read_arch, lambda v: list(v) if isinstance(v, list) else v, ARCHS)


@dataclass(slots=True, kw_only=True)
class Devices:
    """`devices: {arch: name | [names]}`; a list means the netlist is valid for any of them (§1.1)."""

    NOUN = Noun("devices", "devices")

    arch: Union[str, list] = spec(ARCH)
    line: int = field(default=0, compare=False, repr=False)

    @property
    def archs(self) -> list:
        return list(self.arch) if isinstance(self.arch, list) else [self.arch]


@dataclass(slots=True, kw_only=True)
class Queue:
    """A DRAM or host queue / ram (§1.2). Fields in the legacy writer's order (`BudaQueue::as_string`)."""

    NOUN = Noun("queues", "a queue")

    name: str
    input: str = spec(STR)
    alias: str | None = spec(STR, default=None)
    type: str = spec(enum(("queue", "ram")))
    entries: int = spec(INT)
    grid_size: Pair = spec(PAIR)
    t: int = spec(INT)
    mblock: Pair = spec(PAIR)
    ublock: Pair = spec(PAIR)
    ublock_order: str | None = spec(UBLOCK_ORDER, default=None)
    tile_dim: Pair | None = spec(TILE_DIM, default=None)
    df: DataFormat = spec(DF)
    layout: str | None = spec(enum(("tilized", "flat")), default=None)
    target_device: Union[int, list, None] = spec(INT_OR_LIST, default=None)
    loc: str = spec(enum(("dram", "host")), names_required=True)   # and the field it names is required
    dram: list | None = spec(DRAM, default=None)   # [(channel, address), ...] one per buffer, row-major over the grid
    host: list | None = spec(HOST, default=None)   # [address | (channel, address), ...]
    read_ports: list | None = spec(INT_LIST, default=None)
    write_ports: list | None = spec(INT_LIST, default=None)
    input_tms: list | None = spec(TMS, default=None)
    line: int = field(default=0, compare=False, repr=False)

    @property
    def shape(self) -> tuple:
        return shape_of(self.grid_size, self.t, self.mblock, self.ublock)

    @property
    def element_shape(self) -> tuple:
        """(t, R, C) of one entry in elements (R, C count the tile_dim)."""
        return elements_of(self.shape, self.effective_tile_dim)

    @property
    def effective_ublock_order(self) -> str:
        return self.ublock_order or "r"

    @property
    def effective_tile_dim(self) -> Pair:
        return self.tile_dim or (32, 32)

    @property
    def is_ram(self) -> bool:
        """`type: ram` (random access, pointers set by the program) rather than a FIFO queue."""
        return self.type == "ram"

    @property
    def host_fed(self) -> bool:
        """The host writes it (`input: HOST`)."""
        return self.input == "HOST"

    @property
    def fed_by_op(self) -> bool:
        """The backend's `is_queue_fed_by_op`: the producer is neither HOST nor a net2net link."""
        return not (self.input == "HOST" or "net2net" in self.input)

    @property
    def devices(self) -> list:
        td = self.target_device
        return list(td) if isinstance(td, list) else [0 if td is None else td]

    @property
    def allocations(self) -> list:
        """[(channel, address)] of the buffers at `loc` (host addresses without a channel use channel 0)."""
        if self.loc == "dram":
            return list(self.dram or [])
        return [a if isinstance(a, tuple) else (0, a) for a in (self.host or [])]

    @property
    def buffer_tiles(self) -> int:
        """Tiles of one entry of one buffer (one grid cell)."""
        return self.t * self.mblock[0] * self.mblock[1] * self.ublock[0] * self.ublock[1]


@dataclass(slots=True, kw_only=True)
class Pad:
    """`input_N_pad: {rt, ct, pad_value}` / `input_N_unpad: {rt, ct}`."""

    rt: int | None = spec(INT, default=None)
    ct: int | None = spec(INT, default=None)
    pad_value: float | None = spec(FLOAT, default=None)


PAD = record_kind(Pad, ("rt", "ct", "pad_value"))
UNPAD = record_kind(Pad, ("rt", "ct"))

_FUSED = "fused_op"
_MATMUL = frozenset({"matmul", _FUSED})
_SPARSE = frozenset({"matmul", _FUSED, "buffer"})


def _attr(kind: Kind, on=ANY, sub_on=NOT_IN_SUB_OPS, **kw):
    """An op attribute: legal on the op types `on` (ANY: all), in fused sub-ops of the types `sub_on`."""
    return spec(kind, default=None, on=on, sub_on=sub_on, **kw)


@dataclass(slots=True, kw_only=True)
class Attributes:
    """Op attributes (§1.3, netlist_parser.cpp `parse_op` / `parse_scheduled_op_fields`); `None` = not set.
    Written in alphabetical order, as the legacy compiler does."""

    accumulate: bool | None = _attr(BOOL)
    act_t: int | None = _attr(INT, _MATMUL)
    approximate_mode: bool | None = _attr(BOOL)
    bias: bool | None = _attr(BOOL)
    dequant: bool | None = _attr(BOOL, frozenset({"matmul"}))
    dest_device: int | None = _attr(INT)
    dim: str | None = _attr(enum(("r", "c", "z"), "attr.reduce_dim"), frozenset({"reduce", _FUSED}),
                            frozenset({"reduce"}))
    egress_channels: list | None = _attr(INT_LIST)
    exp: int | None = _attr(INT, frozenset({"power", _FUSED}), frozenset({"power"}))
    fracture_factor: int | None = _attr(INT, _MATMUL)
    fused_op_id: str | None = _attr(FUSED_ID, frozenset({_FUSED}))
    granularity: str | None = _attr(enum(("ublock", "t"), "attr.splice_granularity"), frozenset({"splice"}))
    identity: bool | None = _attr(BOOL, _MATMUL)
    indices_len: int | None = _attr(INT, _MATMUL)
    ingress_channels: list | None = _attr(INT_LIST)
    k: int | None = _attr(INT, frozenset({"topk"}))
    kernel_broadcast: dict | None = _attr(KERNEL_BROADCAST)          # {input index: tiles}
    kernel_broadcast_per_t: dict | None = _attr(KERNEL_BROADCAST)    # {input index: tiles}
    l1_acc: bool | None = _attr(BOOL, frozenset({"matmul", "depthwise"}))
    m_k: int | None = _attr(INT, sub_on=ANY)
    min_buffer_input: int | None = _attr(INT, _SPARSE | {"depthwise"})
    num_columns: int | None = _attr(INT, _MATMUL)
    num_index_tiles: int | None = _attr(INT, _SPARSE)
    num_indices: int | None = _attr(INT, frozenset({"embedding"}))
    num_nz_strips: list | None = _attr(INT_LIST, _SPARSE)
    num_sparse_tiles: int | None = _attr(INT, _MATMUL)
    p: float | None = _attr(FLOAT, frozenset({"dropout", _FUSED}), frozenset({"dropout"}))
    relu_en: bool | None = _attr(BOOL, sub_on=ANY)
    relu_mode: str | None = _attr(enum(("min", "max"), "attr.relu_mode"), sub_on=ANY)
    relu_threshold: float | None = _attr(FLOAT, sub_on=ANY)
    requant: bool | None = _attr(BOOL, frozenset({"matmul"}))
    seed: int | None = _attr(INT, frozenset({"dropout", _FUSED}), frozenset({"dropout"}))
    sfpu_execution_thread: str | None = _attr(enum(("math", "pack"), "attr.sfpu_execution_thread"),
                                              frozenset({"matmul"}) | SFPU_OPS)
    sfpu_op: str | None = _attr(STR)
    single_tile: list | None = _attr(INT_LIST)
    slope: float | None = _attr(FLOAT, frozenset({"lrelu", _FUSED}), frozenset({"lrelu"}))
    sort: str | None = _attr(enum(("max", "argmax"), "attr.topk_sort"), frozenset({"topk"}))
    sparse_nz_strips: int | None = _attr(INT, _MATMUL)       # this compiler's: the busiest core's encoded strips
    sparse_nz_ublocks: int | None = _attr(INT, _MATMUL)      # ... and ublocks (with indices_len, its tiles)
    sparse_tile_ptr_bits: int | None = _attr(INT, _SPARSE)
    sparse_ublock_idx_bits: int | None = _attr(INT, _SPARSE)
    splice: dict | None = _attr(SPLICE, frozenset({"splice"}), key="input{}", indexed=True)   # {input: (index,
    #                                                                            length, stride)} (`inputN: [...]`)
    srnd_fpu_en: bool | None = _attr(BOOL)
    starting_row: int | None = _attr(INT, _MATMUL)
    stoch_rnd_mode: str | None = _attr(enum(("none", "fpu", "pack", "all"), "attr.stoch_rnd_mode"))
    type: str | None = _attr(enum(("max",), "attr.reduce_type"), frozenset({"reduce", _FUSED}), frozenset({"reduce"}))
    u_kt: int | None = _attr(INT, sub_on=ANY)
    vector: str | None = _attr(enum(("r", "c", "rc"), "attr.vector"), sub_on=ANY)
    z: int | None = _attr(INT, frozenset({"reduce", _FUSED, "matmul"}))
    zero_point: float | None = _attr(FLOAT)

    def items(self) -> list:
        """(key, value) of the attributes that are set, in the netlist's spelling and plain-data form, sorted
        by key."""
        return sorted(record_items(self))

    def kernel_broadcast_tiles(self, index: int) -> int:
        """Tiles of input `index` kept in L1 by kernel broadcast (0 = none)."""
        for kb in (self.kernel_broadcast, self.kernel_broadcast_per_t):
            if kb and kb.get(index):
                return kb[index]
        if self.single_tile and index in self.single_tile:
            return 1
        return 0


_NO_ATTRS = Attributes()
ATTRIBUTES = Kind("attributes", None, lambda a: dict(a.items()))


@dataclass(slots=True, kw_only=True)
class Op:
    """An op of a graph (§1.3). Fields in the legacy writer's order (`op.cpp: operator<<(BudaOp)`), on its three
    lines (`group`): placement and inputs / blocking, buffers and formats / edges and attributes."""

    NOUN = Noun("ops", "an op", "op")

    name: str
    type: str = spec(STR)
    grid_loc: Pair | None = spec(GRID_LOC, default=None, required_unless_type=("ethernet_datacopy",))
    grid_size: Pair = spec(PAIR)
    inputs: list = spec(STR_LIST)
    forked_dram_inputs: list | None = spec(FORKED, default=None)        # [(queue, op), ...]
    gradient_op: bool | None = spec(BOOL, default=None)
    untilize_output: bool | None = spec(BOOL, default=None)
    grid_transpose: bool | None = spec(BOOL, default=None)
    overlay_size: int | None = spec(INT, default=None)
    t: int = spec(INT, group=1)
    mblock: Pair = spec(PAIR, group=1)
    ublock: Pair = spec(PAIR, group=1)
    tile_dim: Pair | None = spec(TILE_DIM, default=None, group=1)
    buf_size_mb: int = spec(INT, group=1)
    input_buf_min_size_tiles: list | None = spec(INT_LIST, default=None, group=1)
    input_dram_io_buf_size_tiles: list | None = spec(INT_LIST, default=None, group=1)
    ublock_order: str = spec(UBLOCK_ORDER, group=1)
    in_df: list = spec(DF_LIST, group=1)
    out_df: DataFormat = spec(DF, group=1)
    intermed_df: DataFormat = spec(DF, group=1)
    acc_df: DataFormat | None = spec(DF, default=None, group=1)
    math_fidelity: MathFidelity = spec(FIDELITY, group=1)
    input_unpad: dict = spec(UNPAD, key="input_{}_unpad", indexed=True, default_factory=dict, group=2)  # {i: Pad}
    input_tms: dict = spec(TMS, key="input_{}_tms", indexed=True, default_factory=dict, group=2)    # {i: [TM]}
    input_pad: dict = spec(PAD, key="input_{}_pad", indexed=True, default_factory=dict, group=2)    # {i: Pad}
    attributes: Attributes | None = spec(ATTRIBUTES, nested=Attributes, default=None, group=2)
    graph: str = field(default="", compare=False, repr=False)
    line: int = field(default=0, compare=False, repr=False)

    @property
    def shape(self) -> tuple:
        return shape_of(self.grid_size, self.t, self.mblock, self.ublock)

    @property
    def element_shape(self) -> tuple:
        """(t, R, C) of the output per input in elements (R, C count the tile_dim)."""
        return elements_of(self.shape, self.effective_tile_dim)

    @property
    def attrs(self) -> Attributes:
        return self.attributes if self.attributes is not None else _NO_ATTRS

    @property
    def cores(self) -> int:
        return self.grid_size[0] * self.grid_size[1]

    @property
    def footprint(self) -> Pair:
        """(rows, cols) of cores covered, grid_transpose applied."""
        r, c = self.grid_size
        return (c, r) if self.grid_transpose else (r, c)

    @property
    def effective_tile_dim(self) -> Pair:
        return self.tile_dim or (32, 32)

    @property
    def is_tensix(self) -> bool:
        return self.type not in NON_TENSIX_OPS

    @property
    def effective_acc_df(self) -> DataFormat:
        """The dest-register format: acc_df, or intermed_df when the netlist leaves it out."""
        return self.acc_df or self.intermed_df

    def tms(self, index: int) -> list:
        return self.input_tms.get(index) or []

    @property
    def geometry(self) -> OpGeometry:
        """The op as the backend model (`pybuda.arch`) sees it."""
        return OpGeometry(self.type, tuple(self.grid_size), self.t, tuple(self.mblock), tuple(self.ublock), self.attrs)




@dataclass(slots=True, kw_only=True)
class Graph:
    """One graph = one epoch on `target_device` (§1.3, §2.4); every other key of its map is an op."""

    NOUN = Noun("graphs", "a graph")

    name: str
    target_device: Union[int, list, None] = spec(INT_OR_LIST, default=None)
    input_count: int | None = spec(INT, default=None)
    ops: dict = field(default_factory=dict)   # name -> Op, in file order
    line: int = field(default=0, compare=False, repr=False)

    @property
    def devices(self) -> list:
        td = self.target_device
        return list(td) if isinstance(td, list) else [0 if td is None else td]

    @property
    def replicas(self) -> int:
        """Data-parallel copies: the length of a `target_device` list, else 1."""
        return len(self.devices)

    @property
    def effective_input_count(self) -> int:
        return self.input_count or 1


@dataclass(slots=True, kw_only=True)
class FusedSubOp:
    """One scheduled op of a fused op (§1.7), fields in the legacy writer's order."""

    NOUN = Noun("fused sub-ops", "a scheduled op", "sub-op")

    name: str
    type: str = spec(STR)
    inputs: list = spec(STR_LIST)
    input_tms: dict = spec(TMS, key="input_{}_tms", indexed=True, default_factory=dict)
    mblock: Pair = spec(PAIR)
    ublock: Pair = spec(PAIR)
    pop: list | None = spec(STR_LIST, default=None)
    pop_last: list | None = spec(STR_LIST, default=None)
    zero_point: float | None = spec(FLOAT, default=None)
    attributes: Attributes | None = spec(ATTRIBUTES, nested=Attributes, default=None)
    output: str = spec(STR)
    line: int = field(default=0, compare=False, repr=False)

    @property
    def attrs(self) -> Attributes:
        return self.attributes if self.attributes is not None else _NO_ATTRS


SCHEDULES = Kind("schedules", None, lambda scheds: [[{s.name: record_data(s)} for s in sched] for sched in scheds])


@dataclass(slots=True, kw_only=True)
class FusedOp:
    """`fused_ops: {id: {inputs, intermediates, custom_kernel_path?, schedules}}` (§1.7)."""

    NOUN = Noun("fused_ops", "a fused op")

    id: str
    inputs: int = spec(INT)
    intermediates: int = spec(INT)
    custom_kernel_path: str | None = spec(STR, default=None)
    schedules: list = spec(SCHEDULES, nested=FusedSubOp)      # [[FusedSubOp, ...], ...]
    line: int = field(default=0, compare=False, repr=False)

    @property
    def sub_ops(self) -> list:
        """Every scheduled sub-op, schedule by schedule."""
        return [s for sched in self.schedules for s in sched]

    def input_roles(self) -> tuple:
        """How each input is split over the op's cores (`pybuda.arch.fused.input_roles`)."""
        return fused_input_roles((int(name[5:]), s.type, pos) for s in self.sub_ops for pos, name in enumerate(s.inputs)
                                 if name.startswith("input") and name[5:].isdigit())

    def sub_blocks(self) -> list:
        """The sub-ops as `pybuda.arch.fused.intermediate_tiles` sizes their buffers."""
        return [SubBlock(k, s.type, tuple(s.inputs), s.output, tuple(s.mblock), tuple(s.ublock))
                for k, sched in enumerate(self.schedules) for s in sched]

    def steps(self, op: "Op") -> tuple:
        """The sub-ops as the backend model costs them when `op` runs this fused op: each on the op's grid and t
        with its own blocking and attributes (approximate mode is the fused op's)."""
        return tuple(FusedStep(
            OpGeometry(sub.type, tuple(op.grid_size), op.t, tuple(sub.mblock), tuple(sub.ublock),
                       dataclasses.replace(sub.attrs, approximate_mode=op.attrs.approximate_mode)),
            reads_dest="dest" in sub.inputs, writes_dest=sub.output == "dest") for sub in self.sub_ops)


# --- programs (§2) -------------------------------------------------------------------------------------------------

@dataclass(slots=True, kw_only=True)
class QueueSettings:
    """Per-queue settings of an `execute` (§2.3). Values are kept as written: bool, int or a `$variable`."""

    NOUN = Noun("queue_settings", "queue settings")

    prologue: Scalar | None = spec(SCALAR, default=None)
    epilogue: Scalar | None = spec(SCALAR, default=None)
    zero: Scalar | None = spec(SCALAR, default=None)
    rd_ptr_local: Scalar | None = spec(SCALAR, default=None)
    rd_ptr_global: Scalar | None = spec(SCALAR, default=None)
    wr_ptr_global: Scalar | None = spec(SCALAR, default=None)
    rd_ptr_autoinc: Scalar | None = spec(SCALAR, default=None)
    global_rdptr_autoinc: Scalar | None = spec(SCALAR, default=None)
    global_wrptr_autoinc: Scalar | None = spec(SCALAR, default=None)
    read_only: Scalar | None = spec(SCALAR, default=None)
    line: int = field(default=0, compare=False, repr=False)


@dataclass(slots=True, kw_only=True)
class Var:
    """`var` / `staticvar`: `{$a: 1, ...}`, or a list of names (all 0) when `as_list`."""

    OPCODES = ("var", "staticvar")

    opcode: str
    vars: dict
    as_list: bool = False
    line: int = field(default=0, compare=False, repr=False)

    def data(self):
        return {self.opcode: list(self.vars) if self.as_list else dict(self.vars)}


@dataclass(slots=True, kw_only=True)
class Param:
    OPCODES = ("param",)

    names: list
    opcode: str = "param"
    line: int = field(default=0, compare=False, repr=False)

    def data(self):
        return {"param": list(self.names)}


@dataclass(slots=True, kw_only=True)
class VarInst:
    """`varinst: [$out, opcode, operands...]`."""

    OPCODES = ("varinst",)

    dst: str
    op: str
    args: list
    opcode: str = "varinst"
    line: int = field(default=0, compare=False, repr=False)

    def data(self):
        return {"varinst": [self.dst, self.op, *self.args]}


@dataclass(slots=True, kw_only=True)
class Loop:
    OPCODES = ("loop",)

    count: Scalar
    opcode: str = "loop"
    line: int = field(default=0, compare=False, repr=False)

    def data(self):
        return {"loop": self.count}


@dataclass(slots=True, kw_only=True)
class EndLoop:
    OPCODES = ("endloop",)

    opcode: str = "endloop"
    line: int = field(default=0, compare=False, repr=False)

    def data(self):
        return "endloop"


@dataclass(slots=True, kw_only=True)
class Execute:
    OPCODES = ("execute",)

    graph_name: str
    queue_settings: dict = field(default_factory=dict)   # queue name -> QueueSettings
    opcode: str = "execute"
    line: int = field(default=0, compare=False, repr=False)

    def data(self):
        return {"execute": {"graph_name": self.graph_name,
                            "queue_settings": {q: record_data(s) for q, s in self.queue_settings.items()}}}


@dataclass(slots=True, kw_only=True)
class QueueAlloc:
    """`allocate_queue` / `deallocate_queue: [q, ...]`."""

    OPCODES = ("allocate_queue", "deallocate_queue")

    opcode: str
    queues: list
    line: int = field(default=0, compare=False, repr=False)

    def data(self):
        return {self.opcode: list(self.queues)}


@dataclass(slots=True, kw_only=True)
class EndProgram:
    OPCODES = ("endprogram",)

    opcode: str = "endprogram"
    line: int = field(default=0, compare=False, repr=False)

    def data(self):
        return "endprogram"


INSTRUCTIONS = (Var, Param, VarInst, Loop, EndLoop, Execute, QueueAlloc, EndProgram)   # the legacy opcode order
Instruction = Union[INSTRUCTIONS]
OPCODES = tuple(op for cls in INSTRUCTIONS for op in cls.OPCODES)


@dataclass(slots=True, kw_only=True)
class Program:
    name: str
    instructions: list
    line: int = field(default=0, compare=False, repr=False)


# --- the netlist ---------------------------------------------------------------------------------------------------

@dataclass(slots=True, kw_only=True)
class Netlist:
    """A whole netlist. `extra_sections` keeps sections the backend ignores (`test-config`, ...) verbatim."""

    devices: Devices
    queues: dict = field(default_factory=dict)       # name -> Queue
    graphs: dict = field(default_factory=dict)       # name -> Graph
    programs: list = field(default_factory=list)     # [Program]
    fused_ops: dict | None = None                    # id -> FusedOp
    extra_sections: dict = field(default_factory=dict)
    source: str | None = field(default=None, compare=False, repr=False)
    queue_groups: dict = field(default_factory=dict, compare=False, repr=False)   # queue -> writer comment

    @property
    def archs(self) -> list:
        return self.devices.archs

    @property
    def arch(self) -> str:
        """The arch validated and simulated by default: the first listed arch this project supports."""
        for a in self.archs:
            if a in SUPPORTED_ARCHS:
                return a
        return self.archs[0] if self.archs else ""

    @property
    def ops(self) -> dict:
        """Every op of every graph by name (op names are unique across graphs); `op.graph` names its graph."""
        return {name: op for g in self.graphs.values() for name, op in g.ops.items()}

    def producer(self, name: str):
        """The Queue or Op called `name`, or None."""
        q = self.queues.get(name)
        if q is not None:
            return q
        for g in self.graphs.values():
            op = g.ops.get(name)
            if op is not None:
                return op
        return None

    def fused_op_of(self, op: Op) -> FusedOp | None:
        """The `fused_ops` entry a `fused_op` op runs (by its `fused_op_id`); None if it names none defined."""
        fid = op.attrs.fused_op_id
        return None if fid is None else (self.fused_ops or {}).get(fid)

    def geometry_of(self, op: Op) -> OpGeometry:
        """`op.geometry`, with a fused op's input roles from its `fused_ops` entry."""
        fused = self.fused_op_of(op) if op.type == "fused_op" else None
        return op.geometry if fused is None else dataclasses.replace(op.geometry, input_roles=fused.input_roles())

    def program(self, name: str) -> Program:
        for p in self.programs:
            if p.name == name:
                return p
        raise KeyError(name)

    def queues_of(self, program: str) -> set[str]:
        """The queues the graphs a program executes read or write."""
        graphs = [self.graphs[e.graph_name] for p, e in self.executes() if p.name == program and e.graph_name in
                  self.graphs]
        ops = {name for g in graphs for name in g.ops}
        read = {i for g in graphs for op in g.ops.values() for i in op.inputs}
        return {name for name, q in self.queues.items() if name in read or q.input in ops}

    def executes(self):
        """(program, Execute) of every execute instruction, in program order."""
        for p in self.programs:
            for ins in p.instructions:
                if isinstance(ins, Execute):
                    yield p, ins

    def epoch_order(self) -> list:
        """Graph names in first-execution order (graphs never executed follow in file order)."""
        seen = {}
        for _, ex in self.executes():
            if ex.graph_name in self.graphs:
                seen.setdefault(ex.graph_name, None)
        for g in self.graphs:
            seen.setdefault(g, None)
        return list(seen)

    def to_dict(self) -> dict:
        """The netlist as plain YAML data (what `yaml.safe_load` of the written text gives)."""
        from .writer import netlist_to_data
        return netlist_to_data(self)

    def dump(self) -> str:
        from .writer import dump_netlist
        return dump_netlist(self)
