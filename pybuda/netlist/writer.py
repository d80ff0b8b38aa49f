"""The netlist model -> YAML text in the legacy layout (netlist-format.md §1.1-§1.3, §2).

Sections in backend order (devices, queues, graphs, programs, fused_ops), then any sections the backend
ignores (`test-config`, ...). One compact flow map per queue (one line) and per op (the legacy compiler's
three lines: placement and inputs / blocking and formats / TMs and attributes); fields in the legacy order;
DRAM and host addresses in hex; queues grouped under `# input`, `# parameter`, ... comments when the model
carries `queue_groups`. `load(dump_netlist(n)) == n` for every netlist `load` accepts.
"""
from __future__ import annotations

import math
import os
import re
from pathlib import Path

import yaml
from yaml.nodes import ScalarNode
from yaml.representer import SafeRepresenter
from yaml.resolver import Resolver

from ..dataformat import DataFormat, MathFidelity
from ..files import write_atomically
from .model import Execute, FusedOp, Loop, Netlist, Op, Queue
from .schema import HexInt, fused_id_data, record_data, record_items, record_schema


def _hex(value: int) -> str:
    """Hex spelling YAML reads back as the same int (a negative one as -0x..)."""
    value = int(value)
    return f"-0x{-value:x}" if value < 0 else f"0x{value:x}"


def _represent_hex(dumper, value):
    return dumper.represent_scalar("tag:yaml.org,2002:int", _hex(value))


SafeRepresenter.add_representer(HexInt, _represent_hex)   # so yaml.safe_dump(netlist.to_dict()) works too


_resolver = Resolver()
_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_PLAIN = re.compile(r"^[A-Za-z0-9_$.][A-Za-z0-9_$./+\-]*$")
_plain_cache: dict = {}


def _str(s: str) -> str:
    """A string as a YAML scalar that reads back as the same string."""
    r = _plain_cache.get(s)
    if r is None:
        if _PLAIN.match(s) and _resolver.resolve(ScalarNode, s, (True, False)) == "tag:yaml.org,2002:str":
            r = s
        else:  # YAML's own double-quoted form, so that anything YAML read back writes back
            r = yaml.dump(s, Dumper=_DUMPER, default_style='"', width=1 << 30, allow_unicode=False).rstrip("\n")
        if len(_plain_cache) < 100000:
            _plain_cache[s] = r
    return r


def _float(v: float) -> str:
    if math.isnan(v):
        return ".nan"
    if math.isinf(v):
        return ".inf" if v > 0 else "-.inf"
    s = repr(float(v))
    if "." not in s:   # YAML 1.1 floats need a dot: 1e-05 -> 1.0e-05
        s = s.replace("e", ".0e") if "e" in s else s + ".0"
    return s


