"""The cost of a balancer plan in the one backend model: the same per-op loads the netlist will present to the
simulator's timing (`pybuda.arch.perf`), so the balancer's estimate of its chosen plan is the simulator's
estimate of the netlist written from it.

Per op, the netlist reads each input from an op of the same epoch (NoC), an earlier epoch's output queue
(DRAM), a graph input queue (host or DRAM), or a parameter/constant/sparse ram in DRAM (prologued or per input);
it writes each model output it produces to an output queue (host or DRAM) and, when an op of a later epoch reads
it, one epoch-to-epoch queue in DRAM. A DRAM queue's buffers (`queues.py`: one per core of the op that writes it,
up to one per channel for a queue the host writes, one per grid row for sparse operands) sit in the channels the
DRAM placement gives them (`dram.place_dram`, for a plan's final cost) or, while plans are compared, in the
channels `dram.assumed_channels` gives. The program runs every epoch once per loop in order.

On a multi-chip device each op runs on its chip (`chips.py`) and each queue sits in the DRAM of its chip: a read
of another chip's queue, or of a host queue from a chip without the PCIe link, crosses the chip-to-chip ethernet.
Consecutive epochs on different chips run as one temporal epoch (`pybuda.arch.perf.temporal_epochs`), costed as
one epoch of all their ops, the later epochs reading the earlier ones' queues as they are written.
"""
from __future__ import annotations

import dataclasses
import itertools
import math

from ..arch.movement import (EXTENDED_OVERLAY_BYTES, CoreBudget, MovingInput, MovingOp, Overuse, QueueLayout,
                             core_streams, epoch_pipes, forked_reads, heaviest_input, overuses, phase_hungry,
                             prologue_bytes, receive_floor, with_forks)
from ..arch.operands import OpGeometry, input_buffer_inputs, output_buffer_inputs, output_granules, tiles_read_per_core
from ..arch.perf import EpochTiming, OpLoad, Transfer, epoch_timing, program_cycles, temporal_epochs
from ..arch.streaming import edge_tms
from ..device import DeviceSpec
from ..ir import Graph, epoch_types, loopback_writers
from .chips import home_chip
from .dram import DramPlacement, assumed_channels
from .op_model import (NetlistInput, OpModel, buda_op_type, e2e_queue, geometry, netlist_inputs,
                       op_attributes, operand_inputs, operand_port, overlay_fits, raw_prologue_grid, read_tiles)
from .placer import PlacedOp
from .queues import e2e_queue_blocking, host_queue_grid


QUEUED = "queued"   # an op input read through a DRAM queue in the same epoch (`insert_queues`)


def model_shape(model: OpModel) -> tuple:
    """(t, rt, ct) of an op's output under `model` (streamed t)."""
    return (model.t, *(g * m * u for g, m, u in zip(model.grid, model.mblock, model.ublock)))

@dataclasses.dataclass(frozen=True)
class IoLinks:
    """Where graph inputs are read from and outputs written to: "pcie" (host queues) or "dram"."""

    inputs: str
    outputs: str

    @classmethod
    def from_config(cls, config) -> "IoLinks":
        return cls("pcie" if config.input_queues_on_host else "dram",
                   "pcie" if config.output_queues_on_host else "dram")


@dataclasses.dataclass(frozen=True)
class PlanCost:
    """A plan's estimated cycles for one run of the program (every epoch once), each temporal epoch's timing and
    the epochs each runs (one each on a single chip)."""

    cycles: int
    epochs: tuple[EpochTiming, ...]
    temporal: tuple[tuple[int, ...], ...] = ()


@dataclasses.dataclass(frozen=True)
class OpContext:
    """An op under one model in one epoch context (`PlanCoster.context_cost`): its limiter cycles per input, its
    latency (limiter cycles over output granules, what it adds to the epoch's fill), the bytes per input it moves
    through DRAM (all its cores, prologue and epilogue excluded), over PCIe from the host (its host inputs) and
    to the host (its host outputs), and the bytes its prologue reads from DRAM once per epoch (all its cores)."""

    cycles: float
    latency: float
    dram_bytes: float
    host_in_bytes: float
    host_out_bytes: float
    prologue_bytes: float


