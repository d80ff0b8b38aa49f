"""NOPs the user asks for on edges of the Buda graph (`insert_nop`, `insert_buffering_nop`,
`_internal_insert_fj_buffering_nop`): each instruction puts `nop_count` NOPs `buffer_<k>_<src>_<dest>` in a chain
on every edge src -> dest (or only operand `input_id` of dest). With `hoist_tms` the edge's TMs move onto the first
NOP's input, else they stay on dest's. The dests of one call (mergeable instructions) share one chain when their
edges carry the same TMs; with `daisy_chain` each dest gets its own NOPs, the next dest's chain continuing from
them (src -> dest 0's NOPs -> dest 1's NOPs -> ...). A NOP keeps its producer's data format and takes its
consumer's math formats and fidelity, so the numerics do not change."""
from __future__ import annotations

from ..ir import Graph, Operand
from ..ir.graph import GraphError


def insert_nops(graph: Graph, config) -> Graph:
    """The graph with the NOPs of `config.buffering_nops_to_insert` inserted (module docstring); instructions
    naming neither op of the graph belong to another device segment."""
    instructions = [i for i in config.buffering_nops_to_insert.values() if i.src in graph or i.dest in graph]
    groups: dict[tuple, list] = {}
    for instr in instructions:
        _check(graph, instr)
        key = (instr.src, instr.hoist_tms, instr.nop_count, instr.daisy_chain, instr.is_fj_buffering) \
            if instr.mergeable else (id(instr),)
        groups.setdefault(key, []).append(instr)
    for group in groups.values():
        if group[0].daisy_chain:
            _daisy_chain(graph, group)
        else:
            shared: dict[tuple, list] = {}
            for instr in group:
                shared.setdefault(_hoisted(graph, instr), []).append(instr)
            for same in shared.values():
                _chain(graph, same[0].src, same, same[0].dest)
    return graph


def _check(graph: Graph, instr) -> None:
    """GraphError unless instruction's src and dest are in the graph and dest reads src (at input_id)."""
    where = f"insert_nop({instr.src!r}, {instr.dest!r})"
    for name in (instr.src, instr.dest):
        if name not in graph:
            raise GraphError(f"{where}: no node {name!r} in the device graph (fused into a fused op, or on the "
                             f"CPU?); name the fused op `_fused_op_<k>` or dont_fuse({name!r})")
    ports = _ports(graph, instr)
    if not ports:
        operands = [o.src for o in graph.operands(instr.dest)]
        raise GraphError(f"{where}: {instr.dest!r} does not read {instr.src!r}"
                         + (f" on operand {instr.input_id}" if instr.input_id is not None else "")
                         + f"; its operands: {operands}")


def _ports(graph: Graph, instr) -> list[int]:
    return [k for k, o in enumerate(graph.operands(instr.dest))
            if o.src == instr.src and instr.input_id in (None, k)]


def _hoisted(graph: Graph, instr) -> tuple | None:
    """The TMs the instruction's first NOP takes from its edges: with `hoist_tms`, those every one of its edges
    carries (None: not hoisted, the TMs stay on the edges; also when the edges' TMs differ)."""
    operands = graph.operands(instr.dest)
    tms = {operands[k].tms for k in _ports(graph, instr)}
    return next(iter(tms)) if instr.hoist_tms and len(tms) == 1 else None


def _chain(graph: Graph, src: str, instrs: list, label: str) -> str:
    """Insert `nop_count` NOPs after `src` that every instruction's dest edges then read; returns the last."""
    first = instrs[0]
    hoisted = _hoisted(graph, first)
    tms = hoisted or ()
    producer, dest = graph.node(src), graph.node(first.dest)
    previous = Operand(src, tms)
    for k in range(first.nop_count):
        name = graph.unique_name(f"buffer_{k}_{first.src}_{label}")
        shape = graph.operand_shape(previous)
        graph.add_op(name, "nop", [previous], {}, shape=shape, df=producer.df,
                     intermed_df=dest.intermed_df, acc_df=dest.acc_df, math_fidelity=dest.math_fidelity,
                     logical_shape=producer.logical_shape if not tms else None,
                     original_op_type="nop")
        graph.set_order(name, producer.order)
        previous = Operand(name)
    for instr in instrs:
        operands = graph.operands(instr.dest)
        for k in _ports(graph, instr):
            graph.set_operand(instr.dest, k, Operand(previous.src, () if hoisted is not None else operands[k].tms))
    return previous.src


def _daisy_chain(graph: Graph, instrs: list) -> None:
    """Each dest's NOPs continue the previous dest's chain."""
    src = instrs[0].src
    for instr in instrs:
        hoisted = _hoisted(graph, instr)
        last = _chain(graph, src, [instr], instr.dest)
        if not hoisted:     # a chain that took TMs holds transformed data: the next dest continues from before it
            src = last
