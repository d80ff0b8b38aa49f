"""The simulator's view of a netlist: light records built from `pybuda.netlist`'s typed model.

Netlists are read (and their schema checked) by `pybuda.netlist.load`, the one reader; this module turns its
model into the records the executor, the kernels and the timing model use: attributes as a plain map in the
netlist's spelling, TMs as tuples for `pybuda.arch.tms` (plus ("pad", rt, ct, value) and ("tile_broadcast",
axis)), programs as nested instructions with their YAML arguments.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from pybuda.dataformat import DataFormat, MathFidelity
from pybuda.netlist import model as nm
from pybuda.netlist.errors import NetlistError
from pybuda.netlist.reader import load as load_model
from pybuda.netlist.writer import instruction_data

from .errors import SimulatorError

SUPPORTED_ARCHS = ("grayskull", "wormhole_b0")
TILE = 32


def _bool(value: Any) -> bool:
    if isinstance(value, str):
        v = value.strip().lower()
        if v in ("true", "1"):
            return True
        if v in ("false", "0", "none", ""):
            return False
        raise SimulatorError(f"expected a boolean, got {value!r}")
    return bool(value)


@dataclasses.dataclass(frozen=True)
class QueueDef:
    """One `queues:` entry."""

    name: str
    input: str
    type: str
    entries: int
    grid: tuple[int, int]
    t: int
    mblock: tuple[int, int]
    ublock: tuple[int, int]
    ublock_order: str
    tile_dim: tuple[int, int]
    df: DataFormat
    layout: str
    loc: str
    target_device: int
    alias: str | None
    input_tms: tuple[tuple, ...]

    @property
    def tiles(self) -> tuple[int, int, int]:
        """(t, RT, CT) of one entry, in tiles."""
        return (self.t, self.grid[0] * self.mblock[0] * self.ublock[0], self.grid[1] * self.mblock[1] * self.ublock[1])

    @property
    def shape(self) -> tuple[int, int, int]:
        """(t, R, C) of one entry, in elements."""
        t, rt, ct = self.tiles
        return (t, rt * self.tile_dim[0], ct * self.tile_dim[1])

    @property
    def is_ram(self) -> bool:
        return self.type == "ram"

    @property
    def host_fed(self) -> bool:
        return self.input == "HOST"


@dataclasses.dataclass(frozen=True)
class OpDef:
    """One op of a graph."""

    name: str
    graph: str
    type: str
    grid_loc: tuple[int, int] | None
    grid_size: tuple[int, int]
    grid_transpose: bool
    inputs: tuple[str, ...]
    in_df: tuple[DataFormat, ...]
    out_df: DataFormat
    intermed_df: DataFormat
    acc_df: DataFormat
    math_fidelity: MathFidelity
    t: int
    mblock: tuple[int, int]
    ublock: tuple[int, int]
    ublock_order: str
    tile_dim: tuple[int, int]
    buf_size_mb: int
    untilize_output: bool
    gradient_op: bool
    input_tms: Mapping[int, tuple[tuple, ...]]
    input_pad: Mapping[int, tuple[int, int, float]]
    input_unpad: Mapping[int, tuple[int, int]]
    attributes: Mapping[str, Any]

    @property
    def cores(self) -> int:
        return self.grid_size[0] * self.grid_size[1]

    @property
    def tiles(self) -> tuple[int, int, int]:
        """(t, RT, CT) of the op's output tensor per input, in tiles."""
        return (self.t, self.grid_size[0] * self.mblock[0] * self.ublock[0],
                self.grid_size[1] * self.mblock[1] * self.ublock[1])

    @property
    def shape(self) -> tuple[int, int, int]:
        t, rt, ct = self.tiles
        return (t, rt * self.tile_dim[0], ct * self.tile_dim[1])

    @property
    def tiles_per_core(self) -> int:
        """Output tiles one core produces per input."""
        return self.t * self.mblock[0] * self.mblock[1] * self.ublock[0] * self.ublock[1]

    @property
    def m_k(self) -> int:
        return int(self.attributes.get("m_k", 1))

    @property
    def u_kt(self) -> int:
        return int(self.attributes.get("u_kt", 1))

    def attr_bool(self, key: str) -> bool:
        return _bool(self.attributes.get(key, False))

    def expected_input_tiles(self, index: int) -> tuple[int, int, int] | None:
        """(t, RT, CT) the op expects on input `index` after TMs (netlist-format.md §3.2); None if not modelled."""
        t, rt, ct = self.tiles
        gr, gc = self.grid_size
        k = self.m_k * self.u_kt
        if self.type == "matmul" and not self.attr_bool("identity"):
            tz = t * int(self.attributes.get("z", 1)) if self.attr_bool("accumulate") else t
            if index == 0:
                return (tz, rt, k)
            if index == 1:
                return (tz, k, ct)
            if index == 2 and self.attr_bool("bias"):
                return (t, rt, ct)
            return None
        if self.type == "depthwise":
            if index == 0:
                return (t, rt, self.m_k * ct)
            if index == 1:
                return (t, self.m_k, ct)
            if index == 2 and self.attr_bool("bias"):
                return (t, rt, ct)
            return None
        if self.type == "reduce":
            dim = str(self.attributes.get("dim", ""))
            if dim == "r":
                return (t, gr * k, ct)
            if dim == "c":
                return (t, rt, gc * k)
            if dim == "z":
                return (t * int(self.attributes.get("z", 1)), rt, ct)
            return None
        if self.type in ELTWISE_SHAPED:
            return (t, rt, ct)
        return None


