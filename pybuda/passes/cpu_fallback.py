"""CPU fallback: partition the framework graph into an ordered list of host and device segments.

The ops whose type (or framework op type, for decomposed ops) is in `cpu_fallback_ops` or in the registry's group
"host_only" (ops without an exact device form: quantize, requantize) run on the host, and
take along the side of them that does none of the device's work (the legacy pre/post fallback devices); so do,
whatever that option says, the ops with no device lowering (by type, or a value of more than (z, r, c) dims) that
are computed from model inputs and constants only (an attention mask's casts and comparisons: `ahead_of_device`),
with what is computed from them alone, and the ops with no device lowering that no device work follows (an argmax
of the logits, YOLOv5's 5-D detect head after its convolutions: `behind_device`):
    at the start    no ancestor is device work      -> they go with it to the host before the device (host-pre)
    at the end      else, no descendant is          -> they go with it to the host after the device (host-post)
    in the middle   else it runs alone on the host, splitting the device graph (host-mid)
("device work": matmuls and the nn ops, i.e. convolutions, norms, softmax, pools, by the registry's op kind; the
rest, index arithmetic, casts, comparisons, gathers from buffers and elementwise ops, is cheap on the host.) Each
op then gets the earliest segment of its side that comes no earlier than its operands' segments: host-pre,
device, host-mid, device, ..., host-post (empty segments are dropped). A segment is a Graph whose inputs and outputs
are named values: model inputs, model outputs, or `<op>.out` for an op's value crossing to a later segment;
segments run in order.

A training graph (one with the autograd stage's backward and optimizer ops) keeps its device ops in one segment.
A trained parameter that host ops read (an embedding table) is trained on the host: the backward of a fallback op
is itself a fallback op (an embedding's `embedding_backward`), and the parameter's optimizer ops go to the host
too, into a last host segment. Host segments are split by epoch type (forward ops run per sample before the loss,
backward ops per sample after it, optimizer ops once per step), and a backward value the host reads leaves the
device through an output with role "gradient".
"""
from __future__ import annotations

import dataclasses

import networkx as nx

from ..ir import EPOCH_TYPES, GRADIENT_OUTPUT, Graph, accumulator_of, epoch_types, updated_with
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
    epoch_type: str | None = None   # a host segment of a training graph: the epoch type of all its ops


    @property
    def on_device(self) -> bool:
        return self.kind == DEVICE

    def with_graph(self, graph: Graph) -> "Segment":
        return dataclasses.replace(self, graph=graph)


def fallback_types(config) -> set[str]:
    """The op types that run on the host at any position: those of `cpu_fallback_ops` and the registry's group
    "host_only" (the quantization ops that round); none without `enable_tvm_cpu_fallback`."""
    if config is not None and not config.enable_tvm_cpu_fallback:
        return set()
    listed = set() if config is None else {_ALIASES.get(t, t) for t in config.cpu_fallback_ops}
    return listed | registry.in_group("host_only")


def partition(graph: Graph, config) -> tuple[Segment, ...]:
    """The segments of a framework graph, in run order (one device segment when nothing falls back)."""
    types = fallback_types(config)
    fallback = [n.name for n in graph.nodes("op") if n.op_type in types or n.framework_op_type in types]
    host = _host_ops(graph, fallback)
    if config is not None and config.enable_tm_cpu_fallback:
        host |= tm_fallback(graph, config.tm_cpu_fallback_max_depth)
    if config is None or config.enable_tvm_cpu_fallback:
        host |= ahead_of_device(graph, host)
        host |= behind_device(graph, host)
    if not host:
        return (Segment(DEVICE, graph),)
    types = epoch_types(graph) if graph.loopbacks_present() else None
    if types is not None:
        host |= _host_updates(graph, host, types)
    index = _segment_index(graph, host, types)
    used = sorted(set(index.values()))
    if types is not None and sum(k % 2 for k, _ in used) > 1:
        raise OpError(f"model {graph.name!r}: training keeps the device ops in one part, but host ops sit between "
                      f"device ops ({', '.join(_between(graph, index)[:4])}); CPU fallback in the middle of a model "
                      "is for inference only: take their types out of cpu_fallback_ops or freeze the parameters "
                      "before them (requires_grad=False)")
    names = _crossing_names(graph, index)
    return tuple(Segment(HOST if k % 2 == 0 else DEVICE, _segment_graph(graph, index, (k, rank), names, types),
                         EPOCH_TYPES[rank] if types is not None and k % 2 == 0 else None) for k, rank in used)


