"""The vocabulary the netlist records are declared in (netlist-format.md §1, §2).

A record (`Queue`, `Op`, `Attributes`, ...) is a dataclass whose netlist fields are declared with `spec(kind,
...)`: the field's YAML key, its `Kind` (how it reads from a YAML node, its legal values, and how it writes back
as plain data), whether it is required, the op types it applies to, the writer's line group. Declaration order is
the writer's order. `record_schema(cls)` collects the declaration once per class; `pybuda.netlist.reader` and
`pybuda.netlist.writer` are generic walkers over it, so a field is added in one place.
"""
from __future__ import annotations

import dataclasses
import functools
import re
from dataclasses import dataclass
from typing import Any, Callable, NamedTuple

from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, ScalarNode, SequenceNode

from ..dataformat import DataFormat, MathFidelity
from ..errors import InternalError, UserInputError

NULL_TAG = "tag:yaml.org,2002:null"
_INT_TAG = "tag:yaml.org,2002:int"
_BOOL_TAG = "tag:yaml.org,2002:bool"
_FLOAT_TAG = "tag:yaml.org,2002:float"
_BOOLS = {"yes": True, "true": True, "on": True, "no": False, "false": False, "off": False, "y": True, "n": False}
_constructor = SafeConstructor()


class Bad(UserInputError):
    """A field value of the wrong type or outside its legal set. The reader reports it as "field <key>
    <message>" (`whole`: the message alone) under `rule`."""

    def __init__(self, message: str, expected: Any = None, actual: Any = None, rule: str = "schema.type",
                 whole: bool = False):
        super().__init__(message)
        self.message, self.expected, self.actual, self.rule, self.whole = message, expected, actual, rule, whole


class HexInt(int):
    """An int written in hex (DRAM/host addresses)."""


def show(node) -> Any:
    """A node as an error message shows what was found."""
    if isinstance(node, ScalarNode):
        return node.value if node.tag != NULL_TAG else "null"
    return "a list" if isinstance(node, SequenceNode) else "a map"


def is_null(node) -> bool:
    return node.__class__ is ScalarNode and node.tag == NULL_TAG


# --- scalar readers (each raises Bad) ------------------------------------------------------------------------------

def read_int(n) -> int:
    if n.__class__ is ScalarNode and n.tag == _INT_TAG:
        v = n.value
        if v.isdigit() and (v[0] != "0" or len(v) == 1):
            return int(v)
        return _constructor.construct_yaml_int(n)
    raise Bad("must be an integer", "an integer", show(n))


def read_bool(n) -> bool:
    if n.__class__ is ScalarNode and n.tag == _BOOL_TAG:
        return _BOOLS[n.value.lower()]
    raise Bad("must be a boolean", "true or false", show(n))


def read_float(n) -> float:
    if n.__class__ is ScalarNode:
        if n.tag == _FLOAT_TAG:
            return _constructor.construct_yaml_float(n)
        if n.tag == _INT_TAG:
            return read_int(n)
    raise Bad("must be a number", "a number", show(n))


def read_str(n) -> str:
    if n.__class__ is ScalarNode and n.tag != NULL_TAG:
        return n.value
    raise Bad("must be a string", "a string", show(n))


def read_scalar(n) -> Any:
    """A program value as written: bool, int or string (`$var`, ...)."""
    if n.__class__ is not ScalarNode or n.tag == NULL_TAG:
        raise Bad("must be a scalar (bool, int or $variable)", "a scalar", show(n))
    tag = n.tag
    if tag == _INT_TAG:
        return read_int(n)
    if tag == _BOOL_TAG:
        return _BOOLS[n.value.lower()]
    if tag == _FLOAT_TAG:
        return _constructor.construct_yaml_float(n)
    return n.value


def read_pair(n) -> tuple:
    if n.__class__ is SequenceNode and len(n.value) == 2:
        a, b = n.value
        return (read_int(a), read_int(b))
    raise Bad("must be a list of 2 integers", "[int, int]", show(n))


def read_list(item: Callable, what: str, expected: str) -> Callable:
    """A reader of a YAML list of `item`s."""
    def read(n) -> list:
        if n.__class__ is SequenceNode:
            return [item(x) for x in n.value]
        raise Bad(f"must be a list of {what}", expected, show(n))
    return read


read_str_list = read_list(read_str, "names", "[name, ...]")


# --- kinds ---------------------------------------------------------------------------------------------------------

def _same(v):
    return v


@dataclass(frozen=True)
class Kind:
    """How a field's value reads from a YAML node (`read`, raising `Bad`) and writes back as plain YAML data
    (`data`). `legal` names the legal values where they are a fixed set; `finish` checks a value once the rest of
    its record read cleanly (raising `Bad`, reported at the record's line) and may convert it."""

    name: str
    read: Callable
    data: Callable = _same
    legal: tuple = ()
    finish: Callable | None = None


