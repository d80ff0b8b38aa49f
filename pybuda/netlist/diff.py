"""Field-by-field differences between two netlists: queues, ops, graphs, fused ops, programs, devices."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .model import Netlist
from .writer import fused_op_data, instruction_data, op_data, queue_data


@dataclass(frozen=True)
class NetlistChange:
    """`kind` is added / removed / changed; `what` is queue, op, graph, fused_op, program or devices."""

    kind: str
    what: str
    name: str
    field: str | None = None
    before: Any = None
    after: Any = None

    def __str__(self) -> str:
        if self.kind == "changed":
            return f"~ {self.what} {self.name}: {self.field}: {_show(self.before)} -> {_show(self.after)}"
        sign = "+" if self.kind == "added" else "-"
        return f"{sign} {self.what} {self.name}"


def _show(v: Any) -> str:
    if v is None:
        return "(unset)"
    if isinstance(v, int) and not isinstance(v, bool) and v >= 0x10000:
        return hex(v)
    return str(v)


def _plain(v: Any) -> Any:
    """Data with enums as their netlist spellings and tuples as lists, for comparison and display."""
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return getattr(v, "value", v) if hasattr(v, "value") and not isinstance(v, (int, str)) else v


def _compare(what: str, a: dict, b: dict, out: list) -> None:
    for name in a:
        if name not in b:
            out.append(NetlistChange("removed", what, name))
    for name, new in b.items():
        old = a.get(name)
        if old is None:
            out.append(NetlistChange("added", what, name))
            continue
        for key in list(old) + [k for k in new if k not in old]:
            x, y = old.get(key), new.get(key)
            if x != y:
                out.append(NetlistChange("changed", what, name, key, x, y))


def diff(a: Netlist, b: Netlist) -> list:
    """Every difference from `a` to `b` as NetlistChange records (empty list: same netlist)."""
    out: list = []
    if a.devices.arch != b.devices.arch:
        out.append(NetlistChange("changed", "devices", "devices", "arch", a.devices.arch, b.devices.arch))
    _compare("queue", {k: _plain(queue_data(q)) for k, q in a.queues.items()},
             {k: _plain(queue_data(q)) for k, q in b.queues.items()}, out)
    graph_fields = lambda g: {"target_device": g.target_device, "input_count": g.input_count}  # noqa: E731
    _compare("graph", {k: graph_fields(g) for k, g in a.graphs.items()},
             {k: graph_fields(g) for k, g in b.graphs.items()}, out)
    ops_a = {name: dict(_plain(op_data(op)), graph=op.graph) for name, op in a.ops.items()}
    ops_b = {name: dict(_plain(op_data(op)), graph=op.graph) for name, op in b.ops.items()}
    _compare("op", ops_a, ops_b, out)
    _compare("fused_op", {k: _plain(fused_op_data(f)) for k, f in (a.fused_ops or {}).items()},
             {k: _plain(fused_op_data(f)) for k, f in (b.fused_ops or {}).items()}, out)
    progs_a = {p.name: p for p in a.programs}
    progs_b = {p.name: p for p in b.programs}
    for name in progs_a:
        if name not in progs_b:
            out.append(NetlistChange("removed", "program", name))
    for name, p in progs_b.items():
        q = progs_a.get(name)
        if q is None:
            out.append(NetlistChange("added", "program", name))
            continue
        old = [_plain(instruction_data(i)) for i in q.instructions]
        new = [_plain(instruction_data(i)) for i in p.instructions]
        for i in range(max(len(old), len(new))):
            x = old[i] if i < len(old) else None
            y = new[i] if i < len(new) else None
            if x != y:
                out.append(NetlistChange("changed", "program", name, f"instruction {i}", x, y))
    return out
