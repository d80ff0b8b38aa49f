"""Build the netlist model of a placed Buda graph: the plan's queues (input, parameter, constant, epoch-to-epoch,
output: `Placement.queues`) at the DRAM addresses the balancer placed them (`Placement.dram`) or in host memory,
one graph per epoch, and the legacy microbatch loop program with epoch-to-epoch queues allocated before their
writer's epoch and freed after their last reader's (netlist-format.md §1.2, §1.3, §2.4). The result is a
`pybuda.netlist.Netlist`; `write_netlist` writes it."""
from __future__ import annotations

import dataclasses

import numpy as np

from ..balancer import Placement
from ..balancer.op_model import (SPARSE_QUEUES, buda_op_type, fused_layout, netlist_inputs,
                                 op_attributes, operand_port, sparse_queue_operands)
from ..balancer.queues import QueuePlan, page_writes
from ..dataformat import NOC_ALIGN, MathFidelity
from ..device import DeviceSpec
from ..ir import Graph, epoch_types, gradient_ops, loopback_writers
from ..netlist.model import Attributes, Devices, FusedOp, FusedSubOp, Graph as NetlistGraph, Netlist, Op, Queue
from .programs import ProgramBuilder


_PREFIX = {"forward": "fwd", "backward": "bwd", "optimizer": "opt"}


def graph_name(arch: str, epoch: int, epoch_type: str = "forward") -> str:
    """Legacy epoch graph names: fwd_0_<e> on grayskull, fwd_0_<e>_temporal_epoch_<e> otherwise (bwd_ and opt_
    for backward and optimizer epochs)."""
    prefix = _PREFIX[epoch_type]
    return f"{prefix}_0_{epoch}" if arch == "grayskull" else f"{prefix}_0_{epoch}_temporal_epoch_{epoch}"


def format_tm(tm: tuple) -> tuple:
    """A graph TM as a netlist model TM (the same tuple form, factors as ints)."""
    if tm[0] == "transpose":
        return ("transpose",)
    if tm[0] == "broadcast":
        return ("broadcast", tm[1], int(tm[2]))
    return (tm[0], int(tm[1]))


