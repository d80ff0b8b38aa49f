"""The op schedule every balancing policy splits into epochs: a deterministic topological order of the Buda
graph's ops (ties broken by the order ops were added) that also keeps each `add_schedule_constraint` partial
ordering (op i before op i + 1)."""
from __future__ import annotations

import networkx as nx

from ..ir import Graph
from .op_model import BalancerError


def op_schedule(graph: Graph, orderings: list[list[str]]) -> list[str]:
    """The graph's ops in schedule order (module docstring); BalancerError for an ordering that names no op of
    the graph or that the graph's dependencies contradict."""
    ops = [n.name for n in graph.nodes("op")]
    order = nx.DiGraph()
    order.add_nodes_from(ops)
    order.add_edges_from((o.src, name) for name in ops for o in graph.operands(name) if o.src in order)
    for ordering in orderings:
        missing = [n for n in ordering if n not in order]
        if missing:
            raise BalancerError(f"add_schedule_constraint({ordering!r}): {', '.join(map(repr, missing))} is not an op "
                                f"of the device graph (an op fused away, or on the CPU); schedule its fused op, or "
                                f"an op the graph has")
        order.add_edges_from(zip(ordering, ordering[1:]))
    try:
        return list(nx.lexicographical_topological_sort(order, key=lambda n: graph.node(n).order))
    except nx.NetworkXUnfeasible:
        cycle = " -> ".join(a for a, _ in nx.find_cycle(order))
        raise BalancerError(f"add_schedule_constraint: the orderings {orderings!r} contradict the graph's "
                            f"dependencies (cycle {cycle}); an op can only be scheduled after the ops it reads") from None
