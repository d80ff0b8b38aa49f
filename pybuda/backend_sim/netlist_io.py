"""Netlist input for the simulator: a path, YAML text or parsed dict -> a light typed model.

All netlist parsing of the backend simulator lives here, so a richer shared netlist model can replace it later.
Only what the simulator needs is interpreted; unknown keys are kept in `raw`/`extra` fields and ignored.
"""
from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Any, Mapping

import yaml

from pybuda.dataformat import DataFormat, MathFidelity

from .errors import SimulatorError

try:  # libyaml is much faster on the large PyBuda netlists
    _Loader = yaml.CSafeLoader
except AttributeError:  # pragma: no cover - depends on the pyyaml build
    _Loader = yaml.SafeLoader

SUPPORTED_ARCHS = ("grayskull", "wormhole_b0")
TILE = 32
_INPUT_KEY = re.compile(r"^input_(\d+)_(tms|pad|unpad)$")


def _pair(value: Any, what: str) -> tuple[int, int]:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise SimulatorError(f"{what}: expected a pair [a, b], got {value!r}")
    return int(value[0]), int(value[1])


def _bool(value: Any) -> bool:
    if isinstance(value, str):
        v = value.strip().lower()
        if v in ("true", "1"):
            return True
        if v in ("false", "0", "none", ""):
            return False
        raise SimulatorError(f"expected a boolean, got {value!r}")
    return bool(value)


def parse_tms(value: Any, where: str) -> tuple[tuple, ...]:
    """Netlist TM list -> tuples for pybuda.ir.tms (plus ("pad", rt, ct, value) and ("tile_broadcast", axis))."""
    if value is None or (isinstance(value, str) and value.strip().lower() in ("none", "")):
        return ()
    if not isinstance(value, list):
        value = [value]
    out: list[tuple] = []
    for item in value:
        if isinstance(item, str):
            if item.strip() == "transpose":
                out.append(("transpose",))
                continue
            raise SimulatorError(f"{where}: unsupported TM {item!r}")
        if not isinstance(item, Mapping) or len(item) != 1:
            raise SimulatorError(f"{where}: a TM must be 'transpose' or a single-key map, got {item!r}")
        (kind, arg), = item.items()
        if kind == "broadcast":
            if not isinstance(arg, Mapping) or not arg:
                raise SimulatorError(f"{where}: broadcast needs a map like {{r: 4}}, got {arg!r}")
            for axis, factor in arg.items():
                if axis not in ("r", "c", "z"):
                    raise SimulatorError(f"{where}: broadcast axis must be r, c or z, got {axis!r}")
                out.append(("broadcast", axis, int(factor)))
        elif kind in ("hslice", "hstack", "vslice", "vstack"):
            out.append((kind, int(arg)))
        elif kind == "transpose":
            out.append(("transpose",))
        elif kind == "pad":
            if isinstance(arg, Mapping):
                out.append(("pad", int(arg.get("rt", 0)), int(arg.get("ct", 0)), float(arg.get("pad_value", 0))))
            elif isinstance(arg, (list, tuple)) and len(arg) == 3:
                out.append(("pad", int(arg[0]), int(arg[1]), float(arg[2])))
            else:
                raise SimulatorError(f"{where}: pad needs [rt, ct, value], got {arg!r}")
        elif kind == "tile_broadcast":
            out.append(("tile_broadcast", str(arg)))
        else:
            raise SimulatorError(f"{where}: unsupported TM {kind!r}; legal: transpose, broadcast, hslice, hstack, "
                                 f"vslice, vstack, pad")
    return tuple(out)


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
    raw: Mapping[str, Any]

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



def read_yaml(source: Any) -> dict:
    """A netlist as a dict from a path, YAML text or an already-parsed mapping."""
    if isinstance(source, Mapping):
        return dict(source)
    if isinstance(source, os.PathLike):
        return _load_file(Path(source))
    if isinstance(source, str):
        if "\n" in source:
            return _parse_text(source, "<netlist text>")
        return _load_file(Path(source))
    raise SimulatorError(f"a netlist must be a path, YAML text or a dict, not {type(source).__name__}")


