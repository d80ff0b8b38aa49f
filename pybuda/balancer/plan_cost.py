"""The cost of a balancer plan in the one backend model: the same per-op loads the netlist will present to the
simulator's timing (`pybuda.arch.perf`), so the balancer's estimate of its chosen plan is the simulator's
estimate of the netlist written from it.

Per op, the netlist reads each input from an op of the same epoch (NoC), an earlier epoch's output queue
(DRAM), a graph input queue (host or DRAM), or a parameter/constant/sparse ram in DRAM (prologued or per input);
it writes each model output it produces to an output queue (host or DRAM) and, when an op of a later epoch reads
it, one epoch-to-epoch queue in DRAM. The program runs every epoch once per loop in order.
"""
from __future__ import annotations

import dataclasses

from ..arch.operands import tiles_read_per_core
from ..arch.perf import EpochTiming, OpLoad, Transfer, epoch_timing, program_cycles
from ..device import DeviceSpec
from ..ir import Graph
from .op_model import OpModel, geometry, netlist_inputs


@dataclasses.dataclass(frozen=True)
class IoLinks:
    """Where graph inputs are read from and outputs written to: "pcie" (host queues) or "dram"."""

    inputs: str
    outputs: str

    @classmethod
    def from_config(cls, config) -> "IoLinks":
        return cls("pcie" if config.input_queues_on_host else "dram",
                   "pcie" if config.output_queues_on_host else "dram")


def op_load(graph: Graph, name: str, model: OpModel, epoch_of: dict[str, int], prologue: dict[str, bool],
            links: IoLinks, later_users: bool) -> OpLoad:
    """What op `name` asks of the hardware per input under `model` in its epoch. `epoch_of` places its
    producers (ops missing from it count as in the same epoch), `later_users`: an op of a later epoch reads it."""
    node = graph.node(name)
    geom = geometry(graph, name, model)
    epoch = epoch_of.get(name)
    reads, preds = [], []
    for index, inp in enumerate(netlist_inputs(graph, name, model)):
        nbytes = tiles_read_per_core(geom, index, inp.tiles) * inp.df.tile_bytes
        if inp.kind == "op":
            if epoch_of.get(inp.src, epoch) == epoch:
                reads.append(Transfer(nbytes, "noc"))
                preds.append(inp.src)
            else:
                reads.append(Transfer(nbytes, "dram"))
        elif inp.kind == "input":
            reads.append(Transfer(nbytes, links.inputs))
        else:
            reads.append(Transfer(nbytes, "dram", once=prologue.get(inp.src, False)))
    out_bytes = geom.tiles_per_core * node.df.tile_bytes
    writes = [Transfer(out_bytes, links.outputs) for out in graph.output_names if graph.output_source(out) == name]
    if later_users:
        writes.append(Transfer(out_bytes, "dram"))
    return OpLoad(name, geom.cores, model.cycles, tuple(reads), tuple(writes), tuple(preds))


@dataclasses.dataclass(frozen=True)
class PlanCost:
    """A plan's estimated cycles for one run of the program (every epoch once) and each epoch's timing."""

    cycles: int
    epochs: tuple[EpochTiming, ...]


def plan_cost(graph: Graph, schedule: list[str], models: dict[str, OpModel], epoch_of: dict[str, int],
              prologue: dict[str, bool], links: IoLinks, device: DeviceSpec, microbatch: int) -> PlanCost:
    """Estimated cycles of a placed plan: each epoch's cost (`pybuda.arch.perf.epoch_timing`) over the
    microbatch, plus an epoch switch between consecutive epochs."""
    later = {name: any(graph.node(u).kind == "op" and epoch_of[u] > epoch_of[name] for u, _ in graph.users(name))
             for name in schedule}
    by_epoch: dict[int, list[OpLoad]] = {}
    for name in schedule:
        load = op_load(graph, name, models[name], epoch_of, prologue, links, later[name])
        by_epoch.setdefault(epoch_of[name], []).append(load)
    epochs = tuple(epoch_timing(device, by_epoch[e], microbatch) for e in sorted(by_epoch))
    cycles = program_cycles(device, ((e.epoch_cycles, 1) for e in epochs), max(0, len(epochs) - 1))
    return PlanCost(cycles, epochs)