def _between(graph: Graph, index: dict[str, tuple[int, int]]) -> list[str]:
    """The host ops after the first device segment and before the last one."""
    device = [k for k, _ in index.values() if k % 2]
    return [n for n, (k, _) in index.items() if k % 2 == 0 and min(device) < k < max(device)
            and graph.node(n).kind == "op"]


def _host_updates(graph: Graph, host: set[str], types: dict[str, str]) -> set[str]:
    """The optimizer ops of every trained parameter a host op reads: it is trained on the host, where its gradient
    is summed. OpError if a device op reads it too, or its gradient is not computed on the host."""
    ops: set[str] = set()
    writers = {out.loopback: graph.output_source(out.name) for out in graph.outputs() if out.loopback is not None}
    for param in (n.name for n in graph.nodes("parameter") if n.role == "trained"):
        readers = [u for u, _ in graph.users(param) if graph.node(u).kind == "op" and types[u] != "optimizer"]
        on_host = [u for u in readers if u in host]
        if not on_host:
            continue
        on_device = [u for u in readers if u not in host]
        gradient = writers.get(accumulator_of(param))
        if on_device or gradient not in host:
            where = (f"and on the device by {', '.join(on_device[:3])}" if on_device
                     else f"and its gradient is computed on the device by {gradient}")
            raise OpError(f"trained parameter {param!r} is read on the host by {', '.join(on_host[:3])} {where}: a "
                          "parameter trains on one side; freeze it (requires_grad=False) or take the host ops' "
                          "types out of cpu_fallback_ops")
        targets = updated_with(graph, param)
        for out in graph.outputs():
            if out.loopback in targets:
                ops |= {a for a in nx.ancestors(graph._g, out.name)
                        if graph.node(a).kind == "op" and types[a] == "optimizer"}
    return ops


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


def _after_device_work(graph: Graph, order: list[str], neighbours) -> set[str]:
    """The ops that have device work among their ancestors (`order` topological, `neighbours` the operands) or
    descendants (`order` reversed, `neighbours` the users): one pass over the graph."""
    after: set[str] = set()
    for name in order:
        if any(n in after or _device_work(graph, n) for n in neighbours(name) if graph.node(n).kind == "op"):
            after.add(name)
    return after


def _unlowerable(graph: Graph, name: str) -> bool:
    """No device lowering for the op's type, or a value no device tensor holds: a non-unit dim before the last
    three (YOLOv5's detect head: (1, 3, 40, 40, 85) per anchor, cell and channel)."""
    node = graph.node(name)
    return registry.get(node.op_type).lower is None or any(d != 1 for d in node.shape[:-3])


def ahead_of_device(graph: Graph, host: set[str]) -> set[str]:
    """Ops with no device lowering computed from model inputs and constants alone (an attention mask's casts,
    comparisons and logical ops, position ids), with every op computed from those alone that is not device work,
    and the ops before them that only they read (a position computed from an input, then cast): they run on the
    host ahead of the device, in the first host part, whatever `cpu_fallback_ops` says."""
    order = [n for n in graph.topo_order() if graph.node(n).kind == "op"]
    below = _after_device_work(graph, order, lambda n: [o.src for o in graph.operands(n)])
    ahead: set[str] = set()
    for name in order:
        if name in host or _device_work(graph, name):
            continue
        ops_read = [o.src for o in graph.operands(name) if graph.node(o.src).kind == "op"]
        if (ops_read and all(src in ahead for src in ops_read)) or (_unlowerable(graph, name) and name not in below):
            ahead.add(name)
    for name in reversed(order):
        if name in ahead or name in host or name in below or _device_work(graph, name):
            continue
        users = [u for u, _ in graph.users(name) if graph.node(u).kind == "op"]
        ops_read = [o.src for o in graph.operands(name) if graph.node(o.src).kind == "op"]
        if users and all(u in ahead for u in users) and all(src in ahead for src in ops_read):
            ahead.add(name)
    return ahead


