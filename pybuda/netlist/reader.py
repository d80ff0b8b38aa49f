"""Netlist YAML -> the typed model, keeping the source line of every queue, op, fused op and instruction.

One pass: the C YAML composer (`yaml.CSafeLoader` when libyaml is available) builds the node tree with marks,
and this module walks it once, converting scalars itself (no generic constructor). Schema problems (unknown
fields, wrong types, missing fields, unknown data formats or TMs, ...) are collected for the whole file and
raised together as one `NetlistError`; the semantic rules are `pybuda.netlist.validate`'s.
"""
from __future__ import annotations

import contextlib
import gc
import os
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

from ..errors import UserTypeError
from .errors import NetlistError, NetlistViolation
from .model import (OPCODES, Attributes, Devices, EndLoop, Execute, FusedOp, FusedSubOp, Graph, Loop, Netlist, Op,
                    Param, Program, Queue, QueueAlloc, QueueSettings, Var, VarInst)
from .schema import (ANY, Bad, FieldSpec, is_null, read_int, read_scalar, read_str, read_str_list, record_schema,
                     show)

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_constructor = SafeConstructor()

SECTIONS = ("devices", "queues", "graphs", "programs", "fused_ops")


def _line(node) -> int:
    return node.start_mark.line + 1


def _legal_attr(f: FieldSpec, op_type: str, sub_op: bool) -> bool:
    types = f.sub_on if sub_op else f.on
    return types is ANY or op_type in types


def _legal_attrs(op_type: str, sub_op: bool) -> list:
    return sorted(f.doc_key for f in record_schema(Attributes).fields if _legal_attr(f, op_type, sub_op))


# --- the reader --------------------------------------------------------------------------------------------------

