"""The Buda netlist as typed dataclasses (netlist-format.md §1, §2).

Every field of the backend's schema has a typed attribute, in the legacy writer's order. Optional fields are
`None` when the netlist leaves them out (so a read -> write -> read round trip is exact); the `effective_*`
helpers give the backend's defaults. Shapes are in tiles: `(t, RT, CT)` with `RT = grid_r*mblock_m*ublock_rt`
and `CT = grid_c*mblock_n*ublock_ct`.

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

from ..arch.cycles import FusedStep
from ..arch.fused import SubBlock
from ..arch.fused import input_roles as fused_input_roles
from ..arch.operands import OpGeometry
from ..arch.optypes import NON_TENSIX_OPS
from ..dataformat import DataFormat, MathFidelity

Pair = tuple  # (int, int)
TM = tuple
Scalar = Union[bool, int, float, str]

ARCHS = ("grayskull", "wormhole", "wormhole_b0", "blackhole")
SUPPORTED_ARCHS = ("grayskull", "wormhole_b0")   # archs this project has device descriptions for

QUEUE_TYPES = ("queue", "ram")
QUEUE_LOCS = ("dram", "host")
LAYOUTS = ("tilized", "flat")
UBLOCK_ORDERS = ("r", "c")
TILE_DIMS = ((32, 32), (16, 32), (8, 32), (4, 32), (2, 32), (1, 32), (32, 16))
TM_KINDS = ("transpose", "broadcast", "hslice", "hstack", "vslice", "vstack", "pad", "tile_broadcast")

# Program instruction opcodes (§2.2) and varinst opcodes with their operand counts (excluding the output)
OPCODES = ("var", "staticvar", "param", "varinst", "loop", "endloop", "execute", "allocate_queue",
           "deallocate_queue", "endprogram")
VARINST_OPCODES = {"set": 1, "add": 2, "mul": 2, "inc": 1, "incwrap": 2}


def shape_of(grid: Pair, t: int, mblock: Pair, ublock: Pair) -> tuple:
    """(t, RT, CT) in tiles of a blocked tensor."""
    return (t, grid[0] * mblock[0] * ublock[0], grid[1] * mblock[1] * ublock[1])


def elements_of(shape: tuple, tile_dim: Pair) -> tuple:
    """(t, R, C) in elements of a (t, RT, CT) tile shape with tiles of `tile_dim` (h, w)."""
    t, rt, ct = shape
    return (t, rt * tile_dim[0], ct * tile_dim[1])


@dataclass(slots=True)
class Devices:
    """`devices: {arch: name | [names]}`; a list means the netlist is valid for any of them (§1.1)."""

    arch: Union[str, list]
    line: int = field(default=0, compare=False, repr=False)

    @property
    def archs(self) -> list:
        return list(self.arch) if isinstance(self.arch, list) else [self.arch]


@dataclass(slots=True, kw_only=True)
class Queue:
    """A DRAM or host queue / ram (§1.2). Fields in the legacy writer's order."""

    name: str
    input: str
    alias: str | None = None
    type: str
    entries: int
    grid_size: Pair
    t: int
    mblock: Pair
    ublock: Pair
    ublock_order: str | None = None
    tile_dim: Pair | None = None
    df: DataFormat
    layout: str | None = None
    target_device: Union[int, list, None] = None
    loc: str
    dram: list | None = None          # [(channel, address), ...] one per buffer, row-major over the grid
    host: list | None = None          # [address | (channel, address), ...]
    read_ports: list | None = None
    write_ports: list | None = None
    input_tms: list | None = None
    line: int = field(default=0, compare=False, repr=False)

    FIELDS = ("input", "alias", "type", "entries", "grid_size", "t", "mblock", "ublock", "ublock_order", "tile_dim",
              "df", "layout", "target_device", "loc", "dram", "host", "read_ports", "write_ports", "input_tms")
    REQUIRED = ("input", "type", "entries", "grid_size", "t", "mblock", "ublock", "df", "loc")

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


@dataclass(slots=True)
class Pad:
    """`input_N_pad: {rt, ct, pad_value}` / `input_N_unpad: {rt, ct}`."""

    rt: int | None = None
    ct: int | None = None
    pad_value: float | None = None