def scalar(v) -> str:
    if v is True:
        return "true"
    if v is False:
        return "false"
    if v is None:
        return "null"
    if isinstance(v, HexInt):
        return _hex(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        return _float(v)
    if isinstance(v, (DataFormat, MathFidelity)):
        return v.value
    return _str(str(v))


def flow(v) -> str:
    """A value in YAML flow style."""
    if isinstance(v, dict):
        return "{" + ", ".join(f"{scalar(k)}: {flow(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(flow(x) for x in v) + "]"
    return scalar(v)


# --- model -> data -------------------------------------------------------------------------------------------------

def queue_data(q: Queue) -> dict:
    return record_data(q)


def op_lines(op: Op) -> list:
    """The op's fields as three groups of (key, value): placement and inputs, blocking and formats, edges."""
    group_of = {f.key: f.group for f in record_schema(Op).fields}
    groups: list = [[], [], []]
    for key, value in record_items(op):
        groups[group_of.get(key, 2)].append((key, value))
    return groups


def op_data(op: Op) -> dict:
    return record_data(op)


def fused_op_data(f: FusedOp) -> dict:
    return record_data(f)


def instruction_data(ins):
    return ins.data()


def netlist_to_data(n: Netlist) -> dict:
    """The netlist as plain data (ints, strings, lists, dicts) in the legacy key order."""
    graphs = {gname: {**record_data(g), **{name: op_data(op) for name, op in g.ops.items()}}
              for gname, g in n.graphs.items()}
    d = {"devices": record_data(n.devices),
         "queues": {name: queue_data(q) for name, q in n.queues.items()},
         "graphs": graphs,
         "programs": [{p.name: [instruction_data(i) for i in p.instructions]} for p in n.programs]}
    if n.fused_ops is not None:
        d["fused_ops"] = {fused_id_data(fid): fused_op_data(f) for fid, f in n.fused_ops.items()}
    d.update(n.extra_sections)
    return d


# --- text ------------------------------------------------------------------------------------------------------

def _program_lines(p) -> list:
    lines = [f"  - {scalar(p.name)}:"]
    depth = 0
    for ins in p.instructions:
        if ins.opcode == "endloop":
            depth = max(0, depth - 1)
        pad = "  " * depth
        data = instruction_data(ins)
        if isinstance(data, str):
            lines.append(f"    - {pad}{data}")
        elif isinstance(ins, Execute):
            head = f"    - {pad}execute: {{graph_name: {scalar(ins.graph_name)}, queue_settings: {{"
            if not ins.queue_settings:
                lines.append(head + "}}")
            else:
                lines.append(head)
                items = [f"{' ' * 15}{scalar(q)}: {flow(record_data(s))}"
                         for q, s in ins.queue_settings.items()]
                lines.append(",\n".join(items) + "} }")
        else:
            (k, v), = data.items()
            lines.append(f"    - {pad}{k}: {flow(v)}")
        if isinstance(ins, Loop):
            depth += 1
    if not p.instructions:
        lines[-1] += " []"
    return lines


def dump_netlist(n: Netlist) -> str:
    """The netlist as YAML text in the legacy layout."""
    lines = ["devices:", *(f"  {key}: {flow(value)}" for key, value in record_items(n.devices)), "", "queues:"]
    group = None
    for name, q in n.queues.items():
        g = n.queue_groups.get(name)
        if g and g != group:
            lines += ["", f"  # {g}"]
            group = g
        lines.append(f"  {scalar(name)}: {flow(queue_data(q))}")
    if not n.queues:
        lines[-1] += " {}"
    lines += ["", "graphs:"]
    for gname, g in n.graphs.items():
        lines.append(f"  {scalar(gname)}:")
        lines += [f"    {key}: {flow(value)}" for key, value in record_items(g)]
        for name, op in g.ops.items():
            groups = [", ".join(f"{k}: {flow(v)}" for k, v in grp) for grp in op_lines(op) if grp]
            lines.append(f"    {scalar(name)}: {{" + ",\n         ".join(groups) + "}")
        if g.target_device is None and g.input_count is None and not g.ops:
            lines[-1] += " {}"
        lines.append("")
    if not n.graphs:
        lines[-2 if lines[-1] == "" else -1] += " {}"
    lines += ["", "programs:"]
    for p in n.programs:
        lines += _program_lines(p)
    if not n.programs:
        lines[-1] += " []"
    if n.fused_ops is not None:
        lines += ["", "fused_ops:" + ("" if n.fused_ops else " {}")]
        for fid, f in n.fused_ops.items():
            lines.append(f"  {scalar(fused_id_data(fid))}:")
            lines += [f"    {spec.key}: {flow(getattr(f, spec.name))}" for spec in record_schema(FusedOp).fields
                      if spec.nested is None and getattr(f, spec.name) is not None]
            lines.append("    schedules:" + ("" if f.schedules else " []"))
            for sched in f.schedules:
                lines.append("      -" + ("" if sched else " []"))
                for s in sched:
                    lines.append(f"        - {scalar(s.name)}: {flow(record_data(s))}")
    if n.extra_sections:
        lines.append("")
        lines.append(yaml.safe_dump(n.extra_sections, sort_keys=False, default_flow_style=False).rstrip("\n"))
    return "\n".join(lines) + "\n"


def write_netlist(netlist: Netlist, path: str | os.PathLike, header: str = "") -> Path:
    """Write `netlist` to `path` atomically: a temporary file in the same directory, then a rename."""
    text = netlist_text(netlist, header)
    return write_atomically(path, lambda f: f.write(text), binary=False)


def netlist_text(netlist: Netlist, header: str = "") -> str:
    """The file text `write_netlist` writes: the header comment lines, a blank line, the YAML."""
    return (header.rstrip("\n") + "\n\n" if header else "") + dump_netlist(netlist)
