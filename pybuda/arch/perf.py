"""Op limiter cycles, epoch cost and program cost: the one performance model the balancer optimises and the
simulator reports (shared/reference/netlist-format.md §5.6, docs/simulator.md "Timing model").

- An op moves data per input through pipes (`pybuda.arch.movement`: from the producer cores or DRAM buffers that
  hold its inputs, onto its cores, multicast along rows and columns; its outputs into their queues) and over DRAM
  and PCIe. Its limiter cycles per input are the max of its kernel cycles and its data-movement terms: the busiest
  NoC link or NIU its pipes load, in or out (`noc_link`: the link's bytes per input from every pipe of the epoch
  that crosses it / 32 B/cycle); per core DRAM reads (writes) at up to half the device's per-core DRAM bandwidth;
  PCIe, one link per direction that paces every host reader (writer) of the epoch: a host input crosses it once
  per input however many cores read it (`pcie_in`: the epoch's distinct host queues' bytes / PCIe bandwidth),
  and every host output of the epoch crosses it (`pcie_out`: the epoch's host writes / PCIe bandwidth). A DRAM
  channel serves every per-input read and write of the epoch on the buffers it holds (`dram_channel`: the busiest
  channel an op uses, its bytes per input / the channel's bandwidth). Prologue reads and epilogue writes move
  once per epoch instead of per input, with the same per-core, per-channel and PCIe limits.
- Fork-join stall (`fork_join`): where an op's output reaches a join over two paths, the short path's buffers
  hold what the fork produced while the long path's latency runs; if they hold C inputs and the paths' latencies
  differ by D cycles, the fork cannot run more than C inputs ahead, so the join (and the epoch) runs at most one
  input per D / C cycles (Little's law over the loop fork -> long path -> join -> short path's free slots).
- An epoch (one execute of a graph over `input_count` inputs) costs fill (one input across its ops: along the
  worst dependency chain each op's limiter cycles over the output blocks it hands on one by one, one op of the
  chain taking its whole per-input cycles) + (input_count - 1) x the slowest op's limiter + prologue load +
  epilogue write-back.
- Multi-chip devices (n300): a transfer whose data sits on another chip (a queue in another chip's DRAM, a host
  queue read from a chip without the PCIe link) also crosses the chip-to-chip ethernet, which every such transfer
  of the epoch shares (`ethernet`: their bytes per input over all links' bandwidth). On wormhole, consecutive
  graphs on disjoint chips run as one temporal epoch (`temporal_epochs`), timed as one epoch of all their ops:
  a queue one writes and another reads in it streams between them.
- A program costs its epochs times their executions plus the device's epoch switch cost per change of graph.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Iterable, Sequence

from ..device import DeviceSpec
from .movement import MovingOp, channel_bytes, describe_link, epoch_pipes, link_cycles, link_ends, link_loads

LINKS = ("dram", "pcie")
LIMITERS = ("kernel", "noc_link", "dram_in", "pcie_in", "dram_out", "pcie_out", "dram_channel", "ethernet",
            "fork_join")


@dataclasses.dataclass(frozen=True, slots=True)
class Transfer:
    """Bytes one core of an op reads or writes per input over `link`; `once`: a prologue read / epilogue write,
    moved once per epoch rather than per input. A host read ("pcie" in an op's reads) names its queue (`source`)
    and the queue's bytes per input (`source_bytes`, per epoch if `once`): what crosses PCIe. A DRAM transfer
    names the channel of each buffer of its queue (`channels`, `DeviceSpec.system_channel` ids); the core's bytes
    spread evenly over them. `remote`: the data sits on another chip and crosses the chip-to-chip ethernet."""

    bytes: float
    link: str
    once: bool = False
    source: str = ""
    source_bytes: float = 0.0
    channels: tuple = ()
    remote: bool = False


@dataclasses.dataclass(frozen=True, slots=True)
class OpLoad:
    """What one op asks of the hardware per input: its kernel cycles on one of its `cores`, its DRAM and PCIe
    transfers, the op as its pipes see it (`moving`: geometry, inputs, outputs, location), the ops of the same
    epoch whose output it waits for (`preds`), and how many inputs' worth its output buffer (`out_buffer`) and
    its input buffer on each pred's edge (`in_buffers`, aligned with `preds`) hold."""

    name: str
    cores: int
    kernel_cycles: int
    reads: tuple = ()
    writes: tuple = ()
    preds: tuple = ()
    out_buffer: float = math.inf
    in_buffers: tuple = ()
    granules: int = 1
    moving: MovingOp | None = None


@dataclasses.dataclass(frozen=True)
class OpTiming:
    """Per-core, per-input cycles of one op in its epoch: each limiter term, the winning one, what its
    prologue/epilogue moves once per epoch, and the fork whose fork-join stalls it (if any) with the op's input on
    the fork-join's short path (`short_input`: the producer whose edge more buffering would free)."""

    name: str
    kernel_cycles: int
    terms: dict
    limiter: str
    limiter_cycles: float
    bw_cycles: float
    prologue_cycles: float
    prologue_bytes: int
    epilogue_cycles: float
    epilogue_bytes: int
    fork: str = ""
    short_input: str = ""
    link: str = ""          # the busiest NoC link or NIU of the op's pipes
    link_ends: tuple = ()   # its (from, to) worker cores (row, col), None where it is not at a worker core


@dataclasses.dataclass(frozen=True)
class EpochTiming:
    """One epoch: its ops' timings and the terms of its cost."""

    ops: tuple
    pipeline_cycles: float
    fill_cycles: float
    prologue_cycles: float
    epilogue_cycles: float
    epoch_cycles: float
    slowest: OpTiming | None


def host_cycles(device: DeviceSpec, loads: Sequence[OpLoad]) -> dict[str, float]:
    """PCIe cycles of the epoch's host transfers at the device's PCIe bandwidth (each direction its own): each
    distinct host queue the ops read, its bytes once per input ("pcie_in") and once per epoch for prologued ones
    ("prologue_pcie_in"); every host write of the ops, all their cores' bytes, per input ("pcie_out") and once per
    epoch ("epilogue_pcie_out"). The link carries all of them, so each host reader (writer) of the epoch is paced
    by their sum, however the cores share it."""
    queues: dict[str, dict[str, float]] = {"pcie_in": {}, "prologue_pcie_in": {}}
    writes = {"pcie_out": 0.0, "epilogue_pcie_out": 0.0}
    for load in loads:
        for t in load.reads:
            if t.link == "pcie":
                queues[_kind(t, "in")][t.source] = t.source_bytes
        for t in load.writes:
            if t.link == "pcie":
                writes[_kind(t, "out")] += load.cores * t.bytes
    totals = {**{kind: sum(q.values()) for kind, q in queues.items()}, **writes}
    return {kind: total / device.pcie_bw_bytes_per_cycle for kind, total in totals.items()}


def channel_cycles(device: DeviceSpec, loads: Sequence[OpLoad], once: bool = False,
                   pipes: Sequence | None = None) -> dict[int, float]:
    """Cycles each DRAM channel needs for the epoch's reads and writes of its buffers: per input, the tiles the
    epoch's `pipes` move to and from its buffers (`pybuda.arch.movement.channel_bytes`), else all cores of every
    op, each core's bytes spread evenly over its queue's buffers; or (`once`) the prologue reads and epilogue
    writes of one epoch (per core, spread likewise)."""
    if pipes is not None and not once:
        served = channel_bytes([load.moving for load in loads], pipes)
        return {ch: b / device.dram_channel_bw_bytes_per_cycle for ch, b in served.items()}
    load_bytes: dict[int, float] = {}
    for load in loads:
        for t in (*load.reads, *load.writes):
            if t.link == "dram" and t.once == once:
                for ch in t.channels:
                    load_bytes[ch] = load_bytes.get(ch, 0.0) + load.cores * t.bytes / len(t.channels)
    return {ch: b / device.dram_channel_bw_bytes_per_cycle for ch, b in load_bytes.items()}


def ethernet_cycles(device: DeviceSpec, loads: Sequence[OpLoad], once: bool = False) -> float:
    """Cycles the chip-to-chip links need for the epoch's remote transfers (all cores of every op; a host read
    crosses once per queue): per input, or (`once`) the prologue reads and epilogue writes of one epoch. A device
    without chip-to-chip links (grayskull: chips talk through the host) gets none."""
    total, hosts = 0.0, {}
    for load in loads:
        for t in (*load.reads, *load.writes):
            if t.remote and t.once == once:
                if t.source:
                    hosts[t.source] = t.source_bytes
                else:
                    total += load.cores * t.bytes
    total += sum(hosts.values())
    links = device.chip_link_bw_bytes_per_cycle
    return total / links if total and links else 0.0   # no chip links (grayskull): not modelled


def noc_cycles(device: DeviceSpec, loads: Sequence[OpLoad], pipes: Sequence) -> dict[str, tuple[float, str, tuple]]:
    """Per op, (cycles per input, link, its ends) of the busiest NoC link or NIU the epoch's `pipes` load
    (`pybuda.arch.movement`: every pipe of the epoch summed per link)."""
    ops = [load.moving for load in loads if load.moving is not None]
    if not ops:
        return {}
    totals, touched = link_loads(device, ops, pipes)
    out = {}
    for name, links in touched.items():
        cycles, link = link_cycles(device, totals, links)
        out[name] = (cycles, *((describe_link(device, link), link_ends(device, link)) if link is not None
                               else ("", ())))
    return out


@dataclasses.dataclass(frozen=True)
class EpochLinks:
    """What the epoch's ops share: PCIe cycles of the host transfers (`host_cycles`), DRAM channel cycles per
    input (`channels`) and once per epoch (`once_channels`), chip-to-chip cycles per input (`ethernet`) and once
    per epoch (`once_ethernet`), and each op's busiest NoC link (`noc`, `noc_cycles`)."""

    host: dict
    channels: dict
    once_channels: dict
    ethernet: float = 0.0
    once_ethernet: float = 0.0
    noc: dict = dataclasses.field(default_factory=dict)

    @classmethod
    def of(cls, device: DeviceSpec, loads: Sequence[OpLoad]) -> "EpochLinks":
        """What the epoch's ops share; the pipes (`pybuda.arch.movement.epoch_pipes`) where every op states how
        its data moves."""
        moving = all(load.moving is not None for load in loads)
        pipes = epoch_pipes([load.moving for load in loads]) if moving else None
        return cls(host_cycles(device, loads),
                   channel_cycles(device, loads, pipes=pipes), channel_cycles(device, loads, once=True),
                   ethernet_cycles(device, loads), ethernet_cycles(device, loads, once=True),
                   noc_cycles(device, loads, pipes) if pipes is not None else {})


def _kind(t: Transfer, direction: str) -> str:
    once = ("prologue_" if direction == "in" else "epilogue_") if t.once else ""
    return f"{once}{t.link}_{direction}"


def op_timing(load: OpLoad, links: EpochLinks, device: DeviceSpec) -> OpTiming:
    """Limiter cycles of one op given what its epoch's ops share (`EpochLinks`): a core reads (writes) DRAM at up
    to half the device's per-core DRAM bandwidth, its queue's channels shared with the epoch's other transfers."""
    core_dram_bw = device.dram_bw_bytes_per_cycle / 2
    terms: dict[str, float] = {"kernel": float(load.kernel_cycles)}
    once_cycles = {"in": 0.0, "out": 0.0}
    once_bytes = {"in": 0, "out": 0}
    once_channel = {"in": 0.0, "out": 0.0}
    once_host = {"in": 0.0, "out": 0.0}
    link, ends = "", ()
    if load.name in links.noc:
        terms["noc_link"], link, ends = links.noc[load.name]
    for direction, transfers in (("in", load.reads), ("out", load.writes)):
        for t in transfers:
            kind = _kind(t, direction)
            host = t.link == "pcie"
            cycles = 0.0 if host else t.bytes / core_dram_bw
            if t.once:
                once_bytes[direction] += int(t.bytes)
                once_cycles[direction] += cycles
                once_channel[direction] = max([once_channel[direction], *(links.once_channels[c] for c in t.channels)])
                if t.remote:    # 0 without chip links
                    once_channel[direction] = max(once_channel[direction], links.once_ethernet)
                if host:
                    once_host[direction] = links.host[kind]
                continue
            terms[kind] = links.host[kind] if host else max(terms.get(kind, 0.0), cycles)
            if t.remote and links.ethernet:
                terms["ethernet"] = links.ethernet
            if t.channels:
                terms["dram_channel"] = max([terms.get("dram_channel", 0.0),
                                             *(links.channels.get(c, 0.0) for c in t.channels)])
    once_cycles = {d: max(once_cycles[d], once_host[d], once_channel[d]) for d in once_cycles}
    limiter = max(LIMITERS, key=lambda name: (terms.get(name, -1.0), -LIMITERS.index(name)))
    bw = max((v for key, v in terms.items() if key != "kernel"), default=0.0)
    return OpTiming(name=load.name, kernel_cycles=load.kernel_cycles, terms=terms, limiter=limiter,
                    limiter_cycles=terms[limiter], bw_cycles=bw, prologue_cycles=once_cycles["in"],
                    prologue_bytes=once_bytes["in"], epilogue_cycles=once_cycles["out"],
                    epilogue_bytes=once_bytes["out"], link=link if limiter == "noc_link" else "",
                    link_ends=ends if limiter == "noc_link" else ())


def epoch_timing(device: DeviceSpec, loads: Sequence[OpLoad], input_count: int) -> EpochTiming:
    """Cost of one execute of an epoch of `loads` over `input_count` inputs."""
    if not loads:
        return EpochTiming(ops=(), pipeline_cycles=0.0, fill_cycles=0.0, prologue_cycles=0.0, epilogue_cycles=0.0,
                           epoch_cycles=0.0, slowest=None)
    links = EpochLinks.of(device, loads)
    ops = tuple(op_timing(load, links, device) for load in loads)
    cycles = {o.name: o.limiter_cycles for o in ops}
    latency = {load.name: o.limiter_cycles / load.granules for load, o in zip(loads, ops)}
    order = _topological(loads)
    fill = _fill(loads, cycles, latency, order)
    stalls = fork_join_stalls(loads, latency, order)
    ops = tuple(_stalled(o, *stalls[o.name]) if o.name in stalls else o for o in ops)
    slowest = max(ops, key=lambda o: o.limiter_cycles)
    prologue = max(o.prologue_cycles for o in ops)
    epilogue = max(o.epilogue_cycles for o in ops)
    epoch = fill + (input_count - 1) * slowest.limiter_cycles + prologue + epilogue
    return EpochTiming(ops=ops, pipeline_cycles=slowest.limiter_cycles, fill_cycles=fill, prologue_cycles=prologue,
                       epilogue_cycles=epilogue, epoch_cycles=epoch, slowest=slowest)


def _stalled(op: OpTiming, cycles: float, fork: str, short_input: str) -> OpTiming:
    """`op` with its fork-join stall as a limiter term."""
    terms = {**op.terms, "fork_join": cycles}
    if cycles <= op.limiter_cycles:
        return dataclasses.replace(op, terms=terms)
    return dataclasses.replace(op, terms=terms, limiter="fork_join", limiter_cycles=cycles, fork=fork,
                               short_input=short_input)


def fork_join_stalls(loads: Sequence[OpLoad], latency: dict[str, float],
                     order: list[str] | None) -> dict[str, tuple[float, str, str]]:
    """Per join op: the cycles per input its slowest fork-join allows, that fork and the join's input (producer)
    on that fork-join's short path. For a fork F and two of
    the join's edges a, b reached from F: (longest latency F -> a) - (shortest latency F -> b), over the inputs'
    worth the short path holds (F's output buffer, then each op's input and output buffers along it, the
    join's input buffer on b). Latency: each op's after F (`latency`, as the fill counts it). `order`: the ops in
    dependency order (None: the dependencies have a cycle; no stall is computed)."""
    if order is None:
        return {}
    names = {load.name for load in loads}
    users: dict[str, list[tuple[str, float]]] = {}
    for load in loads:
        caps = (*load.in_buffers, *(math.inf,) * (len(load.preds) - len(load.in_buffers)))
        for pred, cap in zip(load.preds, caps):
            if pred in names and pred != load.name:
                users.setdefault(pred, []).append((load.name, cap))
    out_buffer = {load.name: load.out_buffer for load in loads}
    stalls: dict[str, tuple[float, str, str]] = {}
    for position, fork in enumerate(order):
        if len({u for u, _ in users.get(fork, ())}) < 2:
            continue
        longest = {fork: 0.0}
        shortest = {fork: (0.0, out_buffer[fork])}    # (latency, inputs held) of the quickest path
        arrivals: dict[str, dict[str, tuple[float, float, float]]] = {}  # join -> pred -> (longest, shortest, held)
        for name in order[position:]:
            if name not in longest:
                continue
            for user, cap in users.get(name, ()):
                short_latency, held = shortest[name]
                edges = arrivals.setdefault(user, {})
                edges[name] = (longest[name], short_latency, max(held + cap, edges.get(name, (0, 0, 0))[2]))
                lat = latency[user]
                longest[user] = max(longest.get(user, 0.0), longest[name] + lat)
                candidate = (short_latency + lat, held + cap + out_buffer[user])
                if user not in shortest or candidate[0] < shortest[user][0]:
                    shortest[user] = candidate
        for join, by_pred in arrivals.items():
            if len(by_pred) < 2:
                continue
            edges = list(by_pred.items())
            worst, short = max((((la - sb) / hb, b) for a, (la, _, _) in edges
                                for b, (_, sb, hb) in edges if a != b and hb > 0), default=(0.0, ""))
            if worst > stalls.get(join, (0.0, "", ""))[0]:
                stalls[join] = (worst, fork, short)
    return stalls


def _in_epoch_preds(loads: Sequence[OpLoad]) -> dict[str, set[str]]:
    names = {load.name for load in loads}
    return {load.name: {p for p in load.preds if p in names and p != load.name} for load in loads}


def _topological(loads: Sequence[OpLoad]) -> list[str] | None:
    """The epoch's ops in dependency order (preds first), None if the dependencies have a cycle."""
    preds = _in_epoch_preds(loads)
    order: list[str] = []
    done: set[str] = set()
    remaining = [load.name for load in loads]
    while remaining:
        waiting = [n for n in remaining if not preds[n] <= done]
        ready = [n for n in remaining if preds[n] <= done]
        if not ready:
            return None
        order += ready
        done.update(ready)
        remaining = waiting
    return order


def _fill(loads: Sequence[OpLoad], cycles: dict[str, float], latency: dict[str, float],
          order: list[str] | None) -> float:
    """One input's time across the epoch: the largest, over dependency chains, of the ops' latencies with one op
    of the chain (the one that gains most) taking its whole per-input cycles instead; the slowest op alone if the
    dependencies have a cycle."""
    if order is None:
        return max(cycles.values())
    preds = _in_epoch_preds(loads)
    partial: dict[str, float] = {}     # chains ending at the op, every op at its latency
    whole: dict[str, float] = {}       # ... with one op at its whole per-input cycles
    for n in order:
        before = max((partial[p] for p in preds[n]), default=0.0)
        partial[n] = latency[n] + before
        whole[n] = max(cycles[n] + before, latency[n] + max((whole[p] for p in preds[n]), default=-math.inf))
    return max(whole.values())


def temporal_epochs(arch: str, chips: Sequence[frozenset]) -> list[list[int]]:
    """The temporal epochs of a program's consecutive graphs on `chips` (each graph's set of chips), as indices
    into them: on wormhole, consecutive graphs on disjoint chips run together as one temporal epoch (the
    backend's `merge_non_overlapping_adjacent_temporal_epochs`); on grayskull each graph is its own."""
    groups: list[list[int]] = []
    used: set = set()
    for k, devices in enumerate(chips):
        if groups and arch != "grayskull" and not used & devices:
            groups[-1].append(k)
            used |= devices
        else:
            groups.append([k])
            used = set(devices)
    return groups


def program_cycles(device: DeviceSpec, epochs: Iterable[tuple[float, int]], switches: int) -> int:
    """Cycles of a program run: each (epoch cycles, executions) plus `switches` epoch switches."""
    total = sum(cycles * executions for cycles, executions in epochs) + switches * device.epoch_switch_cycles
    return int(math.ceil(total))
