"""The op schedule every balancing policy splits into epochs: a deterministic topological order of the Buda
graph's ops (ties broken by the order ops were added) that also keeps each `add_schedule_constraint` partial
ordering (op i before op i + 1); a training graph's forward ops come first, then the backward ops, then the
optimizer's (each epoch holds ops of one type: `epoch_type_breaks`)."""
from __future__ import annotations

import networkx as nx

from ..ir import EPOCH_TYPES, Graph, epoch_types
from .op_model import BalancerError


def op_schedule(graph: Graph, orderings: list[list[str]]) -> list[str]:
    """The graph's ops in schedule order (module docstring), keeping the orderings whose ops are all in the graph;
    BalancerError for orderings that the graph's dependencies contradict."""
    ops = [n.name for n in graph.nodes("op")]
    order = nx.DiGraph()
    order.add_nodes_from(ops)
    order.add_edges_from((o.src, name) for name in ops for o in graph.operands(name) if o.src in order)
    for ordering in orderings:
        if all(n in order for n in ordering):   # else the ordering of another device segment (`check_orderings`)
            order.add_edges_from(zip(ordering, ordering[1:]))
    types = epoch_types(graph)
    rank = {t: k for k, t in enumerate(EPOCH_TYPES)}
    try:
        return list(nx.lexicographical_topological_sort(order, key=lambda n: (rank[types[n]], graph.node(n).order)))
    except nx.NetworkXUnfeasible:
        cycle = " -> ".join(a for a, _ in nx.find_cycle(order))
        raise BalancerError(f"add_schedule_constraint: the orderings {orderings!r} contradict the graph's "
                            f"dependencies (cycle {cycle}); an op can only be scheduled after the ops it "
                            "reads") from None


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
