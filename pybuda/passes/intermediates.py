"""Ops whose outputs the host also reads (`op_intermediates_to_save`): each named op of the Buda graph gets a graph
output `intermediate_<op>` (role "intermediate"): the netlist writes it to an output queue, the balancer and the
estimate pay for that queue like any output's, and the runtime returns it beside the model's outputs
(`CompiledModel.intermediates`). The fuse stage keeps a named op out of fusion, so it is still an op here."""
from __future__ import annotations

from ..ir import INTERMEDIATE_OUTPUT, Graph

PREFIX = "intermediate_"


def intermediate_output(op: str) -> str:
    """The graph output (and netlist queue) that saves op `op`'s output."""
    return PREFIX + op


def saved_op(output: str) -> str:
    """The op an intermediate output saves (a fan-out NOP may read it for the op since)."""
    return output.removeprefix(PREFIX)


def save_intermediates(graph: Graph, names: list[str]) -> Graph:
    """The graph with an intermediate output for each op of `names` it holds (names of other device segments are
    left to theirs)."""
    for op in names:
        if op in graph and graph.node(op).kind == "op" and intermediate_output(op) not in graph:
            out = graph.add_output(intermediate_output(op), op)
            graph.node(out).role = INTERMEDIATE_OUTPUT
            graph.node(out).logical_shape = graph.node(op).logical_shape
    return graph
