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
from .model import (Attributes, EndLoop, EndProgram, Execute, FusedOp, FusedSubOp, Loop, Netlist, Op, Param, Queue,
                    QueueAlloc, QueueSettings, Var, VarInst)


class HexInt(int):
    """An int written in hex (DRAM/host addresses)."""


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

def tm_data(tm: tuple):
    kind = tm[0]
    if kind == "transpose":
        return "transpose"
    if kind == "broadcast":
        return {"broadcast": {tm[1]: tm[2]}}
    if kind == "pad":
        return {"pad": [tm[1], tm[2], float(tm[3])]}
    return {kind: tm[1]}


def _pair(p) -> list:
    return list(p)


def queue_data(q: Queue) -> dict:
    d: dict = {}
    for f in Queue.FIELDS:
        v = getattr(q, f)
        if v is None:
            continue
        if f in ("grid_size", "mblock", "ublock", "tile_dim"):
            v = list(v)
        elif f == "dram":
            v = [[c, HexInt(a)] for c, a in v]
        elif f == "host":
            v = [[h[0], HexInt(h[1])] if isinstance(h, (list, tuple)) else HexInt(h) for h in v]
        elif f == "input_tms":
            v = [tm_data(t) for t in v]
        elif f == "df":
            v = v.value
        elif f == "target_device" and isinstance(v, list):
            v = list(v)
        d[f] = v
    return d


def _fused_id(fid):
    """Fused-op ids are strings in the model; the legacy files write numeric ones bare (`0:`, `fused_op_id: 0`)."""
    return int(fid) if isinstance(fid, str) and fid.isdigit() and str(int(fid)) == fid else fid


def attributes_data(a: Attributes) -> dict:
    return {k: (list(v) if isinstance(v, tuple) else _fused_id(v) if k == "fused_op_id" else v) for k, v in a.items()}


def _pad_data(p) -> dict:
    return {k: getattr(p, k) for k in ("rt", "ct", "pad_value") if getattr(p, k) is not None}


def op_lines(op: Op) -> list:
    """The op's fields as three groups of (key, value): placement and inputs, blocking and formats, edges."""
    first, second, third = [], [], []
    first.append(("type", op.type))
    if op.grid_loc is not None:
        first.append(("grid_loc", list(op.grid_loc)))
    first.append(("grid_size", list(op.grid_size)))
    first.append(("inputs", list(op.inputs)))
    if op.forked_dram_inputs is not None:
        first.append(("forked_dram_inputs", [{q: o} for q, o in op.forked_dram_inputs]))
    for f in ("gradient_op", "untilize_output", "grid_transpose", "overlay_size"):
        v = getattr(op, f)
        if v is not None:
            first.append((f, v))
    second += [("t", op.t), ("mblock", list(op.mblock)), ("ublock", list(op.ublock))]
    if op.tile_dim is not None:
        second.append(("tile_dim", list(op.tile_dim)))
    second.append(("buf_size_mb", op.buf_size_mb))
    for f in ("input_buf_min_size_tiles", "input_dram_io_buf_size_tiles"):
        v = getattr(op, f)
        if v is not None:
            second.append((f, list(v)))
    second += [("ublock_order", op.ublock_order), ("in_df", [d.value for d in op.in_df]),
               ("out_df", op.out_df.value), ("intermed_df", op.intermed_df.value)]
    if op.acc_df is not None:
        second.append(("acc_df", op.acc_df.value))
    second.append(("math_fidelity", op.math_fidelity.value))
    for i in sorted(op.input_unpad):
        third.append((f"input_{i}_unpad", _pad_data(op.input_unpad[i])))
    for i in sorted(op.input_tms):
        third.append((f"input_{i}_tms", [tm_data(t) for t in op.input_tms[i]]))
    for i in sorted(op.input_pad):
        third.append((f"input_{i}_pad", _pad_data(op.input_pad[i])))
    if op.attributes is not None:
        third.append(("attributes", attributes_data(op.attributes)))
    return [first, second, third]


def op_data(op: Op) -> dict:
    return {k: v for group in op_lines(op) for k, v in group}