def _queue(plan: QueuePlan, placement: Placement, host: list[int]) -> Queue:
    """The netlist queue of a planned queue: its DRAM buffers where the balancer placed them, host buffers one
    after the other from `host[0]` (advanced)."""
    if plan.loc == "host":
        buffers = []
        for _ in range(plan.buffers):
            buffers.append((0, host[0]))
            host[0] = -(-(host[0] + plan.buffer_bytes) // NOC_ALIGN) * NOC_ALIGN
    else:
        buffers = list(placement.dram.buffers[plan.name])
    return Queue(name=plan.name, input=plan.writer, alias=plan.alias, type=plan.type, entries=plan.entries,
                 ublock_order="r",
                 df=plan.df, target_device=plan.chip, loc=plan.loc, dram=buffers if plan.loc == "dram" else None,
                 host=buffers if plan.loc == "host" else None, **plan.blocking)


def build_netlist(bgraph: Graph, placement: Placement, device: DeviceSpec, config, microbatch: int) -> Netlist:
    """The netlist model of a placed Buda graph (write it with `pybuda.netlist.write_netlist`)."""
    host = [0]
    queues = {name: _queue(plan, placement, host) for name, plan in placement.queues.items()}
    groups = {name: plan.group for name, plan in placement.queues.items()}
    epoch_of = {n: p.epoch for n, p in placement.placed.items()}
    e2e = {plan.writer: name for name, plan in placement.queues.items() if plan.kind == "e2e"}
    graphs: dict[str, NetlistGraph] = {}
    reads: dict[int, list[str]] = {}
    writes: dict[int, list[str]] = {}
    names: dict[int, str] = {}
    types = epoch_types(bgraph)
    grads = gradient_ops(bgraph)
    pages = page_writes(bgraph)      # a paged state -> its writer view
    written = {op: pages.get(target, target) for target, op in loopback_writers(bgraph).items()}
    fused = _FusedOps(bgraph, placement, device)
    for name, placed in placement.placed.items():
        gname = names.setdefault(placed.epoch, graph_name(device.arch, placed.epoch, types[name]))
        graph = graphs.get(gname)
        if graph is None:
            # the optimizer runs once per step, not once per sample
            count = 1 if types[name] == "optimizer" else microbatch
            graph = graphs[gname] = NetlistGraph(name=gname, target_device=placement.chips.get(name, 0),
                                                 input_count=count)
        op = _op_entry(bgraph, name, placement, e2e, epoch_of, reads.setdefault(placed.epoch, []), gname)
        if op.type == "fused_op":
            op.attributes = dataclasses.replace(op.attributes or Attributes(), fused_op_id=fused.id_of(name))
        if name in grads:
            op.gradient_op = True
        if name in written:
            writes.setdefault(placed.epoch, []).append(written[name])
        graph.ops[name] = op
    queue_order = {q: i for i, q in enumerate(queues)}
    for epoch in reads:
        reads[epoch] = sorted(set(reads[epoch]), key=queue_order.get)
    dynamic = placement.dram.dynamic if placement.dram else frozenset()
    builder = ProgramBuilder(queues, reads, writes, names, {q: placement.queues[q].lifetime for q in queues
                                                            if q in dynamic}, placement.prologue, microbatch, pages)
    epochs = sorted(names)
    if set(types.values()) == {"forward"}:
        program_of = {placed.epoch: placement.subgraphs.get(name, 0) for name, placed in placement.placed.items()}
        programs = [builder.inference([e for e in epochs if program_of[e] == k], k)
                    for k in sorted(set(program_of.values()))]
    else:
        by_type = {t: [e for e in epochs if types[_first_op(placement, e)] == t] for t in ("forward", "backward",
                                                                                           "optimizer")}
        programs = builder.training(by_type, sorted(written[op] for op in grads))
    return Netlist(devices=Devices(arch=device.arch), queues=queues, graphs=graphs, programs=programs,
                   fused_ops=fused.definitions or None, queue_groups=groups)


def _first_op(placement: Placement, epoch: int) -> str:
    return next(n for n, p in placement.placed.items() if p.epoch == epoch)


class _FusedOps:
    """The `fused_ops` section: one definition per distinct fused op (equal schedules, blockings, TMs and
    attributes share one, as the legacy compiler deduplicates), ids "0", "1", ... in first use order."""

    def __init__(self, bgraph: Graph, placement: Placement, device: DeviceSpec):
        self.bgraph, self.placement, self.device = bgraph, placement, device
        self.definitions: dict[str, FusedOp] = {}
        self._ids: dict[str, str] = {}

    def id_of(self, name: str) -> str:
        node = self.bgraph.node(name)
        group = node.attrs["fused"]
        layout = fused_layout(self.bgraph, name, self.placement.models[name])
        schedules, k = [], 0
        for schedule in group.schedules:
            subs = []
            for sub in schedule:
                lay = layout[k]
                k += 1
                tms = {i: [format_tm(tm) for tm in t] for i, t in enumerate(sub.tms) if t}
                subs.append(FusedSubOp(
                    name=sub.name, type=sub.op_type, inputs=[r.netlist_name for r in sub.inputs],
                    output=sub.output.netlist_name, mblock=lay.mblock, ublock=lay.ublock,
                    pop_last=[r.netlist_name for r in sub.pop_last] or None, input_tms=tms,
                    attributes=lay.attrs if lay.attrs != Attributes() else None))
            schedules.append(subs)
        key = repr((group.inputs, group.intermediates,
                    [[dataclasses.replace(s, name="") for s in sched] for sched in schedules]))
        fid = self._ids.get(key)
        if fid is None:
            fid = self._ids[key] = str(len(self._ids))
            self.definitions[fid] = FusedOp(id=fid, inputs=group.inputs, intermediates=group.intermediates,
                                            schedules=schedules)
        return fid


def sparse_queue_values(bgraph: Graph, placement: Placement) -> dict[str, np.ndarray]:
    """Host data of the sparse-tile and encoding queues of every sparse matmul, by queue name (pushed to the
    netlist's rams before a run, like parameters and constants)."""
    out = {}
    for name in placement.placed:
        if bgraph.node(name).op_type == "sparse_matmul":
            enc = sparse_queue_operands(bgraph, name, placement.models[name])
            out[f"{name}.{SPARSE_QUEUES[0]}"] = enc.sparse_tiles
            out[f"{name}.{SPARSE_QUEUES[1]}"] = enc.encoding
    return out


def _op_entry(bgraph: Graph, name: str, placement: Placement, e2e: dict, epoch_of: dict, reads: list,
              gname: str) -> Op:
    """The netlist op of a placed graph op; its inputs are queues for graph inputs, parameters, constants,
    sparse operands, earlier epochs' outputs and `insert_queues` edges, and ops of the same epoch otherwise."""
    node = bgraph.node(name)
    m = placement.models[name]
    p = placement.placed[name]
    inputs, in_df, tms = [], [], {}
    for index, inp in enumerate(netlist_inputs(bgraph, name, m)):
        if inp.kind != "op":
            reads.append(inp.src)
            inputs.append(inp.src)
        elif epoch_of[inp.src] < p.epoch or (inp.src, name, operand_port(bgraph, name, index)) in \
                placement.queued_edges:
            reads.append(e2e[inp.src])
            inputs.append(e2e[inp.src])
        else:
            inputs.append(inp.src)
        in_df.append(inp.df)
        if inp.tms:
            tms[index] = [format_tm(tm) for tm in inp.tms]
    return Op(name=name, graph=gname, type=buda_op_type(node.op_type), grid_loc=tuple(p.loc),
              grid_size=tuple(m.grid), inputs=inputs, grid_transpose=True if p.transpose else None, t=m.t,
              mblock=tuple(m.mblock), ublock=tuple(m.ublock), tile_dim=(32, 32), buf_size_mb=m.buf_size_mb,
              input_buf_min_size_tiles=list(m.input_buf_min) or None, ublock_order="r",
              in_df=in_df, out_df=node.df, intermed_df=node.intermed_df, acc_df=node.acc_df,
              math_fidelity=MathFidelity.parse(node.math_fidelity), input_tms=tms,
              attributes=op_attributes(bgraph, name, m), overlay_size=m.overlay_size or None,
              forked_dram_inputs=list(placement.forks[name]) if name in placement.forks else None)
