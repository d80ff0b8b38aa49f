"""The op schedule every balancing policy splits into epochs: an order of the Buda graph's ops that keeps their
dependencies and each `add_schedule_constraint` partial ordering (op i before op i + 1), chosen by the config's
`scheduler_policy` (ties always broken by the order ops were added, so it is deterministic):

- `Topological`: the topological order that takes the earliest-added ready op first.
- `ModuleInputsBFS` (the legacy default): a breadth-first walk from the module's inputs (in input order); an op is
  emitted once the ops it reads are (those not yet emitted are walked up to first, depth first).
- `LongestPath`: the ops of the graph's longest path in order, each preceded by its ancestors not yet emitted, so
  that an output waits as short a time as it can for its reader.

Ops no walk reaches follow in topological order. A training graph's forward ops come first, then the backward
ops, then the optimizer's (each epoch holds ops of one type: `epoch_type_breaks`)."""
from __future__ import annotations

from collections import deque
from typing import Callable, Iterable

import networkx as nx

from ..ir import EPOCH_TYPES, Graph, epoch_types
from .op_model import BalancerError


def op_schedule(graph: Graph, orderings: list[list[str]], policy: str = "Topological") -> list[str]:
    """The graph's ops in the order of scheduler `policy` (module docstring), keeping the orderings whose ops are
    all in the graph; BalancerError for orderings that the graph's dependencies contradict."""
    ops = [n.name for n in graph.nodes("op")]
    order = nx.DiGraph()
    order.add_nodes_from(ops)
    order.add_edges_from((o.src, name) for name in ops for o in graph.operands(name) if o.src in order)
    for ordering in orderings:
        if all(n in order for n in ordering):   # else the ordering of another device segment (`check_orderings`)
            order.add_edges_from(zip(ordering, ordering[1:]))
    types = epoch_types(graph)
    rank = {t: k for k, t in enumerate(EPOCH_TYPES)}

    def added(n: str) -> int:
        return graph.node(n).order

    try:
        topological = list(nx.lexicographical_topological_sort(order, key=lambda n: (rank[types[n]], added(n))))
    except nx.NetworkXUnfeasible:
        cycle = " -> ".join(a for a, _ in nx.find_cycle(order))
        raise BalancerError(f"add_schedule_constraint: the orderings {orderings!r} contradict the graph's "
                            f"dependencies (cycle {cycle}); an op can only be scheduled after the ops it "
                            "reads") from None
    if policy == "Topological":
        return topological
    walk = _module_inputs_bfs(graph, order, added) if policy == "ModuleInputsBFS" else \
        _longest_path(order, topological, added)
    emitted = set(walk)
    schedule = walk + [n for n in topological if n not in emitted]
    return sorted(schedule, key=lambda n: rank[types[n]])     # stable: each type keeps its walk's order


def _emit_with_ancestors(order: nx.DiGraph, start: str, emitted: dict, key: Callable[[str], int]) -> list[str]:
    """`start` preceded by its ancestors not in `emitted` (depth first, earliest-added operand first), each after
    the ops it reads; records them in `emitted`."""
    out: list[str] = []
    stack = [(start, False)]
    while stack:
        node, expanded = stack.pop()
        if node in emitted:
            continue
        if expanded:
            emitted[node] = None
            out.append(node)
            continue
        stack.append((node, True))
        stack.extend((p, False) for p in sorted(order.predecessors(node), key=key, reverse=True) if p not in emitted)
    return out


def _module_inputs_bfs(graph: Graph, order: nx.DiGraph, key: Callable[[str], int]) -> list[str]:
    """`ModuleInputsBFS`: breadth first from the readers of the module's inputs, in input order."""
    emitted: dict[str, None] = {}
    out: list[str] = []
    queue: deque[str] = deque(_readers(graph, (n.name for n in graph.nodes("input")), order, key))
    while queue:
        node = queue.popleft()
        if node in emitted:
            continue
        walked = _emit_with_ancestors(order, node, emitted, key)
        out += walked
        for op in walked:
            queue.extend(sorted(order.successors(op), key=key))
    return out


def _readers(graph: Graph, sources: Iterable[str], order: nx.DiGraph, key: Callable[[str], int]) -> list[str]:
    """The ops reading each of `sources`, source by source, earliest-added first."""
    return [u for s in sources for u in sorted({u for u, _ in graph.users(s) if u in order}, key=key)]


def _longest_path(order: nx.DiGraph, topological: list[str], key: Callable[[str], int]) -> list[str]:
    """`LongestPath`: the longest path's ops in order, each preceded by its ancestors not yet emitted."""
    emitted: dict[str, None] = {}
    path = nx.dag_longest_path(order, topo_order=topological)
    return [n for op in path for n in _emit_with_ancestors(order, op, emitted, key)]


def subgraphs(graph: Graph, schedule: list[str]) -> dict[str, int]:
    """`compile_subgraphs`: each op's disjoint subgraph (ops joined by the values they pass and the inputs they
    share; parameters and constants, which every program may read, join none), numbered in schedule order."""
    joined = nx.Graph()
    joined.add_nodes_from(schedule)
    joined.add_edges_from((o.src, name) for name in schedule for o in graph.operands(name)
                          if graph.node(o.src).kind in ("op", "input"))
    first = {op: k for k, op in enumerate(schedule)}
    parts = sorted((c for c in nx.connected_components(joined)), key=lambda c: min(first.get(n, len(first)) for n in c))
    return {op: k for k, part in enumerate(parts) for op in part if op in first}


def epoch_type_breaks(graph: Graph, schedule: list[str]) -> set[str]:
    """The first op of each epoch type after the first: where a training schedule must start a new epoch."""
    types = epoch_types(graph)
    return {b for a, b in zip(schedule, schedule[1:]) if types[a] != types[b]}


def check_orderings(orderings: list[list[str]], graphs: list[Graph]) -> None:
    """BalancerError for an `add_schedule_constraint` ordering whose ops are not all ops of one device graph
    (an op fused into a fused op, on the CPU, or in another device segment)."""
    for ordering in orderings:
        if not any(all(n in g and g.node(n).kind == "op" for n in ordering) for g in graphs):
            missing = [n for n in ordering if not any(n in g and g.node(n).kind == "op" for g in graphs)]
            where = (f"{', '.join(map(repr, missing))} is not an op of a device graph (fused into a fused op, or on "
                     f"the CPU); schedule its fused op `_fused_op_<k>`, or dont_fuse it") if missing else \
                "its ops are in different device segments, which run one after the other anyway"
            raise BalancerError(f"add_schedule_constraint({ordering!r}): {where}")
