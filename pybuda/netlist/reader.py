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
import re
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

from ..arch.optypes import SFPU_OPS
from ..dataformat import DataFormat, MathFidelity
from .errors import NetlistError, NetlistViolation
from .model import (ARCHS, OPCODES, TILE_DIMS, Attributes, Devices, EndLoop, Execute, FusedOp, FusedSubOp, Graph,
                    Loop, Netlist, Op, Pad, Param, Program, Queue, QueueAlloc, QueueSettings, Var, VarInst)

_Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

_STR = "tag:yaml.org,2002:str"
_INT = "tag:yaml.org,2002:int"
_BOOL = "tag:yaml.org,2002:bool"
_FLOAT = "tag:yaml.org,2002:float"
_NULL = "tag:yaml.org,2002:null"

_BOOLS = {"yes": True, "true": True, "on": True, "no": False, "false": False, "off": False, "y": True, "n": False}
_DFS = {f.value: f for f in DataFormat}
_FIDELITIES = {f.value: f for f in MathFidelity}
_constructor = SafeConstructor()

SECTIONS = ("devices", "queues", "graphs", "programs", "fused_ops")


class _Bad(Exception):
    """A field value of the wrong type or outside its legal set."""

    def __init__(self, message: str, expected: Any = None, actual: Any = None, rule: str = "schema.type"):
        super().__init__(message)
        self.message, self.expected, self.actual, self.rule = message, expected, actual, rule


def _line(node) -> int:
    return node.start_mark.line + 1


def _show(node) -> Any:
    if isinstance(node, ScalarNode):
        return node.value if node.tag != _NULL else "null"
    return "a list" if isinstance(node, SequenceNode) else "a map"


# --- scalar converters (each raises _Bad) --------------------------------------------------------------------------

def _int(n) -> int:
    if n.__class__ is ScalarNode and n.tag == _INT:
        v = n.value
        if v.isdigit() and (v[0] != "0" or len(v) == 1):
            return int(v)
        return _constructor.construct_yaml_int(n)
    raise _Bad("must be an integer", "an integer", _show(n))


def _bool(n) -> bool:
    if n.__class__ is ScalarNode and n.tag == _BOOL:
        return _BOOLS[n.value.lower()]
    raise _Bad("must be a boolean", "true or false", _show(n))


def _float(n) -> float:
    if n.__class__ is ScalarNode:
        if n.tag == _FLOAT:
            return _constructor.construct_yaml_float(n)
        if n.tag == _INT:
            return _int(n)
    raise _Bad("must be a number", "a number", _show(n))


def _str(n) -> str:
    if n.__class__ is ScalarNode and n.tag != _NULL:
        return n.value
    raise _Bad("must be a string", "a string", _show(n))


def _scalar(n) -> Any:
    """A program value as written: bool, int or string (`$var`, ...)."""
    if n.__class__ is not ScalarNode or n.tag == _NULL:
        raise _Bad("must be a scalar (bool, int or $variable)", "a scalar", _show(n))
    tag = n.tag
    if tag == _INT:
        return _int(n)
    if tag == _BOOL:
        return _BOOLS[n.value.lower()]
    if tag == _FLOAT:
        return _constructor.construct_yaml_float(n)
    return n.value


def _pair(n) -> tuple:
    if n.__class__ is SequenceNode and len(n.value) == 2:
        a, b = n.value
        return (_int(a), _int(b))
    raise _Bad("must be a list of 2 integers", "[int, int]", _show(n))


def _int_list(n) -> list:
    if n.__class__ is SequenceNode:
        return [_int(x) for x in n.value]
    raise _Bad("must be a list of integers", "[int, ...]", _show(n))


def _str_list(n) -> list:
    if n.__class__ is SequenceNode:
        return [_str(x) for x in n.value]
    raise _Bad("must be a list of names", "[name, ...]", _show(n))


def _int_or_list(n):
    if n.__class__ is SequenceNode:
        return [_int(x) for x in n.value]
    return _int(n)


def _df(n) -> DataFormat:
    v = _str(n)
    df = _DFS.get(v)
    if df is None:
        raise _Bad(f"unknown data format {v!r}", "one of " + ", ".join(_DFS), v, rule="df.invalid")
    return df


def _df_list(n) -> list:
    if n.__class__ is SequenceNode:
        return [_df(x) for x in n.value]
    raise _Bad("must be a list of data formats", "[df, ...]", _show(n))