def _load_file(path: Path) -> dict:
    if not path.is_file():
        raise SimulatorError(f"netlist file not found: {path}")
    return _parse_text(path.read_text(), str(path))


def _parse_text(text: str, where: str) -> dict:
    try:
        data = yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as e:
        raise SimulatorError(f"{where}: invalid YAML: {e}") from None
    if not isinstance(data, dict):
        raise SimulatorError(f"{where}: a netlist must be a YAML map with devices, queues, graphs, programs")
    return data


def load_netlist(source: Any) -> Netlist:
    """Parse a netlist (path, YAML text, dict or Netlist) into the simulator's model."""
    if isinstance(source, Netlist):
        return source
    data = read_yaml(source)
    for key in ("devices", "queues", "graphs", "programs"):
        if key not in data or data[key] is None:
            raise SimulatorError(f"netlist has no '{key}' section")
    archs = _parse_archs(data["devices"])
    queues = {str(n): _parse_queue(str(n), q) for n, q in data["queues"].items()}
    graphs = {str(n): _parse_graph(str(n), g) for n, g in data["graphs"].items()}
    programs = _parse_programs(data["programs"])
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
    fused = {str(k): _parse_fused_op(str(k), v) for k, v in (data.get("fused_ops") or {}).items()}
    return Netlist(archs=archs, queues=queues, graphs=graphs, programs=programs, fused_ops=fused, raw=data)


def _parse_archs(devices: Any) -> tuple[str, ...]:
    if not isinstance(devices, Mapping) or "arch" not in devices:
        raise SimulatorError("devices: expected {arch: <name> | [<name>, ...]}")
    arch = devices["arch"]
    archs = tuple(str(a) for a in (arch if isinstance(arch, list) else [arch]))
    if not archs:
        raise SimulatorError("devices: arch list is empty")
    return archs


def _target_device(value: Any) -> tuple[int, int]:
    """(first device, number of replicas) of a target_device that may be an int or a list."""
    if isinstance(value, list):
        if not value:
            raise SimulatorError("target_device list is empty")
        return int(value[0]), len(value)
    return int(value or 0), 1


def _parse_queue(name: str, q: Any) -> QueueDef:
    if not isinstance(q, Mapping):
        raise SimulatorError(f"queue {name!r}: expected a map, got {q!r}")
    try:
        qtype = str(q.get("type", "queue"))
        if qtype not in ("queue", "ram"):
            raise SimulatorError(f"queue {name!r}: type must be queue or ram, got {qtype!r}")
        return QueueDef(
            name=name, input=str(q["input"]), type=qtype, entries=int(q["entries"]),
            grid=_pair(q["grid_size"], f"queue {name} grid_size"), t=int(q["t"]),
            mblock=_pair(q["mblock"], f"queue {name} mblock"), ublock=_pair(q["ublock"], f"queue {name} ublock"),
            ublock_order=str(q.get("ublock_order", "r")),
            tile_dim=_pair(q.get("tile_dim", [TILE, TILE]), f"queue {name} tile_dim"),
            df=DataFormat.parse(q["df"]), layout=str(q.get("layout", "tilized")), loc=str(q.get("loc", "dram")),
            target_device=_target_device(q.get("target_device", 0))[0], alias=q.get("alias"),
            input_tms=parse_tms(q.get("input_tms"), f"queue {name} input_tms"),
        )
    except KeyError as e:
        raise SimulatorError(f"queue {name!r}: missing field {e.args[0]!r}") from None
    except ValueError as e:
        raise SimulatorError(f"queue {name!r}: {e}") from None