class _Reader:
    def __init__(self, file: str | None):
        self.file = file
        self.errors: list[NetlistViolation] = []

    def err(self, line: int, obj: str, rule: str, message: str, expected: Any = None, actual: Any = None) -> None:
        self.errors.append(NetlistViolation(self.file, line, obj, rule, expected, actual, message))

    def bad(self, node, obj: str, field: str, e: Bad) -> None:
        self.err(_line(node), obj, e.rule, e.message if e.whole else f"field {field!r} {e.message}", e.expected,
                 e.actual)

    def unknown(self, node, obj: str, kind: str, key: str, legal) -> None:
        self.err(_line(node), obj, "schema.unknown_field", f"field {key!r} is not supported for {kind}",
                 "one of " + ", ".join(legal), key)

    def mapping(self, node, obj: str, what: str) -> bool:
        if node.__class__ is MappingNode:
            return True
        self.err(_line(node), obj, "schema.type", f"{what} must be a map", "a map", show(node))
        return False

    def missing(self, node, obj: str, kind: str, fields) -> None:
        for f in fields:
            self.err(_line(node), obj, "schema.missing_field", f"{kind} needs field {f!r}", f, "absent")

    # records ------------------------------------------------------------------------------------------------------
    def record(self, cls: type, k, v, obj: str, **fixed):
        """An instance of record `cls` read from map node `v` (key node `k`) by its declared fields, or None
        after reporting what is wrong: unknown, duplicate, ill-typed and missing fields first, then the indexed
        fields (input_N_...) and nested records, then each field's `finish` check."""
        schema = record_schema(cls)
        noun = cls.NOUN
        kw: dict = {}
        later: list = []             # (field, index, key node, value node) of indexed and nested fields
        bad: set = set()             # fields given with a value that does not read (not missing)
        ok = True
        for fk, fv in v.value:
            key = fk.value
            f = schema.by_key.get(key)
            index = None
            if f is None:
                hit = schema.indexed_field(key)
                if hit is None:
                    self.unknown(fk, obj, noun.plural, key, schema.legal_keys())
                    ok = False
                    continue
                f, index = hit
            if f.name in kw or f.name in bad or any(g is f and i == index for g, i, _, _ in later):
                self.err(_line(fk), obj, "schema.duplicate_key", f"field {key!r} appears twice")
                ok = False
                continue
            if index is not None or f.nested is not None:
                later.append((f, index, fk, fv))
                continue
            try:
                kw[f.name] = f.kind.read(fv)
            except Bad as e:
                self.bad(fv, obj, key, e)
                ok = False
                bad.add(f.name)
        needed = [f for f in schema.fields
                  if f.required or (f.required_unless_type and kw.get("type") not in f.required_unless_type)]
        missing = [f.key for f in needed if f.name not in kw and f.name not in bad and
                   not any(g is f for g, *_ in later)]
        missing += [kw[f.name] for f in schema.fields if f.names_required and kw.get(f.name) is not None and
                    kw[f.name] not in kw and kw[f.name] not in bad]
        if missing:
            self.missing(k, obj, noun.article, missing)
        if missing or any(f.name in bad for f in needed):
            return None
        n_inputs = len(kw["inputs"]) if schema.indexed else None     # input_N_... name an input
        for f, index, fk, fv in later:
            if index is not None and n_inputs is not None and index >= n_inputs:
                self.err(_line(fk), obj, "tm.input_index", f"{fk.value} names input {index} but the {noun.short} "
                         f"has {n_inputs} inputs", f"< {n_inputs}", index)
                ok = False
                continue
            try:
                if f.nested is Attributes:
                    value = self.attributes(fv, obj, kw["type"], sub_op=cls is FusedSubOp)
                elif f.nested is FusedSubOp:
                    value = self.schedules(fv, obj)
                else:
                    value = f.kind.read(fv)
            except Bad as e:
                self.bad(fv, obj, fk.value, e)
                ok = False
                continue
            if value is None:
                ok = False
            elif index is None:
                kw[f.name] = value
            else:
                kw.setdefault(f.name, {})[index] = value
        if not ok:
            return None
        for f in schema.fields:
            if f.kind is not None and f.kind.finish is not None and kw.get(f.name) is not None:
                try:
                    kw[f.name] = f.kind.finish(kw[f.name])
                except Bad as e:
                    self.err(_line(k), obj, e.rule, f"field {f.key!r} {e.message}", e.expected, e.actual)
                    return None
        return cls(line=_line(k), **fixed, **kw)

    def attributes(self, n, obj: str, op_type: str, sub_op: bool = False) -> Attributes | None:
        """An op's or a fused sub-op's attributes: each must apply to its op type (`on` / `sub_on`)."""
        if n.__class__ is not MappingNode:
            self.err(_line(n), obj, "schema.type", "attributes must be a map", "a map", show(n))
            return None
        schema = record_schema(Attributes)
        a = Attributes()
        ok = True
        for k, v in n.value:
            key = k.value
            f = schema.by_key.get(key)
            index = None
            if f is None:
                f, index = schema.indexed_field(key) or (None, None)
            if f is None or not _legal_attr(f, op_type, sub_op):
                self.err(_line(k), obj, "attr.unknown", f"attribute {key!r} is invalid or unsupported for op type "
                         f"{op_type!r}", "one of " + ", ".join(_legal_attrs(op_type, sub_op)), key)
                ok = False
                continue
            try:
                value = f.kind.read(v)
                held = getattr(a, f.name)
                if (index is None and held is not None) or (index is not None and held and index in held):
                    raise Bad("appears twice", None, None, rule="schema.duplicate_key")
                if index is None:
                    setattr(a, f.name, value)
                else:
                    setattr(a, f.name, {**(held or {}), index: value})
            except Bad as e:
                self.bad(v, obj, f"attributes.{key}", e)
                ok = False
        return a if ok else None

    # top level ----------------------------------------------------------------------------------------------------
    def netlist(self, root) -> Netlist | None:
        if root is None or root.__class__ is not MappingNode:
            line = _line(root) if root is not None else 1
            self.err(line, "netlist", "schema.type", "a netlist must be a YAML map of sections", "a map",
                     show(root) if root is not None else "an empty document")
            return None
        sections: dict = {}
        extra: dict = {}
        for k, v in root.value:
            key = k.value if k.__class__ is ScalarNode else None
            if key in sections or key in extra:
                self.err(_line(k), str(key), "schema.duplicate_key", f"section {key!r} appears twice")
                continue
            if key in SECTIONS:
                sections[key] = (k, v)
            else:
                extra[key if key is not None else str(show(k))] = _constructor.construct_document(v)
        for s in ("devices", "queues", "graphs", "programs"):
            if s not in sections:
                self.err(1, "netlist", "schema.missing_section", f"the netlist has no {s!r} section", s, "absent")
        devices = self.devices(*sections["devices"]) if "devices" in sections else None
        queues = self.named(Queue, *sections["queues"], "queue", "queue") if "queues" in sections else {}
        graphs = self.graphs(*sections["graphs"]) if "graphs" in sections else {}
        programs = self.programs(*sections["programs"]) if "programs" in sections else []
        fused = self.named(FusedOp, *sections["fused_ops"], "fused_op", "fused op id") \
            if "fused_ops" in sections else None
        if devices is None:
            return None
        return Netlist(devices=devices, queues=queues, graphs=graphs, programs=programs, fused_ops=fused,
                       extra_sections=extra, source=self.file)

    def devices(self, k, v) -> Devices | None:
        if not self.mapping(v, "devices", "devices"):
            return None
        return self.record(Devices, k, v, "devices")

    def named(self, cls: type, k, v, obj_kind: str, what: str) -> dict:
        """A section that maps names to records (`queues`, `fused_ops`); an empty queues section may be null."""
        out: dict = {}
        if cls is Queue and is_null(v):
            return out
        if not self.mapping(v, k.value, f"the {k.value} section"):
            return out
        key_field = "id" if cls is FusedOp else "name"
        for nk, nv in v.value:
            name = nk.value
            obj = f"{obj_kind} {name}"
            if name in out:
                self.err(_line(nk), obj, "name.duplicate", f"{what} {name!r} is defined twice")
                continue
            if not self.mapping(nv, obj, cls.NOUN.article):
                continue
            record = self.record(cls, nk, nv, obj, **{key_field: name})
            if record is not None:
                out[name] = record
        return out

    def graphs(self, k, v) -> dict:
        out: dict = {}
        if not self.mapping(v, "graphs", "the graphs section"):
            return out
        for gk, gv in v.value:
            name = gk.value
            if name in out:
                self.err(_line(gk), f"graph {name}", "name.duplicate", f"graph {name!r} is defined twice")
                continue
            g = self.graph(name, gk, gv)
            if g is not None:
                out[name] = g
        return out

    def graph(self, name: str, k, v) -> Graph | None:
        """A graph: its declared fields (target_device, input_count); every other key is an op."""
        obj = f"graph {name}"
        if not self.mapping(v, obj, "a graph"):
            return None
        g = Graph(name=name, line=_line(k))
        fields = record_schema(Graph).by_key
        for fk, fv in v.value:
            key = fk.value
            f = fields.get(key)
            if f is not None:
                try:
                    setattr(g, f.name, f.kind.read(fv))
                except Bad as e:
                    self.bad(fv, obj, key, e)
                continue
            if key in g.ops:
                self.err(_line(fk), f"op {key}", "name.duplicate", f"op {key!r} is defined twice in {name}")
                continue
            if fv.__class__ is not MappingNode:
                self.err(_line(fk), f"op {key}", "schema.type", f"graph {name}: {key!r} is neither target_device, "
                         "input_count nor an op (a map)", "an op map", show(fv))
                continue
            op = self.record(Op, fk, fv, f"op {key}", name=key, graph=name)
            if op is not None:
                g.ops[key] = op
        return g

    # fused ops ----------------------------------------------------------------------------------------------------
    def schedules(self, n, obj: str) -> list | None:
        if n.__class__ is not SequenceNode:
            raise Bad("must be a list of schedules", "[[sub-op, ...], ...]", show(n))
        out = []
        ok = True
        for sched in n.value:
            if sched.__class__ is not SequenceNode:
                self.err(_line(sched), obj, "schema.type", "a schedule must be a list of sub-ops", "a list",
                         show(sched))
                ok = False
                continue
            ops = []
            for entry in sched.value:
                if entry.__class__ is not MappingNode or len(entry.value) != 1:
                    self.err(_line(entry), obj, "schema.type", "a scheduled op must be a single-key map "
                             "{name: {fields}}", "{name: {...}}", show(entry))
                    ok = False
                    continue
                (sk, sv), = entry.value
                where = f"{obj} sub-op {sk.value}"
                sub = self.record(FusedSubOp, sk, sv, where, name=sk.value) \
                    if self.mapping(sv, where, "a scheduled op") else None
                if sub is None:
                    ok = False
                else:
                    ops.append(sub)
            out.append(ops)
        return out if ok else None

    # programs -----------------------------------------------------------------------------------------------------
    def programs(self, k, v) -> list:
        out: list = []
        if v.__class__ is not SequenceNode:
            self.err(_line(v), "programs", "schema.type", "programs must be a list of {name: [instructions]}",
                     "a list", show(v))
            return out
        names = set()
        for p in v.value:
            if p.__class__ is not MappingNode or len(p.value) != 1:
                self.err(_line(p), "programs", "schema.type", "each program must be a single-key map "
                         "{name: [instructions]}", "{name: [...]}", show(p))
                continue
            (pk, pv), = p.value
            name = pk.value
            if name in names:
                self.err(_line(pk), f"program {name}", "name.duplicate", f"program {name!r} is defined twice")
                continue
            names.add(name)
            prog = self.program(name, pk, pv)
            if prog is not None:
                out.append(prog)
        return out

    def program(self, name: str, k, v) -> Program | None:
        obj = f"program {name}"
        if is_null(v):
            return Program(name=name, instructions=[], line=_line(k))
        if v.__class__ is not SequenceNode:
            self.err(_line(v), obj, "schema.type", "a program must be a list of instructions", "a list", show(v))
            return None
        out = []
        ok = True
        for node in v.value:
            ins = self.instruction(node, obj)
            if ins is None:
                ok = False
            else:
                out.append(ins)
        return Program(name=name, instructions=out, line=_line(k)) if ok else None

    def instruction(self, n, obj: str):
        line = _line(n)
        if n.__class__ is ScalarNode:
            if n.value == "endloop":
                return EndLoop(line=line)
            self.err(line, obj, "program.opcode", f"instruction {n.value!r} is not valid as a scalar (only endloop is)",
                     "endloop", n.value)
            return None
        if n.__class__ is not MappingNode or len(n.value) != 1:
            self.err(line, obj, "program.opcode", "an instruction must be a single-key map {opcode: arguments}",
                     "{opcode: ...}", show(n))
            return None
        (ok_, ov), = n.value
        op = ok_.value
        try:
            if op == "loop":
                return Loop(count=read_scalar(ov), line=line)
            if op == "execute":
                return self.execute(ov, obj, line)
            if op in ("var", "staticvar"):
                if ov.__class__ is MappingNode:
                    return Var(opcode=op, vars={read_str(a): read_int(b) for a, b in ov.value}, line=line)
                if ov.__class__ is SequenceNode:
                    return Var(opcode=op, vars={read_str(a): 0 for a in ov.value}, as_list=True, line=line)
                raise Bad("variables must be a list or a map", "[$a, ...] or {$a: value}", show(ov))
            if op == "param":
                return Param(names=read_str_list(ov), line=line)
            if op == "varinst":
                if ov.__class__ is not SequenceNode or len(ov.value) < 2:
                    raise Bad("must be [$out, opcode, operands...]", "[$out, opcode, ...]", show(ov))
                dst, vop, *args = ov.value
                return VarInst(dst=read_str(dst), op=read_str(vop), args=[read_scalar(a) for a in args], line=line)
            if op in ("allocate_queue", "deallocate_queue"):
                return QueueAlloc(opcode=op, queues=read_str_list(ov), line=line)
            if op == "endloop":
                return EndLoop(line=line)
        except Bad as e:
            self.err(line, obj, e.rule if e.rule != "schema.type" else "program.syntax", f"{op}: {e.message}",
                     e.expected, e.actual)
            return None
        self.err(line, obj, "program.opcode", f"invalid instruction opcode {op!r}",
                 "one of " + ", ".join(o for o in OPCODES if o != "endprogram"), op)
        return None

    def execute(self, n, obj: str, line: int) -> Execute | None:
        if n.__class__ is not MappingNode:
            raise Bad("must be a map {graph_name, queue_settings}", "{graph_name: ..., queue_settings: ...}",
                       show(n))
        graph = None
        settings: dict = {}
        ok = True
        for k, v in n.value:
            key = k.value
            if key == "graph_name":
                graph = read_str(v)
            elif key == "queue_settings":
                if is_null(v):
                    continue
                if v.__class__ is not MappingNode:
                    raise Bad("queue_settings must be a map", "{queue: {...}}", show(v))
                for qk, qv in v.value:
                    qs = self.queue_settings(qk.value, qk, qv, obj)
                    if qs is None:
                        ok = False
                    elif qk.value in settings:
                        self.err(_line(qk), obj, "schema.duplicate_key", f"queue_settings for {qk.value!r} twice")
                        ok = False
                    else:
                        settings[qk.value] = qs
            else:
                self.unknown(k, obj, "execute", key, ["graph_name", "queue_settings"])
                ok = False
        if graph is None:
            self.missing(n, obj, "an execute", ["graph_name"])
            return None
        return Execute(graph_name=graph, queue_settings=settings, line=line) if ok else None

    def queue_settings(self, name: str, k, v, obj: str) -> QueueSettings | None:
        where = f"{obj} queue_settings {name}"
        return self.record(QueueSettings, k, v, where) if self.mapping(v, where, "queue settings") else None