def _fidelity(n) -> MathFidelity:
    v = _str(n)
    f = _FIDELITIES.get(v)
    if f is None:
        raise _Bad(f"unknown math fidelity {v!r}", "one of " + ", ".join(_FIDELITIES), v, rule="fidelity.invalid")
    return f


def _enum(legal: tuple, rule: str = "schema.value"):
    def parse(n) -> str:
        v = _str(n)
        if v not in legal:
            raise _Bad(f"illegal value {v!r}", "one of " + ", ".join(legal), v, rule=rule)
        return v
    return parse


def _tile_dim(n) -> tuple:
    p = _pair(n)
    if p not in TILE_DIMS:
        raise _Bad(f"illegal tile_dim {list(p)}", "one of " + ", ".join(str(list(t)) for t in TILE_DIMS), list(p),
                   rule="tile_dim.invalid")
    return p


def _alloc_list(n) -> list:
    """dram: [[channel, address], ...]."""
    if n.__class__ is SequenceNode:
        return [_pair(x) for x in n.value]
    raise _Bad("must be a list of [channel, address]", "[[channel, address], ...]", _show(n))


def _host_list(n) -> list:
    """host: [address, ...] or [[channel, address], ...]."""
    if n.__class__ is not SequenceNode:
        raise _Bad("must be a list of addresses or [channel, address]", "[address, ...]", _show(n))
    return [_pair(x) if x.__class__ is SequenceNode else _int(x) for x in n.value]


def _forked(n) -> list:
    if n.__class__ is not SequenceNode:
        raise _Bad("must be a list of {queue: op} maps", "[{queue: op}, ...]", _show(n))
    out = []
    for item in n.value:
        if item.__class__ is not MappingNode:
            raise _Bad("must be a list of {queue: op} maps", "{queue: op}", _show(item))
        out.extend((_str(k), _str(v)) for k, v in item.value)
    return out


# --- TMs -------------------------------------------------------------------------------------------------------

def _tm_list(n) -> list:
    """A TM list; null (or the legacy `None` spelling) is an empty list, as the backend reads it."""
    if n.__class__ is ScalarNode and (n.tag == _NULL or n.value == "None"):
        return []
    if n.__class__ is not SequenceNode:
        raise _Bad("must be a list of TMs", "[tm, ...]", _show(n), rule="tm.syntax")
    out = []
    for item in n.value:
        if item.__class__ is ScalarNode:
            if item.value != "transpose":
                raise _Bad(f"only transpose may be written as a scalar TM, got {item.value!r}", "transpose",
                           item.value, rule="tm.unknown")
            out.append(("transpose",))
            continue
        if item.__class__ is not MappingNode:
            raise _Bad("a TM must be `transpose` or a {name: argument} map", "a TM", _show(item), rule="tm.syntax")
        for k, v in item.value:
            kind = k.value
            if kind == "broadcast":
                if v.__class__ is not MappingNode or not v.value:
                    raise _Bad("broadcast takes {r|c|z: factor}", "{r|c|z: factor}", _show(v), rule="tm.syntax")
                for dk, dv in v.value:
                    if dk.value not in ("r", "c", "z"):
                        raise _Bad(f"broadcast dim {dk.value!r}", "r, c or z", dk.value, rule="tm.syntax")
                    out.append(("broadcast", dk.value, _int(dv)))
            elif kind in ("hslice", "hstack", "vslice", "vstack"):
                out.append((kind, _int(v)))
            elif kind == "tile_broadcast":
                d = _str(v)
                if d not in ("r", "c"):
                    raise _Bad(f"tile_broadcast dim {d!r}", "r or c", d, rule="tm.syntax")
                out.append(("tile_broadcast", d))
            elif kind == "pad":
                if v.__class__ is not SequenceNode or len(v.value) != 3:
                    raise _Bad("pad takes [rt, ct, value]", "[rt, ct, value]", _show(v), rule="tm.syntax")
                rt, ct, val = v.value
                out.append(("pad", _int(rt), _int(ct), _float(val)))
            else:
                raise _Bad(f"unsupported TM {kind!r}", "one of transpose, broadcast, hslice, hstack, vslice, "
                           "vstack, pad, tile_broadcast", kind, rule="tm.unknown")
    return out


# --- field tables --------------------------------------------------------------------------------------------------