# Ops whose every input has the op's own output shape.
ELTWISE_SHAPED = frozenset({
    "add", "subtract", "multiply", "maximum", "nop", "datacopy", "ethernet_datacopy", "exp", "log", "sqrt", "gelu",
    "gelu_derivative", "reciprocal", "sigmoid", "dropout", "tanh", "square", "power", "sine", "cosine", "lrelu",
    "abs", "quantization", "dequantization", "requantization", "tilizer",
})


@dataclasses.dataclass(frozen=True)
class FusedSubOpDef:
    """One scheduled op of a `fused_ops` entry (netlist-format.md §1.7)."""

    name: str
    type: str
    inputs: tuple[str, ...]        # "input<N>", "intermed<K>" or "dest"
    output: str                    # "intermed<K>", "dest" or "output"
    mblock: tuple[int, int]
    ublock: tuple[int, int]
    input_tms: Mapping[int, tuple[tuple, ...]]
    pop: tuple[str, ...]
    pop_last: tuple[str, ...]
    attributes: Mapping[str, Any]

    @property
    def m_k(self) -> int:
        return int(self.attributes.get("m_k", 1))

    @property
    def u_kt(self) -> int:
        return int(self.attributes.get("u_kt", 1))


@dataclasses.dataclass(frozen=True)
class FusedOpDef:
    """A `fused_ops` entry: input and intermediate counts and its schedules of sub-ops."""

    id: str
    inputs: int
    intermediates: int
    schedules: tuple[tuple[FusedSubOpDef, ...], ...]

    @property
    def sub_ops(self) -> tuple[FusedSubOpDef, ...]:
        return tuple(op for sched in self.schedules for op in sched)


@dataclasses.dataclass(frozen=True)
class GraphDef:
    name: str
    target_device: int
    replicas: int
    input_count: int
    ops: Mapping[str, OpDef]


@dataclasses.dataclass(frozen=True)
class Instr:
    """A program instruction: opcode ('var', 'staticvar', 'param', 'varinst', 'execute', 'allocate_queue',
    'deallocate_queue', 'endprogram') and its YAML arguments."""

    opcode: str
    args: Any


@dataclasses.dataclass(frozen=True)
class Loop:
    """`loop: count` ... `endloop`, with the instructions in between."""

    count: Any
    body: tuple