def enum(legal: tuple, rule: str = "schema.value") -> Kind:
    """A string out of `legal`; anything else is reported under `rule`."""
    def read(n) -> str:
        v = read_str(n)
        if v not in legal:
            raise Bad(f"illegal value {v!r}", "one of " + ", ".join(legal), v, rule=rule)
        return v
    return Kind("enum", read, legal=tuple(legal))


def _read_df(n) -> DataFormat:
    v = read_str(n)
    df = _DFS.get(v)
    if df is None:
        raise Bad(f"unknown data format {v!r}", "one of " + ", ".join(_DFS), v, rule="df.invalid")
    return df


def _read_fidelity(n) -> MathFidelity:
    v = read_str(n)
    f = _FIDELITIES.get(v)
    if f is None:
        raise Bad(f"unknown math fidelity {v!r}", "one of " + ", ".join(_FIDELITIES), v, rule="fidelity.invalid")
    return f


_DFS = {f.value: f for f in DataFormat}
_FIDELITIES = {f.value: f for f in MathFidelity}


def tile_dim_kind(legal: tuple) -> Kind:
    def read(n) -> tuple:
        p = read_pair(n)
        if p not in legal:
            raise Bad(f"illegal tile_dim {list(p)}", "one of " + ", ".join(str(list(t)) for t in legal), list(p),
                      rule="tile_dim.invalid")
        return p
    return Kind("tile_dim", read, list, legal)


def _read_int_or_list(n):
    if n.__class__ is SequenceNode:
        return [read_int(x) for x in n.value]
    return read_int(n)


def _read_dram(n) -> list:
    """dram: [[channel, address], ...]."""
    if n.__class__ is SequenceNode:
        return [read_pair(x) for x in n.value]
    raise Bad("must be a list of [channel, address]", "[[channel, address], ...]", show(n))


def _read_host(n) -> list:
    """host: [address, ...] or [[channel, address], ...]."""
    if n.__class__ is not SequenceNode:
        raise Bad("must be a list of addresses or [channel, address]", "[address, ...]", show(n))
    return [read_pair(x) if x.__class__ is SequenceNode else read_int(x) for x in n.value]


def _read_forked(n) -> list:
    if n.__class__ is not SequenceNode:
        raise Bad("must be a list of {queue: op} maps", "[{queue: op}, ...]", show(n))
    out = []
    for item in n.value:
        if item.__class__ is not MappingNode:
            raise Bad("must be a list of {queue: op} maps", "{queue: op}", show(item))
        out.extend((read_str(k), read_str(v)) for k, v in item.value)
    return out


def _grid_loc(value: list) -> tuple:
    if len(value) != 2:
        raise Bad("must be a list of 2 integers", "[row, col]", value)
    return tuple(value)


def _read_kernel_broadcast(n) -> dict:
    """{input_N: tiles} -> {N: tiles}."""
    if n.__class__ is not MappingNode:
        raise Bad("must be a map {input_N: tiles}", "{input_N: tiles}", show(n))
    out = {}
    for k, v in n.value:
        m = re.fullmatch(r"input_(\d+)", k.value)
        if m is None:
            raise Bad(f"has key {k.value!r}", "input_N", k.value, rule="attr.kernel_broadcast")
        out[int(m.group(1))] = read_int(v)
    return out


def _read_splice(n) -> tuple:
    if n.__class__ is not SequenceNode or len(n.value) != 3:
        raise Bad("must be [index, length, stride]", "[index, length, stride]", show(n))
    return tuple(read_int(x) for x in n.value)


def fused_id_data(fid):
    """Fused-op ids are strings in the model; the legacy files write numeric ones bare (`0:`, `fused_op_id: 0`)."""
    return int(fid) if isinstance(fid, str) and fid.isdigit() and str(int(fid)) == fid else fid


def _hex_host(h):
    return [h[0], HexInt(h[1])] if isinstance(h, (list, tuple)) else HexInt(h)


# --- TMs -----------------------------------------------------------------------------------------------------------

TM_KINDS = ("transpose", "broadcast", "hslice", "hstack", "vslice", "vstack", "pad", "tile_broadcast")


def read_tms(n) -> list:
    """A TM list; null (or the legacy `None` spelling) is an empty list, as the backend reads it."""
    if n.__class__ is ScalarNode and (n.tag == NULL_TAG or n.value == "None"):
        return []
    if n.__class__ is not SequenceNode:
        raise Bad("must be a list of TMs", "[tm, ...]", show(n), rule="tm.syntax")
    out = []
    for item in n.value:
        if item.__class__ is ScalarNode:
            if item.value != "transpose":
                raise Bad(f"only transpose may be written as a scalar TM, got {item.value!r}", "transpose",
                          item.value, rule="tm.unknown")
            out.append(("transpose",))
            continue
        if item.__class__ is not MappingNode:
            raise Bad("a TM must be `transpose` or a {name: argument} map", "a TM", show(item), rule="tm.syntax")
        for k, v in item.value:
            out.extend(_read_tm(k.value, v))
    return out