def behind_device(graph: Graph, host: set[str]) -> set[str]:
    """Ops with no device lowering that no device work follows (an argmax over a classifier's logits), with what
    follows them: they run on the host after the device, whatever `cpu_fallback_ops` says."""
    order = [n for n in graph.topo_order() if graph.node(n).kind == "op"]
    above = _after_device_work(graph, order[::-1], lambda n: [u for u, _ in graph.users(n)])
    behind: set[str] = set()
    for name in order:
        ops_read = [o.src for o in graph.operands(name) if graph.node(o.src).kind == "op"]
        if name not in above and ((name not in host and _unlowerable(graph, name)) or
                                  any(src in behind for src in ops_read)):
            behind.add(name)
    return behind


def tm_fallback(graph: Graph, max_depth: int) -> set[str]:
    """`enable_tm_cpu_fallback`: the TM ops (registry kind "tm") at the ends of the model, at most `max_depth` TMs
    deep: leading ones that read only model inputs, parameters, constants and such TMs (at least one input among
    them), trailing ones whose users are only model outputs and such TMs."""
    order = [n for n in graph.topo_order() if graph.node(n).kind == "op"]
    lead = _tm_depths(graph, order, lambda n: [o.src for o in graph.operands(n)], "input", max_depth)
    trail = _tm_depths(graph, order[::-1], lambda n: [u for u, _ in graph.users(n)], "output", max_depth)
    return set(lead) | set(trail)


def _tm_depths(graph: Graph, order: list[str], neighbours, end: str, max_depth: int) -> dict[str, int]:
    """TM ops (in `order`) whose `neighbours` that are ops are ops of this result (an output among them must not be
    a loopback), with an `end` node or such an op among them, each with its TM depth from that end (at most
    `max_depth`)."""
    depth: dict[str, int] = {}
    for name in order:
        if registry.get(graph.node(name).op_type).kind != "tm":
            continue
        near = [graph.node(n) for n in neighbours(name)]
        if any(n.kind == "op" and n.name not in depth for n in near) or any(
                n.kind == "output" and n.loopback is not None for n in near):
            continue
        if not any(n.kind == end or n.kind == "op" for n in near):
            continue
        d = 1 + max((depth[n.name] for n in near if n.kind == "op"), default=0)
        if d <= max_depth:
            depth[name] = d
    return depth


def _device_work(graph: Graph, op: str) -> bool:
    return registry.get(graph.node(op).op_type).kind in DEVICE_WORK_KINDS


def _segment_index(graph: Graph, host: set[str], types: dict[str, str] | None = None) -> dict[str, tuple[int, int]]:
    """Segment key (index, epoch type rank) of every op and output. Index: even = host, odd = device; the
    earliest of the op's side no earlier than its operands' segments. A training graph's host optimizer ops go
    to the last host index, and its host ops are keyed by their epoch type's rank (`EPOCH_TYPES`); other keys
    have rank 0. An output goes with its value (a model input: the last segment)."""
    index: dict[str, int] = {}
    for name in graph.topo_order():
        node = graph.node(name)
        if node.kind != "op":
            continue
        start = max((index[o.src] for o in graph.operands(name) if o.src in index), default=0)
        side = 0 if name in host else 1
        index[name] = start if start % 2 == side else start + 1
    rank = dict.fromkeys(index, 0)
    if types is not None:
        last_host = max(index.values()) + max(index.values()) % 2
        for name in host:
            rank[name] = EPOCH_TYPES.index(types[name])
            if types[name] == "optimizer":
                index[name] = last_host
    keys = {name: (k, rank[name]) for name, k in index.items()}
    last = max(keys.values())
    for out in graph.output_names:
        keys[out] = keys.get(graph.output_source(out), last)
    return keys


def _crossing_names(graph: Graph, index: dict[str, tuple[int, int]]) -> dict[str, str]:
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


def _segment_graph(graph: Graph, index: dict[str, tuple[int, int]], k: tuple[int, int], names: dict[str, str],
                   types: dict[str, str] | None = None) -> Graph:
    """Segment `k`: its ops and outputs, an input per value it reads from elsewhere, an output per value of
    its own that a later segment reads (role "gradient" for a backward value of a training graph)."""
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
            if types is not None and types[name] == "backward":
                sub.node(value).role = GRADIENT_OUTPUT
    for name in list(sub.input_names):
        if not sub.users(name):
            sub.remove_node(name)
    sub.remove_dead()
    if not sub.output_names:
        raise OpError(f"segment {k} of {graph.name!r} computes nothing the model uses (compiler bug)")
    return sub