@dataclasses.dataclass(frozen=True)
class ProgramDef:
    name: str
    body: tuple


@dataclasses.dataclass(frozen=True)
class Netlist:
    """The parts of a netlist the simulator uses."""

    archs: tuple[str, ...]
    queues: Mapping[str, QueueDef]
    graphs: Mapping[str, GraphDef]
    programs: Mapping[str, ProgramDef]
    fused_ops: Mapping[str, FusedOpDef]
    model: Any = None

    def fused_op(self, op: "OpDef") -> FusedOpDef:
        """The fused_ops definition a `fused_op` op refers to (by its `fused_op_id` attribute)."""
        fid = op.attributes.get("fused_op_id")
        if fid is None:
            raise SimulatorError(f"op {op.name!r} (fused_op) has no fused_op_id attribute")
        if str(fid) not in self.fused_ops:
            raise SimulatorError(f"op {op.name!r}: fused_op_id {fid!r} is not defined in fused_ops "
                                 f"(defined: {', '.join(self.fused_ops) or 'none'})")
        return self.fused_ops[str(fid)]

    @property
    def ops(self) -> dict[str, OpDef]:
        return {name: op for g in self.graphs.values() for name, op in g.ops.items()}

    def resolve_arch(self, requested: str | None = None) -> str:
        """The architecture to simulate: `requested` if the netlist allows it, else the first supported one."""
        if requested is not None:
            if requested not in self.archs:
                raise SimulatorError(f"netlist is for arch {list(self.archs)}, not {requested}")
            return requested
        for arch in self.archs:
            if arch in SUPPORTED_ARCHS:
                return arch
        raise SimulatorError(f"netlist arch {list(self.archs)} is not supported; the simulator models "
                             f"{', '.join(SUPPORTED_ARCHS)}")



def load_netlist(source: Any) -> Netlist:
    """A netlist (path, YAML text, dict, `pybuda.netlist` model or simulator Netlist) as the simulator's model."""
    if isinstance(source, Netlist):
        return source
    if not isinstance(source, (nm.Netlist, Mapping, str)) and not hasattr(source, "__fspath__"):
        raise SimulatorError(f"a netlist must be a path, YAML text or a dict, not {type(source).__name__}")
    try:
        model = load_model(source)
    except NetlistError as e:
        raise SimulatorError(str(e)) from None
    queues = {name: _queue(q) for name, q in model.queues.items()}
    graphs = {name: _graph(g) for name, g in model.graphs.items()}
    names: dict[str, str] = {}
    for g in graphs.values():
        for op in g.ops:
            if op in names:
                raise SimulatorError(f"op name {op!r} is used in graphs {names[op]!r} and {g.name!r}; "
                                     f"op names must be unique")
            names[op] = g.name
    for g in graphs.values():
        for op in g.ops.values():
            for src in op.inputs:
                if src not in queues and src not in names:
                    raise SimulatorError(f"op {op.name!r} (graph {g.name!r}): input {src!r} is neither a queue "
                                         f"nor an op")
    return Netlist(archs=tuple(model.archs), queues=queues, graphs=graphs,
                   programs={p.name: ProgramDef(name=p.name, body=_body(p)) for p in model.programs},
                   fused_ops={str(k): _fused_op(str(k), f) for k, f in (model.fused_ops or {}).items()},
                   model=model)


def _first_device(value: Any) -> tuple[int, int]:
    """(first device, number of replicas) of a target_device that may be an int or a list."""
    if isinstance(value, list):
        return int(value[0]), len(value)
    return int(value or 0), 1


def _attributes(attrs: nm.Attributes | None) -> dict:
    return dict(attrs.items()) if attrs is not None else {}


