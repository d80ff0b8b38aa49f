"""CPU fallback: ops whose type is in `cpu_fallback_ops` (and the ops that must go with them) run on the
host, before the device netlist. As in the legacy compiler, a fallback op takes its ancestors along (they
are cheap: index arithmetic on inputs); the values crossing from host to device become device inputs.

A fallback op with more ops before it than after it would run after the device with its descendants
(legacy: whichever side is smaller); that placement (host-post) is not supported yet and fails naming the op."""
from __future__ import annotations

import networkx as nx

from ..ir import Graph
from ..ops.registry import OpError

# Relax / legacy TVM names users put in cpu_fallback_ops, mapped to registry op types.
_ALIASES = {"take": "embedding", "adv_index": "embedding", "nn.embedding": "embedding"}


def fallback_types(config) -> set[str]:
    if config is None or not config.enable_tvm_cpu_fallback:
        return set()
    return {_ALIASES.get(t, t) for t in config.cpu_fallback_ops}


def split_host_ops(graph: Graph, config) -> tuple[Graph | None, Graph]:
    """(host_pre graph or None, device graph). The host graph's outputs are named after the device inputs
    they feed; the device graph keeps the model's outputs."""
    types = fallback_types(config)
    fallback = [n.name for n in graph.nodes("op") if n.op_type in types]
    if not fallback:
        return None, graph
    g = graph._g
    host: set[str] = set()
    for name in fallback:
        ancestors = {a for a in nx.ancestors(g, name) if graph.node(a).kind == "op"}
        descendants = {d for d in nx.descendants(g, name) if graph.node(d).kind == "op"}
        if len(ancestors) > len(descendants):
            raise OpError(f"op {name!r} ({graph.node(name).op_type}) is in cpu_fallback_ops, but it sits after most "
                          f"of the model ({len(ancestors)} ops before it, {len(descendants)} after): it would have to "
                          "run on the host after the device, which is not supported yet; remove "
                          f"{graph.node(name).op_type!r} from cpu_fallback_ops to keep it on the device")
        host |= ancestors | {name}
    crossing = []  # host values read by device ops or by outputs
    for name in sorted(host, key=lambda n: graph.node(n).order):
        if any(u not in host for u, _ in graph.users(name)):
            crossing.append(name)
    host_graph = _host_graph(graph, host, crossing)
    device = graph.copy()
    device_inputs = {name: device.add_input(device.unique_name(f"{name}.host"), graph.node(name).shape)
                     for name in crossing}
    for name in crossing:
        device.replace(name, device_inputs[name])
    for name in sorted(host - set(crossing), key=lambda n: graph.node(n).order):
        device.remove_node(name)
    for inp in list(device.input_names):
        if not device.users(inp):
            device.remove_node(inp)
    device.remove_dead()
    # name the host outputs after the device inputs they feed
    for name, out in zip(crossing, list(host_graph.output_names)):
        host_graph.node(out).device_input = device_inputs[name]
    return host_graph, device


def _host_graph(graph: Graph, host: set[str], crossing: list[str]) -> Graph:
    """The sub-graph of host ops, reading the model inputs, writing one output per crossing value."""
    sub = graph.copy()
    keep = set(host)
    for name in host:
        keep |= {o.src for o in graph.operands(name)}
    for node in list(sub.nodes()):
        if node.name not in keep:
            sub.remove_node(node.name)
    sub.output_names = []
    for name in crossing:
        sub.add_output(sub.unique_name(f"{name}.to_device"), name)
    return sub