@dataclass(slots=True, kw_only=True)
class Attributes:
    """Op attributes (§1.3); `None` = not set. Written in alphabetical order, as the legacy compiler does."""

    accumulate: bool | None = None
    act_t: int | None = None
    approximate_mode: bool | None = None
    bias: bool | None = None
    dequant: bool | None = None
    dest_device: int | None = None
    dim: str | None = None
    egress_channels: list | None = None
    exp: int | None = None
    fracture_factor: int | None = None
    fused_op_id: str | None = None
    granularity: str | None = None
    identity: bool | None = None
    indices_len: int | None = None
    ingress_channels: list | None = None
    k: int | None = None
    kernel_broadcast: dict | None = None          # {input index: tiles}
    kernel_broadcast_per_t: dict | None = None    # {input index: tiles}
    l1_acc: bool | None = None
    m_k: int | None = None
    min_buffer_input: int | None = None
    num_columns: int | None = None
    num_index_tiles: int | None = None
    num_indices: int | None = None
    num_nz_strips: list | None = None
    num_sparse_tiles: int | None = None
    p: float | None = None
    relu_en: bool | None = None
    relu_mode: str | None = None
    relu_threshold: float | None = None
    requant: bool | None = None
    seed: int | None = None
    sfpu_execution_thread: str | None = None
    sfpu_op: str | None = None
    single_tile: list | None = None
    slope: float | None = None
    sort: str | None = None
    sparse_nz_strips: int | None = None           # this compiler's: the busiest core's encoded strips
    sparse_nz_ublocks: int | None = None          # ... and ublocks (with indices_len, its tiles)
    sparse_tile_ptr_bits: int | None = None
    sparse_ublock_idx_bits: int | None = None
    splice: dict | None = None                    # {input index: (index, length, stride)}  (`inputN: [...]`)
    srnd_fpu_en: bool | None = None
    starting_row: int | None = None
    stoch_rnd_mode: str | None = None
    type: str | None = None
    u_kt: int | None = None
    vector: str | None = None
    z: int | None = None
    zero_point: float | None = None

    def items(self) -> list:
        """(key, value) of the attributes that are set, in the netlist's spelling."""
        out = []
        for f in _ATTR_FIELDS:
            v = getattr(self, f)
            if v is None:
                continue
            if f == "splice":
                out.extend((f"input{i}", list(s)) for i, s in sorted(v.items()))
            elif f in ("kernel_broadcast", "kernel_broadcast_per_t"):
                out.append((f, {f"input_{i}": n for i, n in v.items()}))
            else:
                out.append((f, v))
        return sorted(out)

    def kernel_broadcast_tiles(self, index: int) -> int:
        """Tiles of input `index` kept in L1 by kernel broadcast (0 = none)."""
        for kb in (self.kernel_broadcast, self.kernel_broadcast_per_t):
            if kb and kb.get(index):
                return kb[index]
        if self.single_tile and index in self.single_tile:
            return 1
        return 0


_ATTR_FIELDS = tuple(f.name for f in dataclasses.fields(Attributes))


@dataclass(slots=True, kw_only=True)
class Op:
    """An op of a graph (§1.3). Fields in the legacy writer's order (`op.cpp: operator<<(BudaOp)`)."""

    name: str
    type: str
    grid_loc: Pair | None = None
    grid_size: Pair
    inputs: list
    forked_dram_inputs: list | None = None        # [(queue, op), ...]
    gradient_op: bool | None = None
    untilize_output: bool | None = None
    grid_transpose: bool | None = None
    overlay_size: int | None = None
    t: int
    mblock: Pair
    ublock: Pair
    tile_dim: Pair | None = None
    buf_size_mb: int
    input_buf_min_size_tiles: list | None = None
    input_dram_io_buf_size_tiles: list | None = None
    ublock_order: str
    in_df: list
    out_df: DataFormat
    intermed_df: DataFormat
    acc_df: DataFormat | None = None
    math_fidelity: MathFidelity
    input_unpad: dict = field(default_factory=dict)   # {input index: Pad}
    input_tms: dict = field(default_factory=dict)     # {input index: [TM, ...]}
    input_pad: dict = field(default_factory=dict)     # {input index: Pad}
    attributes: Attributes | None = None
    graph: str = field(default="", compare=False, repr=False)
    line: int = field(default=0, compare=False, repr=False)

    FIELDS = ("type", "grid_loc", "grid_size", "inputs", "forked_dram_inputs", "gradient_op", "untilize_output",
              "grid_transpose", "overlay_size", "t", "mblock", "ublock", "tile_dim", "buf_size_mb",
              "input_buf_min_size_tiles", "input_dram_io_buf_size_tiles", "ublock_order", "in_df", "out_df",
              "intermed_df", "acc_df", "math_fidelity", "attributes")
    REQUIRED = ("type", "grid_size", "inputs", "t", "mblock", "ublock", "buf_size_mb", "ublock_order", "in_df",
                "out_df", "intermed_df", "math_fidelity")

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