_QUEUE_FIELDS = {
    "input": _str, "alias": _str, "type": _enum(("queue", "ram")), "entries": _int, "grid_size": _pair, "t": _int,
    "mblock": _pair, "ublock": _pair, "ublock_order": _enum(("r", "c")), "tile_dim": _tile_dim, "df": _df,
    "layout": _enum(("tilized", "flat")), "target_device": _int_or_list, "loc": _enum(("dram", "host")),
    "dram": _alloc_list, "host": _host_list, "read_ports": _int_list, "write_ports": _int_list,
    "input_tms": _tm_list,
}

_OP_FIELDS = {
    "type": _str, "grid_loc": _int_list, "grid_size": _pair, "inputs": _str_list, "forked_dram_inputs": _forked,
    "gradient_op": _bool, "untilize_output": _bool, "grid_transpose": _bool, "overlay_size": _int, "t": _int,
    "mblock": _pair, "ublock": _pair, "tile_dim": _tile_dim, "buf_size_mb": _int,
    "input_buf_min_size_tiles": _int_list, "input_dram_io_buf_size_tiles": _int_list,
    "ublock_order": _enum(("r", "c")), "in_df": _df_list, "out_df": _df, "intermed_df": _df, "acc_df": _df,
    "math_fidelity": _fidelity,
}

_SUB_OP_FIELDS = {
    "type": _str, "inputs": _str_list, "output": _str, "mblock": _pair, "ublock": _pair, "pop": _str_list,
    "pop_last": _str_list, "zero_point": _float,
}

_QS_FIELDS = {f: _scalar for f in QueueSettings.FIELDS}

_ANY = None   # attribute allowed on every op type
_FUSED = "fused_op"
# attribute -> (parser, op types it is legal on or None for all); netlist_parser.cpp parse_op
_ATTRS = {
    "kernel_broadcast": ("kb", _ANY), "kernel_broadcast_per_t": ("kb", _ANY), "single_tile": (_int_list, _ANY),
    "m_k": (_int, _ANY), "u_kt": (_int, _ANY), "bias": (_bool, _ANY), "sfpu_op": (_str, _ANY),
    "accumulate": (_bool, _ANY), "vector": (_enum(("r", "c", "rc"), "attr.vector"), _ANY),
    "approximate_mode": (_bool, _ANY), "relu_en": (_bool, _ANY), "relu_threshold": (_float, _ANY),
    "relu_mode": (_enum(("min", "max"), "attr.relu_mode"), _ANY), "srnd_fpu_en": (_bool, _ANY),
    "stoch_rnd_mode": (_enum(("none", "fpu", "pack", "all"), "attr.stoch_rnd_mode"), _ANY),
    "identity": (_bool, ("matmul", _FUSED)), "num_index_tiles": (_int, ("matmul", _FUSED, "buffer")),
    "num_sparse_tiles": (_int, ("matmul", _FUSED)), "num_columns": (_int, ("matmul", _FUSED)),
    "sparse_tile_ptr_bits": (_int, ("matmul", _FUSED, "buffer")),
    "sparse_ublock_idx_bits": (_int, ("matmul", _FUSED, "buffer")), "indices_len": (_int, ("matmul", _FUSED)),
    "sparse_nz_ublocks": (_int, ("matmul", _FUSED)), "sparse_nz_strips": (_int, ("matmul", _FUSED)),
    "fracture_factor": (_int, ("matmul", _FUSED)), "starting_row": (_int, ("matmul", _FUSED)),
    "act_t": (_int, ("matmul", _FUSED)), "num_nz_strips": (_int_list, ("matmul", _FUSED, "buffer")),
    "min_buffer_input": (_int, ("matmul", _FUSED, "buffer", "depthwise")), "l1_acc": (_bool, ("matmul", "depthwise")),
    "dim": (_enum(("r", "c", "z"), "attr.reduce_dim"), ("reduce", _FUSED)),
    "type": (_enum(("max",), "attr.reduce_type"), ("reduce", _FUSED)), "z": (_int, ("reduce", _FUSED, "matmul")),
    "p": (_float, ("dropout", _FUSED)), "seed": (_int, ("dropout", _FUSED)), "slope": (_float, ("lrelu", _FUSED)),
    "exp": (_int, ("power", _FUSED)), "fused_op_id": (_str, (_FUSED,)),
    "granularity": (_enum(("ublock", "t"), "attr.splice_granularity"), ("splice",)),
    "num_indices": (_int, ("embedding",)),
    "sfpu_execution_thread": (_enum(("math", "pack"), "attr.sfpu_execution_thread"), "matmul+sfpu"),
    "requant": (_bool, ("matmul",)), "dequant": (_bool, ("matmul",)), "k": (_int, ("topk",)),
    "sort": (_enum(("max", "argmax"), "attr.topk_sort"), ("topk",)), "zero_point": (_float, _ANY),
    "ingress_channels": (_int_list, _ANY), "egress_channels": (_int_list, _ANY), "dest_device": (_int, _ANY),
}
# attributes of fused sub-ops (parse_scheduled_op_fields)
_SUB_ATTRS = {"m_k": _ANY, "u_kt": _ANY, "vector": _ANY, "type": ("reduce",), "dim": ("reduce",), "relu_en": _ANY,
              "relu_threshold": _ANY, "relu_mode": _ANY, "p": ("dropout",), "seed": ("dropout",),
              "slope": ("lrelu",), "exp": ("power",)}

