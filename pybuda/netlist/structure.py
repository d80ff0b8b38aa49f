"""Structural checks of a netlist dict (a subset of the backend's rules, netlist-format.md §3.2, §3.3, §3.5,
§3.7): producer/consumer shapes in tiles after TMs, grids inside the device, no shared cores within an
epoch, ublocks within the dest register, DRAM buffers disjoint. Returns messages naming op/queue and rule."""
from __future__ import annotations

from ..device import DeviceSpec
from ..ir.tms import tm_shape

_DEST_32BIT = {"Float32", "Int32"}


def _parse_tm(tm) -> tuple:
    if tm == "transpose":
        return ("transpose",)
    (kind, arg), = tm.items()
    if kind == "broadcast":
        (axis, n), = arg.items()
        return ("broadcast", axis, int(n))
    return (kind, int(arg))


def _dims(entry: dict) -> tuple:
    gr, gc = entry["grid_size"]
    return (entry["t"], gr * entry["mblock"][0] * entry["ublock"][0], gc * entry["mblock"][1] * entry["ublock"][1])


def _expected_input(op: dict, port: int) -> tuple | None:
    t, rt, ct = _dims(op)
    attrs = op.get("attributes", {})
    k = attrs.get("m_k", 1) * attrs.get("u_kt", 1)
    if op["type"] == "matmul":
        return {0: (t, rt, k), 1: (t, k, ct)}.get(port, (t, rt, ct))
    if op["type"] == "reduce":
        return (t, rt, k) if attrs.get("dim") == "c" else (t, k, ct)
    return (t, rt, ct)


def check_structure(netlist: dict, device: DeviceSpec) -> list[str]:
    """Every violation found, as 'graph/op: rule: expected ... got ...' strings (empty list = sound)."""
    errors = []
    queues = netlist["queues"]
    for gname, graph in netlist["graphs"].items():
        ops = {k: v for k, v in graph.items() if isinstance(v, dict)}
        used: dict[tuple, str] = {}
        for name, op in ops.items():
            where = f"{gname}/{name}"
            gr, gc = op["grid_size"]
            h, w = (gc, gr) if op.get("grid_transpose") else (gr, gc)
            r0, c0 = op["grid_loc"]
            if r0 + h > device.grid_rows or c0 + w > device.grid_cols:
                errors.append(f"{where}: grid bounds: {h}x{w} at {op['grid_loc']} exceeds {device.grid_rows}x"
                              f"{device.grid_cols}")
            for r in range(r0, r0 + h):
                for c in range(c0, c0 + w):
                    if (r, c) in used:
                        errors.append(f"{where}: overlapping cores: core {(r, c)} also used by {used[(r, c)]}")
                    used[(r, c)] = name
            limit = 4 if op.get("acc_df") in _DEST_32BIT else 8
            if op["ublock"][0] * op["ublock"][1] > limit:
                errors.append(f"{where}: dest limit: ublock {op['ublock']} exceeds {limit} tiles")
            for port, src in enumerate(op["inputs"]):
                producer = ops.get(src) or queues.get(src)
                if producer is None:
                    errors.append(f"{where}: input {port} {src!r} is neither an op of {gname} nor a queue")
                    continue
                shape = _dims(producer)
                try:
                    for tm in op.get(f"input_{port}_tms", []):
                        shape = tm_shape(shape, _parse_tm(tm))
                except ValueError as e:
                    errors.append(f"{where}: input {port} TMs: {e}")
                    continue
                want = _expected_input(op, port)
                if shape != want:
                    errors.append(f"{where}: input {port} ({src}) shape: expected (t, rt, ct) {want}, got {shape}")
    for qname, q in queues.items():
        producer = q["input"]
        for graph in netlist["graphs"].values():
            if producer in graph and _dims(graph[producer]) != _dims(q):
                errors.append(f"queue {qname}: shape: producer {producer} gives {_dims(graph[producer])}, "
                              f"queue holds {_dims(q)}")
    errors += _check_buffers(queues, device)
    return errors


def _tile_bytes(df: str) -> int:
    from ..dataformat import DataFormat
    return DataFormat.parse(df).tile_bytes


def _check_buffers(queues: dict, device: DeviceSpec) -> list[str]:
    spans: dict[tuple, list] = {}
    errors = []
    for name, q in queues.items():
        tiles = q["t"] * q["mblock"][0] * q["mblock"][1] * q["ublock"][0] * q["ublock"][1]
        size = q["entries"] * tiles * _tile_bytes(q["df"]) + 32
        loc = q["loc"]
        for chan, addr in q[loc]:
            if loc == "dram" and chan >= device.dram_channels:
                errors.append(f"queue {name}: DRAM channel {chan} does not exist on {device.name}")
            spans.setdefault((loc, chan), []).append((addr, addr + size, name))
    for (loc, chan), items in spans.items():
        items.sort()
        for (a0, a1, n0), (b0, b1, n1) in zip(items, items[1:]):
            if b0 < a1:
                errors.append(f"queue {n1}: {loc} buffer overlap on channel {chan}: [{b0:#x}, {b1:#x}) overlaps "
                              f"{n0} [{a0:#x}, {a1:#x})")
    return errors
