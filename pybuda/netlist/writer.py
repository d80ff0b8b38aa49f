"""Netlist YAML text in the legacy layout: sections in backend order, one compact flow map per queue and
op, keys in the legacy field order (the builder inserts them in that order), comments grouping queues."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


def _scalar(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, HexInt):
        return f"0x{int(v):x}"
    if isinstance(v, float):
        return repr(v)
    return str(v)


class HexInt(int):
    """An int written in hex (DRAM/host addresses)."""


def flow(v) -> str:
    """A value as YAML flow style."""
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k}: {flow(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(flow(x) for x in v) + "]"
    return _scalar(v)


def dump_netlist(netlist: dict) -> str:
    """Serialize a netlist dict (devices, queues, graphs, programs[, fused_ops]) to YAML text.

    An optional `_queue_groups` entry maps queue names to the comment heading their group."""
    lines = ["devices:", f"  arch: {netlist['devices']['arch']}", "", "queues:"]
    groups = netlist.get("_queue_groups", {})
    group = None
    for name, q in netlist["queues"].items():
        g = groups.get(name)
        if g and g != group:
            lines.append("")
            lines.append(f"  # {g}")
            group = g
        lines.append(f"  {name}: {flow(q)}")
    lines += ["", "graphs:"]
    for gname, graph in netlist["graphs"].items():
        lines.append(f"  {gname}:")
        for key, value in graph.items():
            lines.append(f"    {key}: {flow(value)}")
    lines += ["", "programs:"]
    for program in netlist["programs"]:
        (pname, instructions), = program.items()
        lines.append(f"  - {pname}:")
        depth = 0
        for ins in instructions:
            if ins == "endloop":
                depth -= 1
            pad = "  " * depth
            lines.append(f"    - {pad}{ins}" if isinstance(ins, str) else
                         f"    - {pad}{next(iter(ins))}: {flow(next(iter(ins.values())))}")
            if isinstance(ins, dict) and "loop" in ins:
                depth += 1
    if netlist.get("fused_ops"):
        lines += ["", "fused_ops:"]
        for fid, fop in netlist["fused_ops"].items():
            lines.append(f"  {fid}: {flow(fop)}")
    return "\n".join(lines) + "\n"


def write_netlist(netlist: dict, path: str | os.PathLike, header: str = "") -> Path:
    """Write atomically: a temporary file in the same directory, then rename over `path`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    text = (header + "\n" if header else "") + dump_netlist(netlist)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path