_EDGE_KEY = re.compile(r"input_(\d+)_(tms|unpad|pad)$")
_SPLICE_KEY = re.compile(r"input(\d+)$")


def _legal_attrs(op_type: str, sub_op: bool = False) -> list:
    if sub_op:
        return sorted(a for a, types in _SUB_ATTRS.items() if types is None or op_type in types)
    out = []
    for a, (_, types) in _ATTRS.items():
        if types is None or (types == "matmul+sfpu" and (op_type == "matmul" or op_type in SFPU_OPS)) or \
                (isinstance(types, tuple) and op_type in types):
            out.append(a)
    if op_type == "splice":
        out.append("inputN")
    return sorted(out)


# --- the reader --------------------------------------------------------------------------------------------------

class _Reader:
    def __init__(self, file: str | None):
        self.file = file
        self.errors: list[NetlistViolation] = []

    def err(self, line: int, obj: str, rule: str, message: str, expected: Any = None, actual: Any = None) -> None:
        self.errors.append(NetlistViolation(self.file, line, obj, rule, expected, actual, message))

    def bad(self, node, obj: str, field: str, e: _Bad) -> None:
        self.err(_line(node), obj, e.rule, f"field {field!r} {e.message}", e.expected, e.actual)

    def unknown(self, node, obj: str, kind: str, key: str, legal) -> None:
        self.err(_line(node), obj, "schema.unknown_field", f"field {key!r} is not supported for {kind}",
                 "one of " + ", ".join(legal), key)

    def mapping(self, node, obj: str, what: str) -> bool:
        if node.__class__ is MappingNode:
            return True
        self.err(_line(node), obj, "schema.type", f"{what} must be a map", "a map", _show(node))
        return False

    def missing(self, node, obj: str, kind: str, fields) -> None:
        for f in fields:
            self.err(_line(node), obj, "schema.missing_field", f"{kind} needs field {f!r}", f, "absent")

    # top level ----------------------------------------------------------------------------------------------------
    def netlist(self, root) -> Netlist | None:
        if root is None or root.__class__ is not MappingNode:
            line = _line(root) if root is not None else 1
            self.err(line, "netlist", "schema.type", "a netlist must be a YAML map of sections", "a map",
                     _show(root) if root is not None else "an empty document")
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
                extra[key if key is not None else str(_show(k))] = _constructor.construct_document(v)
        for s in ("devices", "queues", "graphs", "programs"):
            if s not in sections:
                self.err(1, "netlist", "schema.missing_section", f"the netlist has no {s!r} section", s, "absent")
        devices = self.devices(*sections["devices"]) if "devices" in sections else None
        queues = self.queues(*sections["queues"]) if "queues" in sections else {}
        graphs = self.graphs(*sections["graphs"]) if "graphs" in sections else {}
        programs = self.programs(*sections["programs"]) if "programs" in sections else []
        fused = self.fused_ops(*sections["fused_ops"]) if "fused_ops" in sections else None
        if devices is None:
            return None
        return Netlist(devices=devices, queues=queues, graphs=graphs, programs=programs, fused_ops=fused,
                       extra_sections=extra, source=self.file)

    def devices(self, k, v) -> Devices | None:
        if not self.mapping(v, "devices", "devices"):
            return None
        arch = None
        for dk, dv in v.value:
            if dk.value != "arch":
                self.unknown(dk, "devices", "devices", dk.value, ["arch"])
                continue
            try:
                if dv.__class__ is SequenceNode:
                    arch = [_str(x) for x in dv.value]
                    names = arch
                else:
                    arch = _str(dv)
                    names = [arch]
            except _Bad as e:
                self.bad(dv, "devices", "arch", e)
                return None
            for a in names:
                if a not in ARCHS:
                    self.err(_line(dv), "devices", "schema.value", f"unknown arch {a!r}", "one of " + ", ".join(ARCHS),
                             a)
                    return None
            if not names:
                self.err(_line(dv), "devices", "schema.value", "the arch list is empty", "an arch", "[]")
                return None
        if arch is None:
            self.missing(v, "devices", "devices", ["arch"])
            return None
        return Devices(arch, line=_line(k))

    def queues(self, k, v) -> dict:
        out: dict = {}
        if v.__class__ is ScalarNode and v.tag == _NULL:
            return out
        if not self.mapping(v, "queues", "the queues section"):
            return out
        for qk, qv in v.value:
            name = qk.value
            if name in out:
                self.err(_line(qk), f"queue {name}", "name.duplicate", f"queue {name!r} is defined twice")
                continue
            q = self.queue(name, qk, qv)
            if q is not None:
                out[name] = q
        return out

    def queue(self, name: str, k, v) -> Queue | None:
        obj = f"queue {name}"
        if not self.mapping(v, obj, "a queue"):
            return None
        kw: dict = {}
        ok = True
        for fk, fv in v.value:
            key = fk.value
            parse = _QUEUE_FIELDS.get(key)
            if parse is None:
                self.unknown(fk, obj, "queues", key, _QUEUE_FIELDS)
                ok = False
                continue
            if key in kw:
                self.err(_line(fk), obj, "schema.duplicate_key", f"field {key!r} appears twice")
                ok = False
                continue
            try:
                kw[key] = parse(fv)
            except _Bad as e:
                self.bad(fv, obj, key, e)
                ok = False
        missing = [f for f in Queue.REQUIRED if f not in kw]
        loc = kw.get("loc")
        if loc is not None and loc not in kw:
            missing.append(loc)
        if missing:
            self.missing(k, obj, "a queue", missing)
            return None
        if not ok:
            return None
        return Queue(name=name, line=_line(k), **kw)

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
        obj = f"graph {name}"
        if not self.mapping(v, obj, "a graph"):
            return None
        g = Graph(name=name, line=_line(k))
        for fk, fv in v.value:
            key = fk.value
            try:
                if key == "target_device":
                    g.target_device = _int_or_list(fv)
                elif key == "input_count":
                    g.input_count = _int(fv)
                else:
                    if key in g.ops:
                        self.err(_line(fk), f"op {key}", "name.duplicate", f"op {key!r} is defined twice in {name}")
                        continue
                    op = self.op(key, fk, fv, name)
                    if op is not None:
                        g.ops[key] = op
            except _Bad as e:
                self.bad(fv, obj, key, e)
        return g

    def op(self, name: str, k, v, graph: str) -> Op | None:
        obj = f"op {name}"
        if v.__class__ is not MappingNode:
            self.err(_line(k), obj, "schema.type", f"graph {graph}: {name!r} is neither target_device, input_count "
                     "nor an op (a map)", "an op map", _show(v))
            return None
        kw: dict = {}
        edges: list = []
        attr_node = None
        ok = True
        for fk, fv in v.value:
            key = fk.value
            parse = _OP_FIELDS.get(key)
            if parse is None:
                if key == "attributes":
                    attr_node = (fk, fv)
                    continue
                m = _EDGE_KEY.match(key)
                if m is None:
                    self.unknown(fk, obj, "ops", key, list(_OP_FIELDS) + ["attributes", "input_N_tms", "input_N_pad",
                                                                         "input_N_unpad"])
                    ok = False
                    continue
                edges.append((int(m.group(1)), m.group(2), fk, fv))
                continue
            if key in kw:
                self.err(_line(fk), obj, "schema.duplicate_key", f"field {key!r} appears twice")
                ok = False
                continue
            try:
                kw[key] = parse(fv)
            except _Bad as e:
                self.bad(fv, obj, key, e)
                ok = False
        required = Op.REQUIRED if kw.get("type") == "ethernet_datacopy" else Op.REQUIRED + ("grid_loc",)
        missing = [f for f in required if f not in kw]
        if missing:
            self.missing(k, obj, "an op", missing)
            return None
        n_inputs = len(kw["inputs"])
        tms: dict = {}
        pads: dict = {}
        unpads: dict = {}
        for idx, kind, fk, fv in edges:
            if idx >= n_inputs:
                self.err(_line(fk), obj, "tm.input_index", f"{fk.value} names input {idx} but the op has "
                         f"{n_inputs} inputs", f"< {n_inputs}", idx)
                ok = False
                continue
            table = tms if kind == "tms" else pads if kind == "pad" else unpads
            if idx in table:
                self.err(_line(fk), obj, "schema.duplicate_key", f"field {fk.value!r} appears twice")
                ok = False
                continue
            try:
                table[idx] = _tm_list(fv) if kind == "tms" else self.pad(fv, kind)
            except _Bad as e:
                self.bad(fv, obj, fk.value, e)
                ok = False
        attrs = None
        if attr_node is not None:
            attrs = self.attributes(attr_node[1], obj, kw["type"], n_inputs)
            if attrs is None:
                ok = False
        if not ok:
            return None
        if "grid_loc" in kw and len(kw["grid_loc"]) != 2:
            self.err(_line(k), obj, "schema.type", "field 'grid_loc' must be a list of 2 integers", "[row, col]",
                     kw["grid_loc"])
            return None
        if "grid_loc" in kw:
            kw["grid_loc"] = tuple(kw["grid_loc"])
        return Op(name=name, graph=graph, line=_line(k), input_tms=tms, input_pad=pads, input_unpad=unpads,
                  attributes=attrs, **kw)

    def pad(self, n, kind: str) -> Pad:
        if n.__class__ is not MappingNode:
            raise _Bad("must be a map", "{rt, ct" + (", pad_value}" if kind == "pad" else "}"), _show(n))
        p = Pad()
        legal = ("rt", "ct", "pad_value") if kind == "pad" else ("rt", "ct")
        for k, v in n.value:
            key = k.value
            if key not in legal:
                raise _Bad(f"has unknown key {key!r}", "one of " + ", ".join(legal), key, rule="schema.unknown_field")
            setattr(p, key, _float(v) if key == "pad_value" else _int(v))
        return p

    def attributes(self, n, obj: str, op_type: str, n_inputs: int, sub_op: bool = False) -> Attributes | None:
        if n.__class__ is not MappingNode:
            self.err(_line(n), obj, "schema.type", "attributes must be a map", "a map", _show(n))
            return None
        a = Attributes()
        ok = True
        for k, v in n.value:
            key = k.value
            entry = _ATTRS.get(key)
            splice = None
            if sub_op:
                types = _SUB_ATTRS.get(key, "absent")
                allowed = types != "absent" and (types is None or op_type in types)
            elif entry is None:
                splice = _SPLICE_KEY.match(key) if op_type == "splice" else None
                allowed = splice is not None
            else:
                types = entry[1]
                allowed = types is None or (types == "matmul+sfpu" and (op_type == "matmul" or op_type in SFPU_OPS)) \
                    or (isinstance(types, tuple) and op_type in types)
            if not allowed:
                self.err(_line(k), obj, "attr.unknown", f"attribute {key!r} is invalid or unsupported for op type "
                         f"{op_type!r}", "one of " + ", ".join(_legal_attrs(op_type, sub_op)), key)
                ok = False
                continue
            try:
                if splice is not None:
                    idx = int(splice.group(1))
                    if v.__class__ is not SequenceNode or len(v.value) != 3:
                        raise _Bad("must be [index, length, stride]", "[index, length, stride]", _show(v))
                    if a.splice is None:
                        a.splice = {}
                    if idx in a.splice:
                        raise _Bad("appears twice", None, None, rule="schema.duplicate_key")
                    a.splice[idx] = tuple(_int(x) for x in v.value)
                    continue
                if getattr(a, key) is not None:
                    raise _Bad("appears twice", None, None, rule="schema.duplicate_key")
                parse = entry[0]
                if parse == "kb":
                    if v.__class__ is not MappingNode:
                        raise _Bad("must be a map {input_N: tiles}", "{input_N: tiles}", _show(v))
                    kb = {}
                    for ik, iv in v.value:
                        m = re.fullmatch(r"input_(\d+)", ik.value)
                        if m is None:
                            raise _Bad(f"has key {ik.value!r}", "input_N", ik.value, rule="attr.kernel_broadcast")
                        kb[int(m.group(1))] = _int(iv)
                    setattr(a, key, kb)
                else:
                    setattr(a, key, parse(v))
            except _Bad as e:
                self.bad(v, obj, f"attributes.{key}", e)
                ok = False
        return a if ok else None

    # fused ops ----------------------------------------------------------------------------------------------------
    def fused_ops(self, k, v) -> dict:
        out: dict = {}
        if not self.mapping(v, "fused_ops", "the fused_ops section"):
            return out
        for fk, fv in v.value:
            fid = fk.value
            obj = f"fused_op {fid}"
            if fid in out:
                self.err(_line(fk), obj, "name.duplicate", f"fused op id {fid!r} is defined twice")
                continue
            if not self.mapping(fv, obj, "a fused op"):
                continue
            kw: dict = {}
            ok = True
            for ek, ev in fv.value:
                key = ek.value
                try:
                    if key in ("inputs", "intermediates"):
                        kw[key] = _int(ev)
                    elif key == "custom_kernel_path":
                        kw[key] = _str(ev)
                    elif key == "schedules":
                        kw[key] = self.schedules(ev, obj)
                        if kw[key] is None:
                            ok = False
                    else:
                        self.unknown(ek, obj, "fused_ops", key, ["inputs", "intermediates", "schedules",
                                                                  "custom_kernel_path"])
                        ok = False
                except _Bad as e:
                    self.bad(ev, obj, key, e)
                    ok = False
            missing = [f for f in ("inputs", "intermediates", "schedules") if f not in kw]
            if missing:
                self.missing(fk, obj, "a fused op", missing)
                continue
            if ok:
                out[fid] = FusedOp(id=fid, line=_line(fk), **kw)
        return out

    def schedules(self, n, obj: str) -> list | None:
        if n.__class__ is not SequenceNode:
            raise _Bad("must be a list of schedules", "[[sub-op, ...], ...]", _show(n))
        out = []
        ok = True
        for sched in n.value:
            if sched.__class__ is not SequenceNode:
                self.err(_line(sched), obj, "schema.type", "a schedule must be a list of sub-ops", "a list",
                         _show(sched))
                ok = False
                continue
            ops = []
            for entry in sched.value:
                if entry.__class__ is not MappingNode or len(entry.value) != 1:
                    self.err(_line(entry), obj, "schema.type", "a scheduled op must be a single-key map "
                             "{name: {fields}}", "{name: {...}}", _show(entry))
                    ok = False
                    continue
                (sk, sv), = entry.value
                sub = self.sub_op(sk.value, sk, sv, obj)
                if sub is None:
                    ok = False
                else:
                    ops.append(sub)
            out.append(ops)
        return out if ok else None

    def sub_op(self, name: str, k, v, fused_obj: str) -> FusedSubOp | None:
        obj = f"{fused_obj} sub-op {name}"
        if not self.mapping(v, obj, "a scheduled op"):
            return None
        kw: dict = {}
        tms: dict = {}
        attr_node = None
        ok = True
        edge_nodes = []
        for fk, fv in v.value:
            key = fk.value
            parse = _SUB_OP_FIELDS.get(key)
            if parse is None:
                if key == "attributes":
                    attr_node = fv
                    continue
                m = _EDGE_KEY.match(key)
                if m is None or m.group(2) != "tms":
                    self.unknown(fk, obj, "fused sub-ops", key, list(_SUB_OP_FIELDS) + ["attributes", "input_N_tms"])
                    ok = False
                    continue
                edge_nodes.append((int(m.group(1)), fk, fv))
                continue
            try:
                kw[key] = parse(fv)
            except _Bad as e:
                self.bad(fv, obj, key, e)
                ok = False
        missing = [f for f in FusedSubOp.REQUIRED if f not in kw]
        if missing:
            self.missing(k, obj, "a scheduled op", missing)
            return None
        for idx, fk, fv in edge_nodes:
            if idx >= len(kw["inputs"]):
                self.err(_line(fk), obj, "tm.input_index", f"{fk.value} names input {idx} but the sub-op has "
                         f"{len(kw['inputs'])} inputs", f"< {len(kw['inputs'])}", idx)
                ok = False
                continue
            try:
                tms[idx] = _tm_list(fv)
            except _Bad as e:
                self.bad(fv, obj, fk.value, e)
                ok = False
        attrs = None
        if attr_node is not None:
            attrs = self.attributes(attr_node, obj, kw["type"], len(kw["inputs"]), sub_op=True)
            ok = ok and attrs is not None
        if not ok:
            return None
        return FusedSubOp(name=name, line=_line(k), input_tms=tms, attributes=attrs, **kw)

    # programs -----------------------------------------------------------------------------------------------------
    def programs(self, k, v) -> list:
        out: list = []
        if v.__class__ is not SequenceNode:
            self.err(_line(v), "programs", "schema.type", "programs must be a list of {name: [instructions]}",
                     "a list", _show(v))
            return out
        names = set()
        for p in v.value:
            if p.__class__ is not MappingNode or len(p.value) != 1:
                self.err(_line(p), "programs", "schema.type", "each program must be a single-key map "
                         "{name: [instructions]}", "{name: [...]}", _show(p))
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
        if v.__class__ is ScalarNode and v.tag == _NULL:
            return Program(name=name, instructions=[], line=_line(k))
        if v.__class__ is not SequenceNode:
            self.err(_line(v), obj, "schema.type", "a program must be a list of instructions", "a list", _show(v))
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
                     "{opcode: ...}", _show(n))
            return None
        (ok_, ov), = n.value
        op = ok_.value
        try:
            if op == "loop":
                return Loop(count=_scalar(ov), line=line)
            if op == "execute":
                return self.execute(ov, obj, line)
            if op in ("var", "staticvar"):
                if ov.__class__ is MappingNode:
                    return Var(opcode=op, vars={_str(a): _int(b) for a, b in ov.value}, line=line)
                if ov.__class__ is SequenceNode:
                    return Var(opcode=op, vars={_str(a): 0 for a in ov.value}, as_list=True, line=line)
                raise _Bad("variables must be a list or a map", "[$a, ...] or {$a: value}", _show(ov))
            if op == "param":
                return Param(names=_str_list(ov), line=line)
            if op == "varinst":
                if ov.__class__ is not SequenceNode or len(ov.value) < 2:
                    raise _Bad("must be [$out, opcode, operands...]", "[$out, opcode, ...]", _show(ov))
                dst, vop, *args = ov.value
                return VarInst(dst=_str(dst), op=_str(vop), args=[_scalar(a) for a in args], line=line)
            if op in ("allocate_queue", "deallocate_queue"):
                return QueueAlloc(opcode=op, queues=_str_list(ov), line=line)
            if op == "endloop":
                return EndLoop(line=line)
        except _Bad as e:
            self.err(line, obj, e.rule if e.rule != "schema.type" else "program.syntax", f"{op}: {e.message}",
                     e.expected, e.actual)
            return None
        self.err(line, obj, "program.opcode", f"invalid instruction opcode {op!r}",
                 "one of " + ", ".join(o for o in OPCODES if o != "endprogram"), op)
        return None

    def execute(self, n, obj: str, line: int) -> Execute | None:
        if n.__class__ is not MappingNode:
            raise _Bad("must be a map {graph_name, queue_settings}", "{graph_name: ..., queue_settings: ...}",
                       _show(n))
        graph = None
        settings: dict = {}
        ok = True
        for k, v in n.value:
            key = k.value
            if key == "graph_name":
                graph = _str(v)
            elif key == "queue_settings":
                if v.__class__ is ScalarNode and v.tag == _NULL:
                    continue
                if v.__class__ is not MappingNode:
                    raise _Bad("queue_settings must be a map", "{queue: {...}}", _show(v))
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
        if not self.mapping(v, where, "queue settings"):
            return None
        qs = QueueSettings(line=_line(k))
        ok = True
        for fk, fv in v.value:
            key = fk.value
            if key not in _QS_FIELDS:
                self.unknown(fk, where, "queue_settings", key, QueueSettings.FIELDS)
                ok = False
                continue
            try:
                setattr(qs, key, _scalar(fv))
            except _Bad as e:
                self.bad(fv, where, key, e)
                ok = False
        return qs if ok else None


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
    raise TypeError(f"load takes a path or YAML text, got {type(source).__name__}")


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
        raise NetlistError([NetlistViolation(name, _line(k), "netlist", "schema.type", "a name", _show(k),
                                             "map keys must be scalars") for k in bad]) from None
    if reader.errors or netlist is None:
        raise NetlistError(reader.errors or [NetlistViolation(name, 0, "netlist", "schema.type", None, None,
                                                              "not a netlist")])
    return netlist