def _parse_graph(name: str, g: Any) -> GraphDef:
    if not isinstance(g, Mapping):
        raise SimulatorError(f"graph {name!r}: expected a map")
    device, replicas = _target_device(g.get("target_device", 0))
    input_count = int(g.get("input_count", 1))
    if input_count < 1:
        raise SimulatorError(f"graph {name!r}: input_count must be >= 1, got {input_count}")
    ops = {str(k): _parse_op(name, str(k), v) for k, v in g.items() if k not in ("target_device", "input_count")}
    return GraphDef(name=name, target_device=device, replicas=replicas, input_count=input_count, ops=ops)


def _parse_op(graph: str, name: str, o: Any) -> OpDef:
    where = f"op {name!r} (graph {graph!r})"
    if not isinstance(o, Mapping):
        raise SimulatorError(f"{where}: expected a map")
    try:
        tms: dict[int, tuple] = {}
        pads: dict[int, tuple] = {}
        unpads: dict[int, Any] = {}
        for key, value in o.items():
            m = _INPUT_KEY.match(str(key))
            if not m:
                continue
            idx, kind = int(m.group(1)), m.group(2)
            if kind == "tms":
                tms[idx] = parse_tms(value, f"{where} {key}")
            elif kind == "pad" and value:
                pads[idx] = (int(value.get("rt", 0)), int(value.get("ct", 0)), float(value.get("pad_value", 0)))
            elif kind == "unpad" and value:
                unpads[idx] = (int(value.get("rt", 0)), int(value.get("ct", 0)))
        inputs = tuple(str(i) for i in (o.get("inputs") or []))
        in_df = tuple(DataFormat.parse(d) for d in (o.get("in_df") or []))
        if len(in_df) != len(inputs):
            raise SimulatorError(f"{where}: {len(inputs)} inputs but {len(in_df)} in_df entries")
        out_df = DataFormat.parse(o["out_df"])
        grid_loc = o.get("grid_loc")
        return OpDef(
            name=name, graph=graph, type=str(o["type"]),
            grid_loc=_pair(grid_loc, f"{where} grid_loc") if grid_loc is not None else None,
            grid_size=_pair(o.get("grid_size", [1, 1]), f"{where} grid_size"),
            grid_transpose=_bool(o.get("grid_transpose", False)), inputs=inputs, in_df=in_df, out_df=out_df,
            intermed_df=DataFormat.parse(o.get("intermed_df", out_df)),
            acc_df=DataFormat.parse(o.get("acc_df", o.get("intermed_df", out_df))),
            math_fidelity=MathFidelity.parse(o.get("math_fidelity", "HiFi4")),
            t=int(o["t"]), mblock=_pair(o["mblock"], f"{where} mblock"), ublock=_pair(o["ublock"], f"{where} ublock"),
            ublock_order=str(o.get("ublock_order", "r")),
            tile_dim=_pair(o.get("tile_dim", [TILE, TILE]), f"{where} tile_dim"),
            buf_size_mb=int(o.get("buf_size_mb", 1)), untilize_output=_bool(o.get("untilize_output", False)),
            gradient_op=_bool(o.get("gradient_op", False)), input_tms=tms, input_pad=pads, input_unpad=unpads,
            attributes=dict(o.get("attributes") or {}),
        )
    except KeyError as e:
        raise SimulatorError(f"{where}: missing field {e.args[0]!r}") from None
    except ValueError as e:
        raise SimulatorError(f"{where}: {e}") from None


def _parse_fused_op(fid: str, f: Any) -> FusedOpDef:
    where = f"fused_ops {fid!r}"
    if not isinstance(f, Mapping):
        raise SimulatorError(f"{where}: expected a map with inputs, intermediates, schedules")
    schedules = f.get("schedules") or []
    if not isinstance(schedules, list):
        raise SimulatorError(f"{where}: schedules must be a list of lists of sub-ops")
    parsed = []
    for sched in schedules:
        subs = []
        for entry in (sched or []):
            if not isinstance(entry, Mapping) or len(entry) != 1:
                raise SimulatorError(f"{where}: each scheduled op must be a single-key map, got {entry!r}")
            (name, d), = entry.items()
            subs.append(_parse_sub_op(where, str(name), d))
        parsed.append(tuple(subs))
    try:
        return FusedOpDef(id=fid, inputs=int(f.get("inputs", 0)), intermediates=int(f.get("intermediates", 0)),
                          schedules=tuple(parsed))
    except ValueError as e:
        raise SimulatorError(f"{where}: {e}") from None


