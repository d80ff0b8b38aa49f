"""Broadcast splitting (`enable_broadcast_splitting`, the legacy compiler's `split_broadcasts`): an operand edge
of the Buda graph that carries more than one broadcast TM is cut after each broadcast but the last by a NOP
`<src>_splt_brcst_<axis>`, so every edge replays its producer along one axis only and the fan-out of a
broadcast over a large grid is spread over the NOP's cores. Edge TMs up to and including a broadcast stay on the
NOP's input, the rest move on. A NOP keeps its producer's data format and takes its consumer's math formats, as
user-inserted NOPs do (`insert_nops.py`), so the numerics do not change; the balancer costs it like any op."""
from __future__ import annotations

from ..ir import Graph, Operand


def split_broadcasts(graph: Graph) -> Graph:
    """The graph with a NOP after every broadcast but the last of each op's operand edges (module docstring)."""
    for name in graph.topo_order():
        if graph.node(name).kind != "op":
            continue
        for port, operand in enumerate(graph.operands(name)):
            if _broadcasts(operand.tms)[1:]:
                graph.set_operand(name, port, _split(graph, name, operand))
    return graph


def _broadcasts(tms: tuple) -> list[int]:
    """The positions of the broadcast TMs in an edge's TM list."""
    return [k for k, tm in enumerate(tms) if tm[0] == "broadcast"]


def _split(graph: Graph, consumer: str, operand: Operand) -> Operand:
    """The operand `consumer` reads instead of `operand`: a chain of NOPs, one per broadcast but the last."""
    dest = graph.node(consumer)
    src, tms = operand.src, operand.tms
    producer = graph.node(src)
    while _broadcasts(tms)[1:]:
        cut = _broadcasts(tms)[0] + 1
        head = Operand(src, tms[:cut])
        nop = graph.unique_name(f"{operand.src}_splt_brcst_{tms[cut - 1][1]}")
        graph.add_op(nop, "nop", [head], {}, shape=graph.operand_shape(head), df=producer.df,
                     intermed_df=dest.intermed_df, acc_df=dest.acc_df, math_fidelity=dest.math_fidelity,
                     original_op_type="nop")
        graph.set_order(nop, dest.order)
        src, tms = nop, tms[cut:]
    return Operand(src, tms)
