"""CPU fallback: partition the framework graph into an ordered list of host and device segments.

The ops whose type (or framework op type, for decomposed ops) is in `cpu_fallback_ops` run on the host, and
take along the side of them that does none of the device's work (the legacy pre/post fallback devices):
    at the start    no ancestor is device work      -> they go with it to the host before the device (host-pre)
    at the end      else, no descendant is          -> they go with it to the host after the device (host-post)
    in the middle   else it runs alone on the host, splitting the device graph (host-mid)
("device work": matmuls and the nn ops, i.e. convolutions, norms, softmax, pools, by the registry's op kind; the
rest, index arithmetic, casts, comparisons, gathers from buffers and elementwise ops, is cheap on the host.) Each
op then gets the earliest segment of its side that comes no earlier than its operands' segments: host-pre,
device, host-mid, device, ..., host-post (empty segments are dropped). A segment is a Graph whose inputs and outputs are named values: model inputs, model
outputs, or `<op>.out` for an op's value crossing to a later segment; segments run in order.
"""
from __future__ import annotations

import dataclasses

import networkx as nx

from ..ir import Graph
from ..ops import registry
from ..ops.registry import OpError

HOST, DEVICE = "host", "device"
DEVICE_WORK_KINDS = ("matmul", "nn")   # registry op kinds that keep their side of a fallback op on the device

# Relax / legacy TVM names users put in cpu_fallback_ops, mapped to registry op types.
_ALIASES = {"take": "embedding", "adv_index": "embedding", "nn.embedding": "embedding"}


@dataclasses.dataclass(frozen=True)
class Segment:
    """One part of the model: `kind` host or device; `graph` reads named values and writes named values."""

    kind: str
    graph: Graph

    @property
    def on_device(self) -> bool:
        return self.kind == DEVICE

    def with_graph(self, graph: Graph) -> "Segment":
        return dataclasses.replace(self, graph=graph)


def fallback_types(config) -> set[str]:
    if config is None or not config.enable_tvm_cpu_fallback:
        return set()
    return {_ALIASES.get(t, t) for t in config.cpu_fallback_ops}


def partition(graph: Graph, config) -> tuple[Segment, ...]:
    """The segments of a framework graph, in run order (one device segment when nothing falls back)."""
    types = fallback_types(config)
    fallback = [n.name for n in graph.nodes("op") if n.op_type in types or n.framework_op_type in types]
    if not fallback:
        return (Segment(DEVICE, graph),)
    host = _host_ops(graph, fallback)
    index = _segment_index(graph, host)
    used = sorted(set(index.values()))
    names = _crossing_names(graph, index)
    return tuple(Segment(HOST if k % 2 == 0 else DEVICE, _segment_graph(graph, index, k, names)) for k in used)


def _host_ops(graph: Graph, fallback: list[str]) -> set[str]:
    """The fallback ops and the side without device work each takes along (module docstring)."""
    g = graph._g
    host = set(fallback)
    for name in fallback:
        ancestors = {a for a in nx.ancestors(g, name) if graph.node(a).kind == "op"}
        descendants = {d for d in nx.descendants(g, name) if graph.node(d).kind == "op"}
        if not any(_device_work(graph, a) for a in ancestors):
            host |= ancestors
        elif not any(_device_work(graph, d) for d in descendants):
            host |= descendants
    return host


def _device_work(graph: Graph, op: str) -> bool:
    return registry.get(graph.node(op).op_type).kind in DEVICE_WORK_KINDS


def _segment_index(graph: Graph, host: set[str]) -> dict[str, int]:
    """Segment index of every op and output: even = host, odd = device; the earliest of the op's side no
    earlier than its operands' segments. An output goes with its value (a model input: the last segment)."""
    index: dict[str, int] = {}
    for name in graph.topo_order():
        node = graph.node(name)
        if node.kind != "op":
            continue
        start = max((index[o.src] for o in graph.operands(name) if o.src in index), default=0)
        side = 0 if name in host else 1
        index[name] = start if start % 2 == side else start + 1
    last = max(index.values())
    for out in graph.output_names:
        index[out] = index.get(graph.output_source(out), last)
    return index


def _crossing_names(graph: Graph, index: dict[str, int]) -> dict[str, str]:
    """The value name of every op read by a later segment: `<op>.out` (made unique)."""
    taken = {n.name for n in graph.nodes()}
    names = {}
    for name in graph.topo_order():
        if name in index and graph.node(name).kind == "op" and any(
                index[user] != index[name] for user, _ in graph.users(name) if graph.node(user).kind == "op"):
            base, i = f"{name}.out", 1
            names[name] = base
            while names[name] in taken:
                names[name], i = f"{base}_{i}", i + 1
            taken.add(names[name])
    return names


def _segment_graph(graph: Graph, index: dict[str, int], k: int, names: dict[str, str]) -> Graph:
    """Segment `k`: its ops and outputs, an input per value it reads from elsewhere, an output per value of
    its own that a later segment reads."""
    sub = graph.copy()
    for name, value in names.items():
        if index[name] != k and any(index.get(u) == k for u, _ in graph.users(name)):
            sub.replace(name, sub.add_input(value, graph.node(name).shape))
    for name in list(sub.output_names):
        if index[name] != k:
            sub.remove_node(name)
    for name in [n.name for n in sub.nodes("op")]:
        if index[name] != k:
            sub.remove_node(name)
    for name, value in names.items():
        if index[name] == k:
            sub.add_output(value, name)
    for name in list(sub.input_names):
        if not sub.users(name):
            sub.remove_node(name)
    sub.remove_dead()
    if not sub.output_names:
        raise OpError(f"segment {k} of {graph.name!r} computes nothing the model uses (compiler bug)")
    return sub
