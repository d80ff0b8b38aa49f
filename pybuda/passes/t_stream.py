"""T-streaming (pybuda-passes.md §7): the balancer's streaming choices become the graph the netlist is written
from. A streamed op's output for one input is `factor` slices along its rows ("r") or columns ("c"): its shape
becomes (1, z * factor, R / factor, C) (or (1, z * factor, R, C / factor)), a fused op's sub-ops alike, and every
edge gets the TMs of `pybuda.arch.streaming.edge_tms` (the producer's slices stacked back, the edge's own TMs, the
consumer's slicing or replay), so every op reads the values it read before: the golden evaluation of the
streamed graph equals the unstreamed one's (`compile(..., verify=True)` checks it after this stage).

An op a model output reads may stream: its output queue holds the slices and the host stacks them back
(`host_io.unstream`). Requires: a Buda graph whose ops that write parameters or accumulators in place (loopback
outputs) do not stream (the balancer's rule).
"""
from __future__ import annotations

import dataclasses

from ..arch.streaming import Stream, edge_tms
from ..ir import Graph, Operand
from ..ops import registry
from ..ops.registry import OpError


def streamed_shape(shape: tuple, stream: Stream) -> tuple:
    """A device shape (1, z, R, C) streamed as `stream`."""
    if not stream:
        return tuple(shape)
    *lead, z, r, c = shape
    direction, factor = stream
    return (*lead, z * factor, r // factor, c) if direction == "r" else (*lead, z * factor, r, c // factor)


def _buda_type(op_type: str) -> tuple[str, bool]:
    return ("matmul", True) if op_type == "sparse_matmul" else (op_type, False)


def apply_streaming(graph: Graph, streams: dict[str, Stream]) -> Graph:
    """Edit `graph` for the ops of `streams` (op name -> streaming; others do not stream) and return it."""
    for name, stream in streams.items():
        node = graph.node(name)
        if any(graph.node(u).kind == "output" and graph.node(u).loopback is not None for u, _ in graph.users(name)):
            raise OpError(f"op {name!r} streams {stream} but writes a parameter or accumulator in place, which "
                          "keeps its unstreamed layout")
        node.shape = streamed_shape(node.shape, stream)
        if node.op_type == "fused_op":
            group = node.attrs["fused"]
            schedules = tuple(tuple(dataclasses.replace(s, shape=streamed_shape(s.shape, stream)) for s in sched)
                              for sched in group.schedules)
            node.attrs = {**node.attrs, "fused": dataclasses.replace(group, schedules=schedules)}
    for node in graph.nodes("op"):
        consumer = streams.get(node.name, ())
        op_type, identity = _buda_type(node.op_type)
        for k, operand in enumerate(graph.operands(node.name)):
            producer = streams.get(operand.src, ()) if graph.node(operand.src).kind == "op" else ()
            if producer or consumer:
                tms = edge_tms(producer, operand.tms, consumer, op_type, k, identity)
                graph.set_operand(node.name, k, Operand(operand.src, tms))
    for node in graph.nodes("op"):
        shapes = [graph.operand_shape(o) for o in graph.operands(node.name)]
        expected = registry.infer_shape(node.op_type, shapes, node.attrs, node.name)
        if tuple(expected) != tuple(node.shape):
            raise OpError(f"op {node.name!r} ({node.op_type}): after streaming its operands give shape {expected}, "
                          f"but it streams to {node.shape} (compiler bug)")
    return graph