def _read_tm(kind: str, v) -> list:
    if kind == "broadcast":
        if v.__class__ is not MappingNode or not v.value:
            raise Bad("broadcast takes {r|c|z: factor}", "{r|c|z: factor}", show(v), rule="tm.syntax")
        out = []
        for dk, dv in v.value:
            if dk.value not in ("r", "c", "z"):
                raise Bad(f"broadcast dim {dk.value!r}", "r, c or z", dk.value, rule="tm.syntax")
            out.append(("broadcast", dk.value, read_int(dv)))
        return out
    if kind in ("hslice", "hstack", "vslice", "vstack"):
        return [(kind, read_int(v))]
    if kind == "tile_broadcast":
        d = read_str(v)
        if d not in ("r", "c"):
            raise Bad(f"tile_broadcast dim {d!r}", "r or c", d, rule="tm.syntax")
        return [("tile_broadcast", d)]
    if kind == "pad":
        if v.__class__ is not SequenceNode or len(v.value) != 3:
            raise Bad("pad takes [rt, ct, value]", "[rt, ct, value]", show(v), rule="tm.syntax")
        rt, ct, val = v.value
        return [("pad", read_int(rt), read_int(ct), read_float(val))]
    raise Bad(f"unsupported TM {kind!r}", "one of " + ", ".join(TM_KINDS), kind, rule="tm.unknown")


def tm_data(tm: tuple):
    """One TM as plain YAML data."""
    kind = tm[0]
    if kind == "transpose":
        return "transpose"
    if kind == "broadcast":
        return {"broadcast": {tm[1]: tm[2]}}
    if kind == "pad":
        return {"pad": [tm[1], tm[2], float(tm[3])]}
    return {kind: tm[1]}


INT = Kind("int", read_int)
BOOL = Kind("bool", read_bool)
FLOAT = Kind("float", read_float)
STR = Kind("str", read_str)
SCALAR = Kind("scalar", read_scalar)
PAIR = Kind("pair", read_pair, list)
INT_LIST = Kind("int_list", read_list(read_int, "integers", "[int, ...]"), list)
STR_LIST = Kind("str_list", read_str_list, list)
INT_OR_LIST = Kind("int_or_list", _read_int_or_list, lambda v: list(v) if isinstance(v, list) else v)
DF = Kind("df", _read_df, lambda d: d.value, tuple(_DFS))
DF_LIST = Kind("df_list", read_list(_read_df, "data formats", "[df, ...]"), lambda v: [d.value for d in v])
FIDELITY = Kind("fidelity", _read_fidelity, lambda f: f.value, tuple(_FIDELITIES))
DRAM = Kind("dram", _read_dram, lambda v: [[c, HexInt(a)] for c, a in v])
HOST = Kind("host", _read_host, lambda v: [_hex_host(h) for h in v])
FORKED = Kind("forked", _read_forked, lambda v: [{q: o} for q, o in v])
GRID_LOC = Kind("grid_loc", INT_LIST.read, list, finish=_grid_loc)
TMS = Kind("tms", read_tms, lambda tms: [tm_data(t) for t in tms], TM_KINDS)
KERNEL_BROADCAST = Kind("kernel_broadcast", _read_kernel_broadcast, lambda v: {f"input_{i}": n for i, n in v.items()})
SPLICE = Kind("splice", _read_splice, list)
FUSED_ID = Kind("fused_id", read_str, fused_id_data)


# --- field declarations --------------------------------------------------------------------------------------------

ANY = None                      # `on`: legal on every op type
NOT_IN_SUB_OPS = frozenset()    # `sub_on`: not an attribute of fused sub-ops


class Noun(NamedTuple):
    """How messages name a record: "field x is not supported for <plural>", "<article> needs field x", "the
    <short> has 2 inputs"."""

    plural: str
    article: str
    short: str = ""


@dataclass(frozen=True)
class FieldSpec:
    """One declared netlist field of a record.

    key: the YAML key; for an indexed field ("input_{}_tms") a pattern with the input index, whose value is a
    {index: value} dict. required: must be present (`required_unless_type`: except on these op types;
    `required_when`: (field, value) makes the field named by that value required, e.g. loc: dram -> dram).
    on / sub_on: op types an attribute applies to on ops / on fused sub-ops (ANY; NOT_IN_SUB_OPS).
    group: the writer's line of an op (0 placement and inputs, 1 blocking and formats, 2 edges and attributes).
    nested: the value is a record of its own (`Attributes`, `Pad`), read and written by the walkers."""

    name: str
    key: str
    kind: Kind | None
    required: bool
    indexed: bool = False
    required_unless_type: tuple = ()
    names_required: bool = False
    on: frozenset | None = ANY
    sub_on: frozenset | None = ANY
    group: int = 0
    nested: type | None = None

    @property
    def doc_key(self) -> str:
        return self.key.replace("{}", "N")