def _queue(q: nm.Queue) -> QueueDef:
    return QueueDef(name=q.name, input=q.input, type=q.type, entries=q.entries, grid=tuple(q.grid_size), t=q.t,
                    mblock=tuple(q.mblock), ublock=tuple(q.ublock), ublock_order=q.ublock_order or "r",
                    tile_dim=tuple(q.tile_dim or (TILE, TILE)), df=q.df, layout=q.layout or "tilized", loc=q.loc,
                    target_device=_first_device(q.target_device)[0], alias=q.alias,
                    input_tms=tuple(tuple(tm) for tm in (q.input_tms or ())))


def _graph(g: nm.Graph) -> GraphDef:
    device, replicas = _first_device(g.target_device)
    return GraphDef(name=g.name, target_device=device, replicas=replicas, input_count=g.input_count or 1,
                    ops={name: _op(g.name, op) for name, op in g.ops.items()})


def _op(graph: str, o: nm.Op) -> OpDef:
    where = f"op {o.name!r} (graph {graph!r})"
    if len(o.in_df) != len(o.inputs):
        raise SimulatorError(f"{where}: {len(o.inputs)} inputs but {len(o.in_df)} in_df entries")
    intermed = o.intermed_df or o.out_df
    return OpDef(
        name=o.name, graph=graph, type=o.type, grid_loc=tuple(o.grid_loc) if o.grid_loc is not None else None,
        grid_size=tuple(o.grid_size), grid_transpose=bool(o.grid_transpose), inputs=tuple(o.inputs),
        in_df=tuple(o.in_df), out_df=o.out_df, intermed_df=intermed, acc_df=o.acc_df or intermed,
        math_fidelity=o.math_fidelity or MathFidelity.HiFi4, t=o.t, mblock=tuple(o.mblock), ublock=tuple(o.ublock),
        ublock_order=o.ublock_order or "r", tile_dim=tuple(o.tile_dim or (TILE, TILE)), buf_size_mb=o.buf_size_mb,
        untilize_output=bool(o.untilize_output), gradient_op=bool(o.gradient_op),
        input_tms={i: tuple(tuple(tm) for tm in tms) for i, tms in o.input_tms.items()},
        input_pad={i: (p.rt or 0, p.ct or 0, float(p.pad_value or 0)) for i, p in o.input_pad.items()},
        input_unpad={i: (p.rt or 0, p.ct or 0) for i, p in o.input_unpad.items()},
        attributes=_attributes(o.attributes))


def _fused_op(fid: str, f: nm.FusedOp) -> FusedOpDef:
    return FusedOpDef(id=fid, inputs=f.inputs, intermediates=f.intermediates, schedules=tuple(
        tuple(FusedSubOpDef(name=s.name, type=s.type, inputs=tuple(s.inputs), output=s.output or "output",
                            mblock=tuple(s.mblock), ublock=tuple(s.ublock),
                            input_tms={i: tuple(tuple(tm) for tm in tms) for i, tms in s.input_tms.items()},
                            pop=tuple(s.pop or ()), pop_last=tuple(s.pop_last or ()),
                            attributes=_attributes(s.attributes))
              for s in sched) for sched in f.schedules))


def _body(program: nm.Program) -> tuple:
    """Instructions with loops nested: Loop(count, body) and Instr(opcode, YAML arguments)."""
    stack: list[tuple[Any, list]] = [(None, [])]
    for ins in program.instructions:
        if isinstance(ins, nm.Loop):
            stack.append((ins.count, []))
        elif isinstance(ins, nm.EndLoop):
            if len(stack) == 1:
                raise SimulatorError(f"program {program.name!r}: endloop without loop")
            count, body = stack.pop()
            stack[-1][1].append(Loop(count=count, body=tuple(body)))
        else:
            data = instruction_data(ins)
            opcode, args = (data, None) if isinstance(data, str) else next(iter(data.items()))
            stack[-1][1].append(Instr(opcode=opcode, args=args))
    if len(stack) != 1:
        raise SimulatorError(f"program {program.name!r}: loop without endloop")
    return tuple(stack[0][1])