@dataclasses.dataclass(frozen=True)
class _OpFacts:
    """What an op under one model reads and writes, independent of the plan around it."""

    geometry: OpGeometry
    inputs: tuple[NetlistInput, ...]
    read_bytes: tuple[float, ...]
    out_bytes: int
    outputs: tuple[str, ...]   # model outputs it writes
    cores: int
    kernel_cycles: int
    in_buffers: tuple[float, ...]   # inputs' worth each input buffer holds
    out_buffer: float               # inputs' worth the output buffer holds
    granules: int                   # output blocks per input, emitted one after the other


class PlanCoster:
    """Costs plans of one Buda graph on one device (the graph must not change while it is used); what does not
    depend on the plan around an op is computed once per (op, model)."""

    def __init__(self, graph: Graph, device: DeviceSpec, links: IoLinks, microbatch: int,
                 queued: frozenset = frozenset(), chips: dict[str, int] | None = None, fork_dram: bool = False):
        self.graph, self.device, self.links, self.microbatch = graph, device, links, microbatch
        self.fork_dram = fork_dram   # an epoch's ops reading a DRAM queue the same way share one read
        self.queued = queued   # (producer, consumer, operand port): edges through a DRAM queue (`insert_queues`)
        self.chips = chips or {}   # op -> chip (`chips.chip_assignment`); none: every op on the PCIe chip
        self._homes: dict[str, int] = {}
        self._queued_producers = {p for p, _, _ in queued}
        self._types = epoch_types(graph)   # optimizer epochs run one input per step
        self._contexts: dict[tuple, OpContext] = {}
        self._facts: dict[tuple[str, OpModel, bool], _OpFacts] = {}
        self._loads: dict[tuple, OpLoad] = {}
        self._epochs: dict[tuple, EpochTiming] = {}
        self._outputs: dict[str, tuple[str, ...]] = {}
        for out in graph.output_names:   # a loopback output writes its target's queue
            queue = graph.node(out).loopback or out
            self._outputs[graph.output_source(out)] = (*self._outputs.get(graph.output_source(out), ()), queue)
        self._operands: dict[str, list[NetlistInput]] = {}
        self._op_users = {n.name: [u for u, _ in graph.users(n.name) if graph.node(u).kind == "op"]
                          for n in graph.nodes("op")}
        self._loopback = loopback_writers(graph)     # a trained parameter -> the op that writes it back

    def _op_facts(self, name: str, model: OpModel, exact: bool) -> _OpFacts:
        """Per-input bytes and the rest; a sparse matmul's queue sizes from its encoding, or bounds unless
        `exact` (for ranking models without encoding each)."""
        facts = self._facts.get((name, model, exact))
        if facts is None:
            geom = geometry(self.graph, name, model, op_attributes(self.graph, name, model, exact))
            if name not in self._operands:
                self._operands[name] = operand_inputs(self.graph, name)
            inputs = tuple(netlist_inputs(self.graph, name, model, exact, self._operands[name]))
            shapes = tuple(read_tiles(self.graph, name, model, k, i.tiles) for k, i in enumerate(inputs))
            read = tuple(tiles_read_per_core(geom, k, shape) * i.df.tile_bytes
                         for k, (i, shape) in enumerate(zip(inputs, shapes)))
            mins = model.input_buf_min or (0,) * len(inputs)
            buffers = tuple(input_buffer_inputs(geom, k, shape, i.df.tile_bytes, mins[k])
                            for k, (i, shape) in enumerate(zip(inputs, shapes)))
            facts = _OpFacts(geom, inputs, read, geom.tiles_per_core * self.graph.node(name).df.tile_bytes,
                             self._outputs.get(name, ()), geom.cores, model.cycles, buffers,
                             output_buffer_inputs(geom, model.buf_size_mb), output_granules(geom))
            self._facts[(name, model, exact)] = facts
        return facts

    def op_load(self, name: str, model: OpModel, epoch_of: dict[str, int], prologue: dict[str, bool],
                later_users: bool, exact: bool = True, models: dict[str, OpModel] | None = None,
                spread: bool = False, dram: DramPlacement | None = None,
                temporal: dict[int, int] | None = None, placed: dict[str, PlacedOp] | None = None) -> OpLoad:
        """What op `name` asks of the hardware per input under `model` in its epoch, with the op as its pipes see
        it (`pybuda.arch.movement.MovingOp`: the netlist's inputs with the TMs t-streaming gives them, the queues'
        buffer grids and channels, its location when `placed` gives it). `epoch_of` places its producers (ops
        missing from it count as in the same epoch; `models` must hold the op's producers, unless `spread`),
        `later_users`: an op of a later epoch reads it. DRAM queues' buffers sit where `dram` places them, else in
        their assumed channels, or (`spread`) each queue's buffers in as many channels as they can be, no two
        queues sharing one (the least channel contention any placement can give; an earlier epoch's output counted
        in every channel). `temporal`: each epoch's temporal epoch (epochs on other chips that run with the op's:
        their outputs it reads as they are written)."""
        facts = self._op_facts(name, model, exact)
        epoch = epoch_of.get(name)
        context = tuple(self._op_context(name, k, i.src, epoch_of.get(i.src, epoch), epoch, temporal)
                        if i.kind == "op" else prologue.get(i.src, False) for k, i in enumerate(facts.inputs))
        producers = tuple(self._layout_model(i, models) for i in facts.inputs)
        where = placed.get(name) if placed else None
        key = (name, model, context, producers, later_users, exact, spread, where)
        load = self._loads.get(key) if dram is None else None
        if load is not None:
            return load

        spread_queues: list[str] = []
        chip = self.chips.get(name, self.device.mmio_chip)

        def channels_of(queue: str, buffers: int, home: int) -> tuple:
            if spread:          # channels of its own (no other queue's): its buffers in as many as they can be
                spread_queues.append(queue)
                base = len(spread_queues) * self.device.dram_channels
                return tuple(range(base, base + min(buffers, self.device.dram_channels)))
            if dram is not None:
                return dram.channels(queue)
            return tuple(self.device.system_channel(home, ch)
                         for ch in assumed_channels(queue, buffers, self.device.dram_channels))

        reads, preds, in_buffers, moving = [], [], [], []
        for k, (inp, nbytes, local, producer, buffer) in enumerate(zip(facts.inputs, facts.read_bytes, context,
                                                                       producers, facts.in_buffers)):
            layout = self._queue_layout(name, model, k, inp, local, producer, chip, channels_of)
            once = local is True and inp.kind in ("parameter", "constant", "sparse")
            moving.append(MovingInput(layout.name if layout.grid else inp.src, self._edge_tms(name, model, k, inp,
                                                                                              producer),
                                      layout if layout.grid else None, tile_bytes=inp.df.tile_bytes, prologue=once,
                                      min_buffer_tiles=model.input_buf_min[k] if k < len(model.input_buf_min) else 0))
            if inp.kind == "op" and local is True:
                preds.append(inp.src)
                in_buffers.append(buffer)
            elif inp.kind == "op" and local == QUEUED:   # the same epoch, through a DRAM queue of microbatch entries
                reads.append(Transfer(nbytes, "dram", channels=layout.channels,
                                      remote=self.chips.get(inp.src, chip) != chip))
                preds.append(inp.src)
                in_buffers.append(float(self.microbatch))
            elif inp.kind == "input" and self.links.inputs == "pcie":
                t, rt, ct = inp.src_tiles
                reads.append(Transfer(nbytes, "pcie", source=inp.src, source_bytes=t * rt * ct * inp.df.tile_bytes,
                                      remote=chip != self.device.mmio_chip))
            else:
                reads.append(Transfer(prologue_bytes(facts.geometry, k, moving[-1], nbytes) if once else nbytes,
                                      "dram", once=once, channels=layout.channels, remote=layout.chip != chip))
        writes, written = [], []
        for out in facts.outputs:
            host = self.links.outputs == "pcie" and out in self.graph.output_names
            channels = () if host else channels_of(out, model.cores, chip)
            writes.append(Transfer(facts.out_bytes, "pcie", remote=chip != self.device.mmio_chip) if host
                          else Transfer(facts.out_bytes, "dram", channels=channels, remote=False))
            written.append(QueueLayout(out, facts.geometry.shape, tuple(model.grid), channels, chip,
                                       self.graph.node(name).df.tile_bytes))
        if later_users:
            grid = e2e_queue_blocking(model, self.device)[0]
            channels = channels_of(e2e_queue(name), grid[0] * grid[1], chip)
            writes.append(Transfer(facts.out_bytes, "dram", channels=channels, remote=False))
            written.append(QueueLayout(e2e_queue(name), facts.geometry.shape, tuple(grid), channels, chip,
                                       self.graph.node(name).df.tile_bytes))
        op = MovingOp(name, facts.geometry, tuple(moving), tuple(written),
                      tuple(where.loc) if where is not None else None, bool(where.transpose) if where else False,
                      chip)
        load = OpLoad(name, facts.cores, facts.kernel_cycles, tuple(reads), tuple(writes), tuple(preds),
                      out_buffer=facts.out_buffer, in_buffers=tuple(in_buffers), granules=facts.granules,
                      moving=op)
        if dram is None:
            self._loads[key] = load
        return load

    def _layout_model(self, inp: NetlistInput, models: dict[str, OpModel] | None) -> OpModel | None:
        """The model that lays out what input `inp` reads: its producer op's, or the writer's of a trained
        parameter written back (None if not known)."""
        writer = inp.src if inp.kind == "op" else self._loopback.get(inp.src)
        return models.get(writer) if models and writer else None

    def _queue_layout(self, name: str, model: OpModel, index: int, inp: NetlistInput, local, producer,
                      chip: int, channels_of) -> QueueLayout:
        """The queue input `index` of op `name` reads, as data movement sees it (a layout without a grid for an
        op of the same epoch read core to core): an epoch-to-epoch queue with its writer's blocking, a graph
        input on the host or in DRAM, a parameter or constant over the host-queue grid (a trained one written
        back with its writer's), a sparse operand per grid row."""
        if inp.kind == "op":
            if local is True:
                return QueueLayout(inp.src, (), ())
            if producer is not None:
                grid, shape = e2e_queue_blocking(producer, self.device)[0], model_shape(producer)
            else:     # its writer's model is not known (an op costed alone): its bytes in every channel
                grid, shape = (1, self.device.dram_channels), inp.src_tiles
            home = self.chips.get(inp.src, chip)
            return QueueLayout(e2e_queue(inp.src), shape, tuple(grid),
                               channels_of(e2e_queue(inp.src), grid[0] * grid[1], home), home, inp.df.tile_bytes)
        if inp.kind == "sparse":
            grid = (model.grid[0], 1)
            return QueueLayout(inp.src, inp.src_tiles, grid, channels_of(inp.src, grid[0], chip), chip,
                               inp.df.tile_bytes)
        if inp.kind == "input" and self.links.inputs == "pcie":
            grid = host_queue_grid(self.graph.node(inp.src).shape, self.device)
            return QueueLayout(inp.src, inp.src_tiles, grid, (), self.device.mmio_chip, inp.df.tile_bytes)
        raw = raw_prologue_grid(self.graph, inp.src, model) if inp.src in model.prologue else None
        grid = producer.grid if producer is not None else raw or host_queue_grid(self.graph.node(inp.src).shape,
                                                                                  self.device)
        home = self._home(inp.src)
        return QueueLayout(inp.src, inp.src_tiles, tuple(grid), channels_of(inp.src, grid[0] * grid[1], home), home,
                           inp.df.tile_bytes)

    def _edge_tms(self, name: str, model: OpModel, index: int, inp: NetlistInput,
                  producer: OpModel | None) -> tuple:
        """The TMs the netlist will carry on input `index` of op `name` (`pybuda.arch.streaming.edge_tms` of the
        producer's and the op's streaming, as the t_stream stage writes them)."""
        stream = producer.t_stream if producer is not None and inp.kind == "op" else ()
        port = operand_port(self.graph, name, index)
        if port is None or not (stream or model.t_stream):
            return tuple(inp.tms)
        node = self.graph.node(name)
        return edge_tms(stream, inp.tms, model.t_stream, buda_op_type(node.op_type), port,
                        node.op_type == "sparse_matmul")

    def _op_context(self, name: str, index: int, src: str, src_epoch: int | None, epoch: int | None,
                    temporal: dict[int, int] | None) -> bool | str:
        """How op `name` reads op `src` at netlist input `index`: from the producer's cores (True), through a DRAM
        queue in the same epoch (QUEUED, `insert_queues`) or in the same temporal epoch (QUEUED: an epoch on
        another chip that runs with its own), or from an earlier epoch's queue (False)."""
        if src_epoch == epoch:
            return QUEUED if (src, name, operand_port(self.graph, name, index)) in self.queued else True
        if temporal and temporal.get(src_epoch, src_epoch) == temporal.get(epoch, epoch):
            return QUEUED
        return False

    def _home(self, queue: str) -> int:
        """The chip of a host-written queue (`chips.home_chip` of its readers)."""
        home = self._homes.get(queue)
        if home is None:
            readers = (self.chips.get(u, self.device.mmio_chip) for u, _ in self.graph.users(queue)
                       if self.graph.node(u).kind == "op")
            home = self._homes[queue] = home_chip(readers, self.device)
        return home

    def writes_queue(self, name: str, epoch_of: dict[str, int]) -> bool:
        """Whether op `name` writes an epoch-to-epoch queue: an op of a later epoch reads it, or a consumer reads
        it through a queue (`insert_queues`)."""
        return name in self._queued_producers or any(epoch_of[u] > epoch_of[name] for u in self._op_users[name])

    def context_cost(self, name: str, model: OpModel, dram_producers: frozenset, dram_output: bool) -> OpContext:
        """Op `name` under `model` alone in an epoch where the ops in `dram_producers` ran in earlier epochs (their
        outputs come from DRAM) and, if `dram_output`, a later epoch reads its output; DRAM queues spread as far as
        they can be (`op_load(spread=True)`), and all its DRAM bytes at least spread over every channel. Its limiter
        cycles there are a lower bound of its limiter cycles in any epoch of that context (other ops only add
        contention), and so are its DRAM bytes per input."""
        key = (name, model, dram_producers, dram_output)
        cost = self._contexts.get(key)
        if cost is None:
            epoch_of = {name: 0, **{p: -1 for p in dram_producers}}
            prologue = {q: q in model.prologue for q in model.prologue}
            load = self.op_load(name, model, epoch_of, prologue, dram_output, spread=True)
            timing = epoch_timing(self.device, [load], self.microbatch).ops[0]
            dram = sum(load.cores * t.bytes for t in (*load.reads, *load.writes) if t.link == "dram" and not t.once)
            host_in = sum(t.source_bytes for t in load.reads if t.link == "pcie" and not t.once)
            host_out = sum(load.cores * t.bytes for t in load.writes if t.link == "pcie" and not t.once)
            prologue = sum(load.cores * t.bytes for t in load.reads if t.link == "dram" and t.once)
            cycles = max(timing.limiter_cycles, self.receive_cycles(load, model),
                         dram / (self.device.dram_channels * self.device.dram_channel_bw_bytes_per_cycle))
            cost = OpContext(cycles, cycles / load.granules, dram, host_in, host_out, prologue)
            self._contexts[key] = cost
        return cost

    def receive_cycles(self, load: OpLoad, model: OpModel) -> float:
        """The least cycles per input one core of the op of `load` (under `model`) needs to receive its inputs,
        wherever it and its producers sit (`pybuda.arch.movement.receive_floor`): a lower bound of its NoC term
        in any placed epoch, which `context_cost` counts where the op's producers are not placed yet."""
        return receive_floor(load.moving, self._op_facts(load.name, model, True).read_bytes,
                             self.device.noc_link_bytes_per_cycle)

    def standalone(self, name: str, model: OpModel) -> float:
        """Cycles per input of the op alone in an epoch (its producers beside it, its prologue amortised; sparse
        queue sizes bounded, not encoded)."""
        load = self.op_load(name, model, {}, {q: True for q in model.prologue}, later_users=False, exact=False)
        return epoch_timing(self.device, [load], self.microbatch).epoch_cycles / self.microbatch

    def _epoch(self, loads: tuple[OpLoad, ...]) -> EpochTiming:
        timing = self._epochs.get(loads)
        if timing is None:
            timing = self._epochs[loads] = epoch_timing(self.device, loads, self._inputs(loads))
        return timing

    def grouped(self, schedule: list[str], epoch_of: dict[str, int]) -> tuple[dict[int, list[str]], list, dict | None]:
        """(each epoch's ops in schedule order, the temporal epochs (groups of epochs, within each program) and
        each epoch's temporal epoch where some run together (else None))."""
        by_epoch: dict[int, list[str]] = {}
        for name in schedule:
            by_epoch.setdefault(epoch_of[name], []).append(name)
        groups = []     # temporal epochs, within each program (epoch type)
        for _, run in itertools.groupby(sorted(by_epoch), key=lambda e: self._types[by_epoch[e][0]]):
            run = list(run)
            groups += [tuple(run[k] for k in group) for group in temporal_epochs(
                self.device.arch, [frozenset({self.chips.get(by_epoch[e][0], 0)}) for e in run])]
        temporal = {e: k for k, group in enumerate(groups) for e in group} if len(groups) < len(by_epoch) else None
        return by_epoch, groups, temporal

    def cost(self, schedule: list[str], models: dict[str, OpModel], epoch_of: dict[str, int],
             prologue: dict[str, bool], dram: DramPlacement | None = None,
             limit: float = math.inf, placed: dict[str, PlacedOp] | None = None) -> PlanCost | None:
        """Estimated cycles of a plan: each epoch's cost (`pybuda.arch.perf.epoch_timing`) over the microbatch,
        plus an epoch switch between consecutive epochs; DRAM queues where `dram` places them (else assumed), ops
        where `placed` puts them (else their pipes load only the NIUs, not yet routed). None as soon as its
        epochs, in order, cost more than `limit` (a search that wants only cheaper plans)."""
        by_epoch, groups, temporal = self.grouped(schedule, epoch_of)
        epochs, spent = [], 0.0
        for group in groups:
            epochs.append(self._epoch(self.epoch_loads([name for e in group for name in by_epoch[e]], models,
                                                       epoch_of, prologue, dram, temporal, placed)))
            spent += epochs[-1].epoch_cycles
            if spent > limit:
                return None
        programs = len({self._types[by_epoch[e][0]] for e in by_epoch})   # training: run_fwd, run_bwd, run_opt
        cycles = program_cycles(self.device, ((e.epoch_cycles, 1) for e in epochs), max(0, len(epochs) - programs))
        return PlanCost(cycles, tuple(epochs), tuple(groups))

    def epoch_loads(self, names: list[str], models: dict[str, OpModel], epoch_of: dict[str, int],
                    prologue: dict[str, bool], dram: DramPlacement | None, temporal: dict[int, int] | None,
                    placed: dict[str, PlacedOp] | None) -> tuple[OpLoad, ...]:
        """The `OpLoad`s of one temporal epoch's ops `names` in a plan (`cost`'s terms), sharing DRAM reads where
        `fork_dram` lets them (`forked`)."""
        return self.forked(tuple(self.op_load(name, models[name], epoch_of, prologue,
                                              self.writes_queue(name, epoch_of), models=models, dram=dram,
                                              temporal=temporal, placed=placed) for name in names))

    def forked(self, loads: tuple[OpLoad, ...]) -> tuple[OpLoad, ...]:
        """An epoch's loads with the DRAM reads its ops can share (`pybuda.arch.movement.forked_reads`) forked
        where `fork_dram` is set (`enable_forked_dram_inputs`), else as they are."""
        if not self.fork_dram:
            return loads
        ops = [load.moving for load in loads]
        forked = with_forks(ops, forked_reads(ops))
        return tuple(load if op is load.moving else dataclasses.replace(load, moving=op)
                     for load, op in zip(loads, forked))

    def forks(self, schedule: list[str], models: dict[str, OpModel], epoch_of: dict[str, int],
              prologue: dict[str, bool], dram: DramPlacement | None,
              placed: dict[str, PlacedOp] | None) -> dict[str, tuple[tuple[str, str], ...]]:
        """{op: ((queue, reader op), ...)}: the DRAM reads each op of a plan shares (the netlist's
        `forked_dram_inputs`); none without `fork_dram`."""
        if not self.fork_dram:
            return {}
        by_epoch, groups, temporal = self.grouped(schedule, epoch_of)
        out: dict[str, tuple] = {}
        for group in groups:
            loads = self.epoch_loads([n for e in group for n in by_epoch[e]], models, epoch_of, prologue, dram,
                                     temporal, placed)
            for load in loads:
                shared = tuple((i.queue.name, i.fork) for i in load.moving.inputs if i.fork is not None)
                if shared:
                    out[load.name] = shared
        return out

    def epoch_timing(self, loads: tuple[OpLoad, ...]) -> EpochTiming:
        """The timing of one temporal epoch of `loads` over its inputs (the microbatch; one for optimizer ops),
        not kept (`cost` keeps those of the plans it costs)."""
        return epoch_timing(self.device, loads, self._inputs(loads))

    def _inputs(self, loads: tuple[OpLoad, ...]) -> int:
        return 1 if self._types.get(loads[0].name) == "optimizer" else self.microbatch

    def _epoch_streams(self, schedule: list[str], models: dict[str, OpModel], epoch_of: dict[str, int],
                       prologue: dict[str, bool]):
        """Per epoch of the plan, in order: (its ops' names, their `MovingOp`s, its pipes, their `core_streams`)."""
        by_epoch, _, temporal = self.grouped(schedule, epoch_of)
        for epoch in sorted(by_epoch):
            ops = [load.moving for load in self.forked(tuple(
                self.op_load(name, models[name], epoch_of, prologue, self.writes_queue(name, epoch_of),
                             models=models, temporal=temporal) for name in by_epoch[epoch]))]
            pipes = epoch_pipes(ops)
            yield by_epoch[epoch], ops, pipes, core_streams(ops, pipes)

    def overlays(self, schedule: list[str], models: dict[str, OpModel], epoch_of: dict[str, int],
                 prologue: dict[str, bool]) -> dict[str, int]:
        """The ops of a plan that need more stream phases than the default overlay blob holds and have the L1 for
        `EXTENDED_OVERLAY_BYTES` (what the legacy compiler gives them), with that size."""
        return {name: EXTENDED_OVERLAY_BYTES
                for _, _, _, usage in self._epoch_streams(schedule, models, epoch_of, prologue)
                for name in sorted(phase_hungry(self.device, usage))
                if name in models and overlay_fits(models[name], self.device, EXTENDED_OVERLAY_BYTES)}

    def overuse(self, schedule: list[str], models: dict[str, OpModel], epoch_of: dict[str, int],
                prologue: dict[str, bool], extend: bool = True) -> tuple[Overuse, str | None, str] | None:
        """The first per-core stream resource a plan's epochs overuse (`pybuda.arch.movement.overuses`, what the
        validator's stream rules check on its netlist) with the edge whose pipes use most of it
        (`heaviest_input`): (overuse, producer op in the same epoch or None, consumer op), or None. Ops of other
        epochs count at their `models`. An op's stream phases count against its model's overlay blob, or with
        `extend` against the extended blob where its L1 has room for it (`overlays`, given when the plan is
        finished); its stream buffers against the L1 its model's buffers leave."""
        def budget(name: str) -> CoreBudget:
            model = models.get(name)     # None: a prologue holder, not an op
            if model is None:
                return CoreBudget()
            if extend and not model.overlay_size and overlay_fits(model, self.device, EXTENDED_OVERLAY_BYTES):
                return CoreBudget(EXTENDED_OVERLAY_BYTES, model.l1_bytes)
            return CoreBudget(model.overlay_size, model.l1_bytes)

        for names, ops, pipes, usage in self._epoch_streams(schedule, models, epoch_of, prologue):
            found = overuses(self.device, usage, budget)
            if found:
                consumer, index = heaviest_input(pipes, found[0])
                src = next(o for o in ops if o.name == consumer).inputs[index].src if index >= 0 else None
                return found[0], src if src in names else None, consumer
        return None