def compose(text: str):
    """The YAML node tree of `text` (C composer when available)."""
    loader = _Loader(text)
    try:
        return loader.get_single_node()
    finally:
        loader.dispose()


def _read(path: str) -> tuple[str, str]:
    try:
        return Path(path).read_text(), path
    except (OSError, UnicodeDecodeError) as e:
        reason = getattr(e, "strerror", None) or str(e)
        raise NetlistError([NetlistViolation(path, None, "netlist", "file.read", "a readable YAML file", None,
                                             f"cannot read {path}: {reason}")]) from None


def _source(source) -> tuple[str, str | None]:
    """(text, file name or None) of a path or YAML text."""
    if isinstance(source, Path):
        return _read(str(source))
    if isinstance(source, bytes):
        source = source.decode(errors="replace")
    if isinstance(source, str):
        if "\n" not in source and (source.endswith((".yaml", ".yml")) or os.path.exists(source)):
            return _read(source)
        return source, None
    raise UserTypeError(f"load takes a path or YAML text, got {type(source).__name__}")


def _complex_keys(node):
    stack = [node]
    while stack:
        n = stack.pop()
        if n.__class__ is MappingNode:
            for k, v in n.value:
                if k.__class__ is not ScalarNode:
                    yield k
                stack.append(v)
        elif n.__class__ is SequenceNode:
            stack.extend(n.value)