def spec(kind: Kind | None = None, *, key: str | None = None, default: Any = dataclasses.MISSING,
         default_factory: Any = dataclasses.MISSING, indexed: bool = False, required_unless_type: tuple = (),
         names_required: bool = False, on=ANY, sub_on=ANY, group: int = 0, nested: type | None = None):
    """A dataclass field declared as a netlist field (see `FieldSpec`); required when it has no default."""
    meta = {"netlist": dict(kind=kind, key=key, indexed=indexed, required_unless_type=required_unless_type,
                            names_required=names_required, on=on, sub_on=sub_on, group=group, nested=nested)}
    if default_factory is not dataclasses.MISSING:
        return dataclasses.field(default_factory=default_factory, metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


@dataclass(frozen=True)
class RecordSchema:
    """A record's declared fields: `fields` in declaration (= writer) order, `by_key` the plain ones by YAML
    key, `indexed` the input-indexed ones with the regular expression their keys match."""

    cls: type
    fields: tuple
    by_key: dict
    indexed: tuple
    indexed_key: re.Pattern | None

    @property
    def required(self) -> tuple:
        return tuple(f for f in self.fields if f.required)

    def legal_keys(self) -> list:
        """The keys a reader accepts, as an error message lists them."""
        return [f.doc_key for f in self.fields]

    def indexed_field(self, key: str):
        """(FieldSpec, index) of an indexed key such as input_2_tms, else None."""
        if self.indexed_key is None:
            return None
        m = self.indexed_key.match(key)
        if m is None:
            return None
        for f, g in zip(self.indexed, m.groups()[1:]):
            if g is not None:
                return f, int(m.group(1))
        return None


@functools.cache
def record_schema(cls: type) -> RecordSchema:
    """The netlist fields `cls` declares with `spec`, in declaration order."""
    fields = []
    for f in dataclasses.fields(cls):
        meta = f.metadata.get("netlist")
        if meta is None:
            continue
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        fields.append(FieldSpec(name=f.name, key=meta["key"] or f.name, kind=meta["kind"], required=required,
                                indexed=meta["indexed"], required_unless_type=meta["required_unless_type"],
                                names_required=meta["names_required"], on=meta["on"], sub_on=meta["sub_on"],
                                group=meta["group"], nested=meta["nested"]))
    indexed = tuple(f for f in fields if f.indexed)
    pattern = None
    if indexed:
        # input_{}_tms | input_{}_pad -> input_(\d+)_(?:(tms)|(pad))$ with one group per field
        prefix, _ = indexed[0].key.split("{}")
        if any(not f.key.startswith(prefix + "{}") for f in indexed):
            raise InternalError(f"{cls.__name__}: indexed keys must share their prefix")
        alts = "|".join(f"({re.escape(f.key.split('{}')[1])})" for f in indexed)
        pattern = re.compile(rf"{re.escape(prefix)}(\d+)(?:{alts})$")
    by_key = {f.key: f for f in fields if not f.indexed}
    return RecordSchema(cls, tuple(fields), by_key, indexed, pattern)


def record_items(obj) -> list:
    """(YAML key, plain data) of every field of record `obj` that is set, in declaration order; an indexed
    field gives one item per index, in index order."""
    out = []
    for f in record_schema(type(obj)).fields:
        v = getattr(obj, f.name)
        if v is None:
            continue
        if f.indexed:
            out.extend((f.key.format(i), f.kind.data(x)) for i, x in sorted(v.items()))
        else:
            out.append((f.key, f.kind.data(v)))
    return out


def record_data(obj) -> dict:
    """Record `obj` as plain YAML data in the writer's order."""
    return dict(record_items(obj))


def record_kind(cls: type, keys: tuple) -> Kind:
    """A kind whose value is a small record (`Pad`) written as a map of some of its declared fields (`keys`)."""
    schema = record_schema(cls)
    expected = "{" + ", ".join(keys) + "}"

    def read(n):
        if n.__class__ is not MappingNode:
            raise Bad("must be a map", expected, show(n))
        value = cls()
        for k, v in n.value:
            key = k.value
            if key not in keys:
                raise Bad(f"has unknown key {key!r}", "one of " + ", ".join(keys), key, rule="schema.unknown_field")
            f = schema.by_key[key]
            setattr(value, f.name, f.kind.read(v))
        return value
    return Kind(cls.__name__.lower(), read, record_data)