_NO_ATTRS = Attributes()


@dataclass(slots=True, kw_only=True)
class Graph:
    """One graph = one epoch on `target_device` (§1.3, §2.4)."""

    name: str
    target_device: Union[int, list, None] = None
    input_count: int | None = None
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
    """One scheduled op of a fused op (§1.7)."""

    name: str
    type: str
    inputs: list
    output: str
    mblock: Pair
    ublock: Pair
    pop: list | None = None
    pop_last: list | None = None
    zero_point: float | None = None
    input_tms: dict = field(default_factory=dict)
    attributes: Attributes | None = None
    line: int = field(default=0, compare=False, repr=False)

    FIELDS = ("type", "inputs", "mblock", "ublock", "output", "pop", "pop_last", "zero_point", "attributes")
    REQUIRED = ("type", "inputs", "output", "mblock", "ublock")

    @property
    def attrs(self) -> Attributes:
        return self.attributes if self.attributes is not None else _NO_ATTRS


@dataclass(slots=True, kw_only=True)
class FusedOp:
    """`fused_ops: {id: {inputs, intermediates, schedules, custom_kernel_path?}}` (§1.7)."""

    id: str
    inputs: int
    intermediates: int
    schedules: list             # [[FusedSubOp, ...], ...]
    custom_kernel_path: str | None = None
    line: int = field(default=0, compare=False, repr=False)

    @property
    def sub_ops(self) -> list:
        """Every scheduled sub-op, schedule by schedule."""
        return [s for sched in self.schedules for s in sched]

    def input_roles(self) -> tuple:
        """How each input is split over the op's cores (`pybuda.arch.fused.input_roles`)."""
        return fused_input_roles((int(name[5:]), s.type, pos) for s in self.sub_ops
                                 for pos, name in enumerate(s.inputs) if name.startswith("input") and name[5:].isdigit())

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

    prologue: Scalar | None = None
    epilogue: Scalar | None = None
    zero: Scalar | None = None
    rd_ptr_local: Scalar | None = None
    rd_ptr_global: Scalar | None = None
    wr_ptr_global: Scalar | None = None
    rd_ptr_autoinc: Scalar | None = None
    global_rdptr_autoinc: Scalar | None = None
    global_wrptr_autoinc: Scalar | None = None
    read_only: Scalar | None = None
    line: int = field(default=0, compare=False, repr=False)

    FIELDS = ("prologue", "epilogue", "zero", "rd_ptr_local", "rd_ptr_global", "wr_ptr_global", "rd_ptr_autoinc",
              "global_rdptr_autoinc", "global_wrptr_autoinc", "read_only")


@dataclass(slots=True, kw_only=True)
class Var:
    """`var` / `staticvar`: `{$a: 1, ...}`, or a list of names (all 0) when `as_list`."""

    opcode: str
    vars: dict
    as_list: bool = False
    line: int = field(default=0, compare=False, repr=False)


@dataclass(slots=True, kw_only=True)
class Param:
    names: list
    opcode: str = "param"
    line: int = field(default=0, compare=False, repr=False)


@dataclass(slots=True, kw_only=True)
class VarInst:
    """`varinst: [$out, opcode, operands...]`."""

    dst: str
    op: str
    args: list
    opcode: str = "varinst"
    line: int = field(default=0, compare=False, repr=False)


@dataclass(slots=True, kw_only=True)
class Loop:
    count: Scalar
    opcode: str = "loop"
    line: int = field(default=0, compare=False, repr=False)


@dataclass(slots=True, kw_only=True)
class EndLoop:
    opcode: str = "endloop"
    line: int = field(default=0, compare=False, repr=False)


@dataclass(slots=True, kw_only=True)
class EndProgram:
    opcode: str = "endprogram"
    line: int = field(default=0, compare=False, repr=False)


@dataclass(slots=True, kw_only=True)
class Execute:
    graph_name: str
    queue_settings: dict = field(default_factory=dict)   # queue name -> QueueSettings
    opcode: str = "execute"
    line: int = field(default=0, compare=False, repr=False)


@dataclass(slots=True, kw_only=True)
class QueueAlloc:
    """`allocate_queue` / `deallocate_queue: [q, ...]`."""

    opcode: str
    queues: list
    line: int = field(default=0, compare=False, repr=False)


Instruction = Union[Var, Param, VarInst, Loop, EndLoop, EndProgram, Execute, QueueAlloc]


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