def load(source, file: str | None = None) -> Netlist:
    """Read a netlist from a path (str or Path) or YAML text; `NetlistError` lists every schema problem."""
    if isinstance(source, Netlist):
        return source
    if isinstance(source, dict):
        text, name = yaml.safe_dump(source, sort_keys=False), None
    else:
        text, name = _source(source)
    with _gc_paused():
        return _parse(text, file or name)


@contextlib.contextmanager
def _gc_paused():
    """The cyclic garbage collector off while a netlist is read (it runs again after): reading makes no cyclic
    garbage, and the collector's passes over the 10^5 new objects of a large netlist were over half its load time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _parse(text: str, name: str | None) -> Netlist:
    try:
        root = compose(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        line = mark.line + 1 if mark is not None else 0
        raise NetlistError([NetlistViolation(name, line, "netlist", "yaml.syntax", None, None,
                                             f"not valid YAML: {getattr(e, 'problem', None) or e}")]) from None
    reader = _Reader(name)
    try:
        netlist = reader.netlist(root)
    except RecursionError:
        raise NetlistError([NetlistViolation(name, 0, "netlist", "yaml.syntax", None, None,
                                             "YAML nested too deeply")]) from None
    except yaml.YAMLError as e:   # a section the backend ignores holds something PyYAML cannot construct
        raise NetlistError([NetlistViolation(name, 0, "netlist", "yaml.syntax", None, None, str(e))]) from None
    except (TypeError, AttributeError):
        # the walk assumes scalar map keys; find the offending ones (rare, so not checked on the hot path)
        bad = list(_complex_keys(root))
        if not bad:
            raise
        raise NetlistError([NetlistViolation(name, _line(k), "netlist", "schema.type", "a name", show(k),
                                             "map keys must be scalars") for k in bad]) from None
    if reader.errors or netlist is None:
        raise NetlistError(reader.errors or [NetlistViolation(name, 0, "netlist", "schema.type", None, None,
                                                              "not a netlist")])
    return netlist