def _parse_sub_op(where: str, name: str, d: Any) -> FusedSubOpDef:
    where = f"{where} sub-op {name!r}"
    if not isinstance(d, Mapping):
        raise SimulatorError(f"{where}: expected a map")
    try:
        tms = {}
        for key, value in d.items():
            m = _INPUT_KEY.match(str(key))
            if m and m.group(2) == "tms":
                tms[int(m.group(1))] = parse_tms(value, f"{where} {key}")
        return FusedSubOpDef(
            name=name, type=str(d["type"]), inputs=tuple(str(i) for i in (d.get("inputs") or [])),
            output=str(d.get("output", "output")), mblock=_pair(d.get("mblock", [1, 1]), f"{where} mblock"),
            ublock=_pair(d.get("ublock", [1, 1]), f"{where} ublock"), input_tms=tms,
            pop=tuple(str(x) for x in (d.get("pop") or [])), pop_last=tuple(str(x) for x in (d.get("pop_last") or [])),
            attributes=dict(d.get("attributes") or {}))
    except KeyError as e:
        raise SimulatorError(f"{where}: missing field {e.args[0]!r}") from None
    except ValueError as e:
        raise SimulatorError(f"{where}: {e}") from None


_OPCODES = ("var", "staticvar", "param", "varinst", "execute", "allocate_queue", "deallocate_queue", "endprogram")


def _parse_programs(programs: Any) -> dict[str, ProgramDef]:
    if not isinstance(programs, list) or not programs:
        raise SimulatorError("programs: expected a non-empty list of single-key maps")
    out: dict[str, ProgramDef] = {}
    for entry in programs:
        if not isinstance(entry, Mapping) or len(entry) != 1:
            raise SimulatorError(f"programs: each entry must be a single-key map, got {entry!r}")
        (name, instrs), = entry.items()
        out[str(name)] = ProgramDef(name=str(name), body=_parse_body(str(name), instrs or []))
    return out


def _parse_body(program: str, instrs: list) -> tuple:
    stack: list[tuple[Any, list]] = [(None, [])]
    for raw in instrs:
        if isinstance(raw, str):
            opcode, args = raw.strip(), None
        elif isinstance(raw, Mapping) and len(raw) == 1:
            (opcode, args), = raw.items()
            opcode = str(opcode).strip()
        else:
            raise SimulatorError(f"program {program!r}: bad instruction {raw!r}")
        if opcode == "loop":
            if args is None:
                raise SimulatorError(f"program {program!r}: loop needs a count")
            stack.append((args, []))
        elif opcode == "endloop":
            if len(stack) == 1:
                raise SimulatorError(f"program {program!r}: endloop without loop")
            count, body = stack.pop()
            stack[-1][1].append(Loop(count=count, body=tuple(body)))
        elif opcode in _OPCODES:
            if opcode == "execute" and (not isinstance(args, Mapping) or "graph_name" not in args):
                raise SimulatorError(f"program {program!r}: execute needs graph_name, got {args!r}")
            stack[-1][1].append(Instr(opcode=opcode, args=args))
        else:
            raise SimulatorError(f"program {program!r}: unknown instruction {opcode!r}; legal: loop, endloop, "
                                 f"{', '.join(_OPCODES)}")
    if len(stack) != 1:
        raise SimulatorError(f"program {program!r}: loop without endloop")
    return tuple(stack[0][1])