def sub_op_data(s: FusedSubOp) -> dict:
    d: dict = {"type": s.type, "inputs": list(s.inputs)}
    for i in sorted(s.input_tms):
        d[f"input_{i}_tms"] = [tm_data(t) for t in s.input_tms[i]]
    d["mblock"] = list(s.mblock)
    d["ublock"] = list(s.ublock)
    for f in ("pop", "pop_last", "zero_point"):
        v = getattr(s, f)
        if v is not None:
            d[f] = list(v) if isinstance(v, list) else v
    if s.attributes is not None:
        d["attributes"] = attributes_data(s.attributes)
    d["output"] = s.output
    return d


def fused_op_data(f: FusedOp) -> dict:
    d: dict = {"inputs": f.inputs, "intermediates": f.intermediates}
    if f.custom_kernel_path is not None:
        d["custom_kernel_path"] = f.custom_kernel_path
    d["schedules"] = [[{s.name: sub_op_data(s)} for s in sched] for sched in f.schedules]
    return d


def queue_settings_data(qs: QueueSettings) -> dict:
    return {f: getattr(qs, f) for f in QueueSettings.FIELDS if getattr(qs, f) is not None}


def instruction_data(ins):
    if isinstance(ins, EndLoop):
        return "endloop"
    if isinstance(ins, EndProgram):
        return "endprogram"
    if isinstance(ins, Var):
        return {ins.opcode: list(ins.vars) if ins.as_list else dict(ins.vars)}
    if isinstance(ins, Param):
        return {"param": list(ins.names)}
    if isinstance(ins, VarInst):
        return {"varinst": [ins.dst, ins.op, *ins.args]}
    if isinstance(ins, Loop):
        return {"loop": ins.count}
    if isinstance(ins, Execute):
        return {"execute": {"graph_name": ins.graph_name,
                            "queue_settings": {q: queue_settings_data(s) for q, s in ins.queue_settings.items()}}}
    if isinstance(ins, QueueAlloc):
        return {ins.opcode: list(ins.queues)}
    raise TypeError(f"not an instruction: {ins!r}")


def netlist_to_data(n: Netlist) -> dict:
    """The netlist as plain data (ints, strings, lists, dicts) in the legacy key order."""
    graphs = {}
    for gname, g in n.graphs.items():
        gd: dict = {}
        if g.target_device is not None:
            gd["target_device"] = g.target_device
        if g.input_count is not None:
            gd["input_count"] = g.input_count
        for name, op in g.ops.items():
            gd[name] = op_data(op)
        graphs[gname] = gd
    d = {"devices": {"arch": n.devices.arch},
         "queues": {name: queue_data(q) for name, q in n.queues.items()},
         "graphs": graphs,
         "programs": [{p.name: [instruction_data(i) for i in p.instructions]} for p in n.programs]}
    if n.fused_ops is not None:
        d["fused_ops"] = {_fused_id(fid): fused_op_data(f) for fid, f in n.fused_ops.items()}
    d.update(n.extra_sections)
    return d


# --- text ------------------------------------------------------------------------------------------------------

def _program_lines(p) -> list:
    lines = [f"  - {scalar(p.name)}:"]
    depth = 0
    for ins in p.instructions:
        if isinstance(ins, EndLoop):
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
                items = [f"{' ' * 15}{scalar(q)}: {flow(queue_settings_data(s))}"
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
    arch = n.devices.arch
    lines = ["devices:", f"  arch: {flow(arch)}", "", "queues:"]
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
        if g.target_device is not None:
            lines.append(f"    target_device: {flow(g.target_device)}")
        if g.input_count is not None:
            lines.append(f"    input_count: {g.input_count}")
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
            lines.append(f"  {scalar(_fused_id(fid))}:")
            lines.append(f"    inputs: {f.inputs}")
            lines.append(f"    intermediates: {f.intermediates}")
            if f.custom_kernel_path is not None:
                lines.append(f"    custom_kernel_path: {scalar(f.custom_kernel_path)}")
            lines.append("    schedules:" + ("" if f.schedules else " []"))
            for sched in f.schedules:
                lines.append("      -" + ("" if sched else " []"))
                for s in sched:
                    lines.append(f"        - {scalar(s.name)}: {flow(sub_op_data(s))}")
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
