"""Epochs as contiguous segments of the schedule (pybuda-balancer.md §8.5, §8.6): for every segment, what its
ops cost on the core grid at each pipeline rate, and the cheapest split of the schedule into segments.

Per op and epoch context (which producers ran in earlier epochs, whether a later epoch reads its output), every
candidate has its limiter cycles and latency alone in such an epoch, the DRAM bytes it moves per input and its
prologue bytes (`PlanCoster.context_cost`, queues spread over every channel): lower bounds of what it costs in any
real epoch of that context. On a geometric grid of pipeline cycles P (ratio `RATIO`), each op's plan candidate
at P_b is its fewest-core one within P_b (`UNFIT` cores where none is). A segment's ops fit at P_b when those
cores sum to at most the grid's.

An epoch costs fill + (inputs - 1) x pipeline + prologue (+ an epoch switch between epochs of one program,
`pybuda.arch.perf`); inputs is the microbatch, one for a training graph's optimizer epochs. For a segment:
- `split(bound=True)`, the lower bound: the cheapest over the grid values P_b from the first bin its ops fit in
  (the ops' cores counted along disjoint chains of producer and consumer at their fewest over the streamings that
  let each op of a chain read the one before it in the epoch, `_chained`) of: the pipeline at least the lower
  edge of P_b's bin, the ops' DRAM bytes over all channels' bandwidth, the largest host input and the sum of the
  host outputs over PCIe; the fill at least the pipeline and the longest dependency chain of the ops' least
  latencies (one op at its least cycles); the prologue bytes over all channels' bandwidth; each op's DRAM and
  prologue bytes its fewest among its candidates within P_b. A plan's epoch whose pipeline lies in P_b's bin has
  every op at a candidate within P_b, so the bound is valid for any plan with contiguous epochs whose in-epoch
  edges are streaming-compatible: it relaxes geometry, the edges between chains, channel placement and fork-join
  stalls. The segments of the cheapest split are then tightened (`_room_fill`; the split made again until it
  keeps its segments or `TIGHT_OPS` ops' worth are): each op's latency and cycles the least of its candidates
  within P_b that fit the room the segment's other ops leave it at their fewest cores, which also raises the
  pipeline to the slowest such op. A split of partly tightened segments still bounds every plan (a segment's
  untightened cost is below its tightened one).
- `split(bound=False)`, the plan: the same terms with each op at its plan candidate, at the grid value that
  makes the segment cheapest. With `chains` (the default) the ops' cores are counted along the chains too, each
  op among its candidates that move no more DRAM bytes than its fewest-core one within the grid value (whose
  bytes the split counts), and the choice of candidates is read back along the chains (`_chain_choice`), so
  that each op can read its chain's producer in the epoch; without, each op is at its own fewest cores. Its
  choice of candidates is the balancer's starting plan. Each op is costed in its context as it joins the
  segment: one whose readers all come later writes its output to DRAM there. `cuttable` (the default) holds it
  to that context: it must reach the segment's pipeline writing to DRAM, and the fill keeps its cycles there, so
  the segment could be cut after any op without a DRAM write setting a slower pace (a cautious split: it keeps
  grids small, and the split does not see the stream-phase limits large grids run into). Without it, an op
  whose last reader joins is on chip: where it reaches a grid value only so, the fill takes its on-chip cycles.
"""
from __future__ import annotations

import dataclasses
import itertools
import math

import numpy as np

from ..device import DeviceSpec
from ..ir import epoch_types
from .candidates import Candidate, op_signature
from .op_model import BalancerError
from .plan_cost import PlanCoster
from .streaming import edge_problem

RATIO = 1.02
UNFIT = 1e9          # "cores" of an op that cannot reach a grid value (finite, so sums stay exact)
UNFIT_COST = 1e30    # its cycles and bytes there (finite, so differences stay defined)
TIGHT_OPS = 10000    # the bound's tightening (`SegmentTable._tightened`) stops after this many ops' worth


@dataclasses.dataclass(frozen=True)
class Segment:
    """Schedule positions first..last in one epoch at pipeline cycles `pipeline` (the plan: each op's
    candidate index in `choice`) and its estimated cost."""

    first: int
    last: int
    pipeline: float
    cycles: float
    choice: tuple = ()


@dataclasses.dataclass(frozen=True)
class Split:
    """A split of the schedule into segments and its cost (cycles for one run of the microbatch)."""

    segments: tuple
    cycles: float


@dataclasses.dataclass(frozen=True)
class _OpBins:
    """One op in one context: per grid value its plan candidate's cores (UNFIT: none), index, cycles, latency,
    DRAM and prologue bytes; the least of each over all its candidates; per grid value the fewest DRAM and
    prologue bytes of its candidates within it (`UNFIT_COST`: none); and its plan candidate's DRAM and prologue
    bytes where it has one, else 0 (`fit_dram`, `fit_prologue`: its unfitness is counted apart, an `UNFIT_COST`
    in a running sum would swamp the others' bytes)."""

    cores: np.ndarray
    index: np.ndarray
    cycles: np.ndarray
    latency: np.ndarray
    dram: np.ndarray
    prologue: np.ndarray
    least_cycles: float
    least_latency: float
    least_host_in: float
    least_host_out: float
    lean_dram: np.ndarray
    lean_prologue: np.ndarray
    fit_dram: np.ndarray = dataclasses.field(init=False)
    fit_prologue: np.ndarray = dataclasses.field(init=False)

    def __post_init__(self):
        object.__setattr__(self, "fit_dram", np.where(self.cores < UNFIT, self.dram, 0.0))
        object.__setattr__(self, "fit_prologue", np.where(self.cores < UNFIT, self.prologue, 0.0))


class SegmentTable:
    """The schedule's ops with their candidates and context costs on one device. Ops of one signature (a
    transformer's layers) share their context costs, unless an override names them (`named`)."""

    def __init__(self, schedule: list[str], candidates: dict[str, list[Candidate]], coster: PlanCoster,
                 device: DeviceSpec, microbatch: int, breaks: set[str] = frozenset(),
                 named: frozenset = frozenset()):
        self.schedule, self.candidates, self.coster = schedule, candidates, coster
        self.device, self.microbatch = device, microbatch
        self.position = {n: i for i, n in enumerate(schedule)}
        graph = coster.graph
        self.producers = [sorted({self.position[o.src] for o in graph.operands(n) if o.src in self.position})
                          for n in schedule]
        self.last_user = [max((self.position[u] for u, _ in graph.users(n) if u in self.position), default=-1)
                          for n in schedule]
        self.breaks = {self.position[n] for n in breaks if n in self.position}
        n = len(schedule)
        types = epoch_types(graph)
        # inputs per execute of a segment starting at op i (optimizer epochs run once per step); a segment that
        # starts a training program's epochs pays no epoch switch (each program starts afresh)
        self.inputs = [1 if types[n] == "optimizer" else microbatch for n in schedule]
        self.program_start = {i for i in range(1, len(schedule)) if types[schedule[i]] != types[schedule[i - 1]]}
        self.cores = device.cores
        self.dram_bw = device.dram_channels * device.dram_channel_bw_bytes_per_cycle
        self._contexts: dict[tuple, tuple] = {}
        kinds: dict[tuple, int] = {}     # an op's kind as a small number (keys stay cheap to hash)
        self._kinds = [kinds.setdefault((op_signature(graph, n), n if n in named else None), len(kinds))
                       for n in schedule]
        self._operand_positions = [[(k, self.position.get(o.src, n)) for k, o in enumerate(graph.operands(name))]
                                   for name in schedule]
        # operands read through a DRAM queue in the epoch (`insert_queues`): no streaming constraint between them
        self._queued = [tuple(k for k, o in enumerate(graph.operands(name)) if (o.src, name, k) in coster.queued)
                        for name in schedule]
        self._bins: dict[tuple, _OpBins] = {}             # per op context (`_context_key`) and output context
        self._bins_at: dict[tuple, _OpBins] = {}          # the same per (op, epoch start, output context)
        self._streams: dict[tuple, tuple] = {}
        self._links: dict[tuple, np.ndarray] = {}
        self._windows: dict[tuple, list] = {}
        self._window_of: dict[tuple, tuple] = {}   # `_window` per (start, breaks)
        self._earlier: dict[tuple, tuple] = {}     # per (op, epoch start), its operands from earlier epochs
        self._from: dict[tuple, list] = {}      # `_segments_from` per (bound, chains, cuttable, breaks, start)
        lo = min(self._context(i, -1, False)[0].min() for i in range(n))
        hi = max(self._context(i, n, True)[0].max() for i in range(n))
        lo, hi = max(lo, 1.0), max(hi, lo * RATIO)
        self.grid = lo * RATIO ** np.arange(int(math.ceil(math.log(hi / lo) / math.log(RATIO))) + 2)
        self._edges = np.concatenate(([0.0], self.grid[:-1]))   # the lower edge of each grid value's bin

    def _context_key(self, i: int, start: int, out: bool) -> tuple:
        """What op i's costs in an epoch starting at `start` depend on: its kind, which of its operands come from
        earlier epochs, whether a later epoch reads its output."""
        earlier = self._earlier.get((i, start))
        if earlier is None:
            earlier = self._earlier[i, start] = tuple(k for k, p in self._operand_positions[i] if p < start)
        return (self._kinds[i], earlier, out)

    def _context(self, i: int, start: int, out: bool) -> tuple:
        """(cycles, latency, dram bytes, host input bytes, host output bytes, prologue bytes) per candidate of op i
        in a segment starting at `start`, its output read by a later epoch if `out`."""
        key = self._context_key(i, start, out)
        if key not in self._contexts:
            name = self.schedule[i]
            dram = frozenset(self.schedule[p] for p in self.producers[i] if p < start)
            costs = [self.coster.context_cost(name, c.model, dram, out) for c in self.candidates[name]]
            self._contexts[key] = tuple(np.array([getattr(c, f) for c in costs])
                                        for f in ("cycles", "latency", "dram_bytes", "host_in_bytes", "host_out_bytes",
                                                  "prologue_bytes"))
        return self._contexts[key]

    def _either(self, i: int, start: int, field: int) -> np.ndarray:
        """Per candidate of op i, the least of `_context` term `field` (0: cycles, 1: latency) over both output
        contexts of an epoch starting at `start`."""
        return np.minimum(self._context(i, start, True)[field], self._context(i, start, False)[field])

    def context_cycles(self, i: int, start: int, out: bool) -> list[float]:
        """Limiter cycles of each candidate of op i in an epoch starting at `start`, its output read by a later
        epoch if `out`."""
        return list(self._context(i, start, out)[0])

    def context_dram_cycles(self, i: int, start: int, out: bool) -> list[float]:
        """Per candidate of op i in that context: its DRAM bytes per input over the bandwidth of all channels (an
        epoch's pipeline cycles are at least the sum of its ops')."""
        return list(self._context(i, start, out)[2] / self.dram_bw)

    def _op_bins(self, i: int, start: int, out: bool | None) -> _OpBins:
        """Op i's bins in an epoch starting at `start`, its output read by a later epoch if `out`; `out` None:
        the least of both (the bound's)."""
        at = (i, start, out)
        if at not in self._bins_at:
            key = (self._context_key(i, start, False), out)
            if key not in self._bins:
                self._bins[key] = self._both_bins(i, start) if out is None else self._new_bins(i, start, out)
            self._bins_at[at] = self._bins[key]
        return self._bins_at[at]

    def _both_bins(self, i: int, start: int) -> _OpBins:
        """Op i's bins with each term the least of both output contexts'."""
        a, b = self._op_bins(i, start, True), self._op_bins(i, start, False)
        return dataclasses.replace(
            a, cores=np.minimum(a.cores, b.cores), least_cycles=min(a.least_cycles, b.least_cycles),
            least_latency=min(a.least_latency, b.least_latency), least_host_out=min(a.least_host_out, b.least_host_out),
            lean_dram=np.minimum(a.lean_dram, b.lean_dram), lean_prologue=np.minimum(a.lean_prologue, b.lean_prologue))

    def _new_bins(self, i: int, start: int, out: bool) -> _OpBins:
        """Op i's bins in one output context."""
        cycles, latency, dram, host_in, host_out, prologue = self._context(i, start, out)
        cores = np.array([c.cores for c in self.candidates[self.schedule[i]]], dtype=float)
        masked = np.where(cycles[None, :] <= self.grid[:, None], cores[None, :], UNFIT)
        index = masked.argmin(axis=1)
        fits = masked.min(axis=1)
        unfit = fits >= UNFIT
        pick = lambda values: np.where(unfit, UNFIT_COST, values[index])  # noqa: E731
        return _OpBins(fits, np.where(unfit, -1, index), pick(cycles), pick(latency), pick(dram), pick(prologue),
                       float(cycles.min()), float(latency.min()), float(host_in.min()), float(host_out.min()),
                       self._leanest(cycles, dram), self._leanest(cycles, prologue))

    def _leanest(self, cycles: np.ndarray, values: np.ndarray) -> np.ndarray:
        """Per grid value, the least of `values` over the candidates whose `cycles` are within it (`UNFIT_COST`:
        none)."""
        order = np.argsort(cycles, kind="stable")
        least = np.minimum.accumulate(values[order])
        last = np.searchsorted(cycles[order], self.grid, side="right") - 1
        return np.where(last >= 0, least[np.maximum(last, 0)], UNFIT_COST)

    def _stream_cores(self, i: int, start: int, plan: bool = False) -> tuple[tuple, np.ndarray]:
        """Op i's output streamings and, per streaming and grid value (rows: streamings, so that the least over
        them is a fast reduction), the fewest cores of its candidates that stream so within that grid value in an
        epoch starting at `start` (either output context; inf: none).
        `plan`: only candidates that move no more DRAM bytes per input than the op's fewest-core candidate
        within the grid value (`_op_bins`, whose bytes the plan's split counts)."""
        key = (self._context_key(i, start, False), plan)
        if key not in self._streams:
            cycles = self._either(i, start, 0)
            within = cycles[None, :] <= self.grid[:, None]
            if plan:
                dram = self._context(i, start, False)[2]
                within &= dram[None, :] <= self._op_bins(i, start, False).dram[:, None]
            cands = self.candidates[self.schedule[i]]
            streams = tuple(sorted({c.model.t_stream for c in cands}))
            cores = np.full((len(streams), len(self.grid)), np.inf)
            for j, c in enumerate(cands):
                k = streams.index(c.model.t_stream)
                cores[k] = np.where(within[:, j], np.minimum(cores[k], c.cores), cores[k])
            self._streams[key] = (streams, cores)
        return self._streams[key]

    def _link(self, p: int, c: int, start: int) -> tuple[np.ndarray, tuple]:
        """Which output streamings of producer p consumer c can read in an epoch starting at `start`
        (`streaming.edge_problem`): per streaming of p and of c, 0 where it can, else inf; and the streamings of c
        grouped by the streamings of p they can read: ((those of p, those of c), ...)."""
        reads = tuple(k for k, q in self._operand_positions[c] if q == p)
        key = (self._context_key(p, start, False), self._context_key(c, start, False), reads)
        if key not in self._links:
            sp, sc = self._stream_cores(p, start)[0], self._stream_cores(c, start)[0]
            link = np.array([[0.0 if all(self._reads(c, k, a, b) for k in reads) else np.inf for b in sc]
                             for a in sp])
            groups: dict[tuple, list[int]] = {}
            for b in range(len(sc)):
                groups.setdefault(tuple(np.flatnonzero(link[:, b] == 0.0)), []).append(b)
            self._links[key] = (link, tuple((np.array(a), np.array(b)) for a, b in groups.items() if a))
        return self._links[key]

    def _chained(self, p: int, c: int, start: int, tail: np.ndarray, lo: int, plan: bool = False) -> np.ndarray:
        """A chain of ops ending at producer p (`tail`: its fewest cores per streaming of p and grid value)
        extended by consumer c: the fewest cores per streaming of c and grid value (`_stream_cores`), each op
        streaming so that the next can read it in the epoch (`_link`); inf below grid value `lo` (the segment
        does not fit there anyway)."""
        own = self._stream_cores(c, start, plan)[1]
        chained = np.full(own.shape, np.inf)
        for readable, readers in self._link(p, c, start)[1]:
            least = tail[readable[0], lo:] if len(readable) == 1 else tail[readable, lo:].min(axis=0)
            chained[readers, lo:] = own[readers, lo:] + least
        return chained

    def _reads(self, c: int, k: int, producer_stream: tuple, consumer_stream: tuple) -> bool:
        """Whether op c can read operand k, streamed as `producer_stream`, in its epoch when streaming as
        `consumer_stream`."""
        return edge_problem(self.coster.graph, self.schedule[c], k, producer_stream, consumer_stream) is None

    def _chain_of(self, t: int, s: int, tails: dict) -> int | None:
        """The producer whose chain op t extends in the bound of a segment starting at s: its first producer in
        the segment that no other op extended yet, read without a DRAM queue (None: t starts a chain)."""
        for k, p in self._operand_positions[t]:
            if s <= p < t and p in tails and not any(q == p for j, q in self._operand_positions[t]
                                                     if j in self._queued[t]):
                return p
        return None

    def _extend_chain(self, t: int, s: int, tails: dict, lo: int, plan: bool) -> tuple[int | None, np.ndarray | None]:
        """Op t joins the chains of a segment starting at s (`tails`: each chain's last op -> its fewest cores per
        streaming and grid value, updated): it extends the chain of producer p (`_chain_of`) or starts one.
        Returns p and the chain's cores before (None, None: a new chain)."""
        p = self._chain_of(t, s, tails)
        if p is None:
            tails[t] = self._stream_cores(t, s, plan)[1]
            return None, None
        tail = tails.pop(p)
        tails[t] = self._chained(p, t, s, tail, lo, plan)
        return p, tail

    def _window(self, s: int, breaks: frozenset) -> tuple:
        """What the segments starting at s depend on, relative to s: per op that could join them, its context
        key, its producers' and last reader's offsets and whether it starts an epoch (`breaks`: the positions
        that do). Starts at the same offset in repeated blocks (a transformer's layers) share it."""
        if (s, breaks) not in self._window_of:
            self._window_of[s, breaks] = self._new_window(s, breaks)
        return self._window_of[s, breaks]

    def _new_window(self, s: int, breaks: frozenset) -> tuple:
        """`_window`, computed."""
        n = len(self.schedule)
        end = min(n, s + self.cores)
        return (self.inputs[s], tuple(
            (self._context_key(t, s, False), tuple((k, p - s) for k, p in self._operand_positions[t] if s <= p < n),
             self._queued[t], min(self.last_user[t], end) - s, t in breaks and t > s) for t in range(s, end)))

    def _segments_from(self, s: int, bound: bool, chains: bool, cuttable: bool,
                       breaks: frozenset) -> list[tuple[int, int, float, float]]:
        """For every end t >= s while the ops could fit one grid and no position of `breaks` starts an epoch
        within: (t, grid value index, cost, pipeline) of the cheapest grid value for segment s..t (the bound's or
        the plan's terms, module docstring); computed once per window (`_window`), kept per start."""
        at = (bound, chains, cuttable, breaks, s)
        if at not in self._from:
            key = (bound, chains, cuttable, self._window(s, breaks))
            found = self._windows.get(key)
            if found is None:
                costs = self._bound_costs(s, breaks) if bound else self._costs(s, False, chains, breaks, cuttable)
                found = self._windows[key] = [(t - s, b, cost, pipeline) for t, b, cost, pipeline in costs]
            self._from[at] = [(s + dt, b, cost, pipeline) for dt, b, cost, pipeline in found]
        return self._from[at]

    def _bound_costs(self, s: int, breaks: frozenset):
        """`_segments_from` for the bound, from `_costs`' terms."""
        mb = self.inputs[s]
        for t, first, pipeline, prologue, fill, _ in self._costs(s, True, True, breaks):
            cost = (mb - 1) * pipeline + np.maximum(pipeline, fill) + prologue
            b = int(np.argmin(cost))
            yield t, first + b, float(cost[b]), float(pipeline[b])

    def _tightened(self, s: int, t: int, breaks: frozenset) -> tuple[int, float, float]:
        """The bound's (grid value index, cost, pipeline) of segment s..t with its fill and pipeline at least
        `_room_fill`'s."""
        *_, (_, first, pipeline, prologue, fill, area) = itertools.islice(self._costs(s, True, True, breaks),
                                                                          t - s + 1)
        room_fill, slowest = self._room_fill(s, t, first, area)
        pipeline = np.maximum(pipeline, slowest)
        cost = (self.inputs[s] - 1) * pipeline + np.maximum(pipeline, np.maximum(fill, room_fill)) + prologue
        b = int(np.argmin(cost))
        return first + b, float(cost[b]), float(pipeline[b])

    def _room_fill(self, s: int, t: int, lo: int, area: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per grid value from `lo` on (segment s..t's first that fits; `area`: its fewest cores along chains
        there, `_costs`), the fill's lower bound and the slowest op's cycles with each op at a candidate within
        the grid value and within the room the segment's other ops leave it. Op i's room: the grid's cores less
        the others' fewest (all ops at their fewest, `_op_bins`), at most the grid's less the segment's fewest
        along chains plus i's fewest of the streaming it takes, at most its largest over its streamings. Valid
        for any plan's epoch s..t whose pipeline lies in that grid value's bin: its ops' cores sum to at most
        the grid's, and its streamings are one of the chains' choices."""
        grid = self.grid[lo:]
        own = np.array([self._op_bins(i, s, None).cores[lo:] for i in range(s, t + 1)])
        free = self.cores - own.sum(axis=0)
        partial: dict[int, np.ndarray] = {}
        whole: dict[int, np.ndarray] = {}
        fill = np.zeros(len(grid))
        slowest = np.zeros(len(grid))
        for k, i in enumerate(range(s, t + 1)):
            streams = self._stream_cores(i, s)[1][:, lo:]
            largest = np.where(np.isfinite(streams), streams, -math.inf).max(axis=0)
            room = np.minimum(own[k] + free, self.cores - area + largest)
            cands = self.candidates[self.schedule[i]]
            cycles, latency = self._either(i, s, 0), self._either(i, s, 1)
            ok = (cycles[:, None] <= grid[None, :]) & \
                (np.array([c.cores for c in cands])[:, None] <= room[None, :])
            lat = np.where(ok, latency[:, None], math.inf).min(axis=0)
            cyc = np.where(ok, cycles[:, None], math.inf).min(axis=0)
            slowest = np.maximum(slowest, cyc)
            preds = [p for p in self.producers[i] if p >= s]
            fill = np.maximum(fill, _fill_step(partial, whole, i, preds, lat, cyc, len(grid)))
        return fill, slowest

    def _costs(self, s: int, bound: bool, chains: bool, breaks: frozenset, cuttable: bool = True):
        """`_segments_from`, computed: the ops' cores counted along streaming chains (the bound always), or
        each op at its own fewest; the plan's ops held to the context they join in (`cuttable`) or not. The
        bound's as its terms per segment s..t: (t, the first grid value it fits, from there on its pipeline and
        prologue cycles, its fill from the ops' least latencies, from there on its cores along chains: a view,
        valid until the generator resumes)."""
        n = len(self.schedule)
        mb = self.inputs[s]
        area = np.zeros(len(self.grid))
        dram = np.zeros(len(self.grid))
        prologue = np.zeros(len(self.grid))
        host_in = host_out = 0.0     # bytes per input over PCIe: the largest host input, every host output
        partial: dict[int, np.ndarray | float] = {}   # dependency chains ending at an op, every op at its latency
        whole: dict[int, np.ndarray | float] = {}     # ... one op of the chain at its whole cycles
        fill = 0.0
        flips: dict[int, list[int]] = {}
        unfit = np.zeros(len(self.grid))    # the plan's ops, in their context, with no candidate within a grid value
        tails: dict[int, np.ndarray] = {}   # the chains: last op -> fewest cores per streaming and grid value
        first = 0                           # the first grid value the segment fits (it only grows)
        for t in range(s, min(n, s + self.cores)):
            if t in breaks and t > s:
                return
            for i in flips.pop(t, []):      # op i's last reader is now inside: its output stays on chip
                was, now = self._op_bins(i, s, True), self._op_bins(i, s, False)
                area = area if chains else area + now.cores - was.cores
                dram = dram + now.fit_dram - was.fit_dram
                prologue = prologue + now.fit_prologue - was.fit_prologue
                unfit = unfit + (now.cores >= UNFIT) - (0 if cuttable else was.cores >= UNFIT)
            out = self.last_user[t] > t
            ob = self._op_bins(t, s, None if bound else out)   # the bound: the op's least over both contexts
            if out and not bound:
                flips.setdefault(self.last_user[t], []).append(t)
            if not chains:
                area = area + ob.cores
            else:       # the chain's fewest cores replace its tail's (rows below `first` never fit again)
                _, tail = self._extend_chain(t, s, tails, first, not bound)
                area[first:] += _least(tails[t][:, first:]) - (0.0 if tail is None else _least(tail[:, first:]))
            if area[-1] > self.cores:
                return
            first = int(np.argmax(area <= self.cores))
            host_in = max(host_in, ob.least_host_in)
            host_out += ob.least_host_out
            host = max(host_in, host_out)
            preds = [p for p in self.producers[t] if p >= s]
            if bound:
                dram = dram + ob.lean_dram
                prologue = prologue + ob.lean_prologue
                before = max((partial[p] for p in preds), default=0.0)
                partial[t] = ob.least_latency + before
                whole[t] = max(ob.least_cycles + before,
                               ob.least_latency + max((whole[p] for p in preds), default=-math.inf))
                fill = max(fill, whole[t])
                pipeline = np.maximum(self._edges[first:], np.maximum(dram[first:] / self.dram_bw,
                                                                       host / self.device.pcie_bw_bytes_per_cycle))
                yield t, first, pipeline, prologue[first:] / self.dram_bw, fill, area[first:]   # area: until resumed
            else:
                dram = dram + ob.fit_dram
                prologue = prologue + ob.fit_prologue
                unfit = unfit + (ob.cores >= UNFIT)
                latency, cycles = ob.latency, ob.cycles
                if out and not cuttable:    # where no candidate writes its output to DRAM within a grid value,
                    inside = self._op_bins(t, s, False)    # its reader must join to fit there: its on-chip context's
                    latency = np.where(ob.cores < UNFIT, latency, inside.latency)
                    cycles = np.where(ob.cores < UNFIT, cycles, inside.cycles)
                fill = np.maximum(fill, _fill_step(partial, whole, t, preds, latency, cycles, len(self.grid)))
                pipeline = np.maximum(self.grid, np.maximum(dram / self.dram_bw,
                                                            host / self.device.pcie_bw_bytes_per_cycle))
                cost = np.where((area <= self.cores) & (unfit == 0),
                                (mb - 1) * pipeline + np.maximum(pipeline, fill) + prologue / self.dram_bw, np.inf)
                b = int(np.argmin(cost))
                yield t, b, float(cost[b]), float(pipeline[b])

    def split(self, bound: bool, chains: bool = True, cuts: frozenset = frozenset(), tighten: bool = True,
              cuttable: bool = True) -> Split:
        """The cheapest split into contiguous segments (the lower bound's or the plan's, module docstring); the
        plan's with its ops' cores counted along streaming chains (`chains`) or each op at its own fewest, and each
        op held to the context it joins its segment in (`cuttable`) or not. Every
        user break starts a segment, and so does every position in `cuts` (the planner's own). The bound's
        segments are tightened (`_tightened`; the split made again with its segments tightened until it keeps
        them or `TIGHT_OPS` ops' worth of segments are) unless not `tighten`."""
        breaks = frozenset(self.breaks | cuts)
        tight: dict[tuple[int, int], tuple] = {}
        budget = TIGHT_OPS if bound and tighten else 0
        while True:
            back, total = self._cheapest(bound, chains, cuttable, breaks, tight)
            loose = [(s, t) for s, t in _segments(back) if (s, t) not in tight]
            if not loose or budget <= 0:
                break
            for s, t in loose:
                tight[s, t] = self._tightened(s, t, breaks)
                budget -= t - s + 1
        segments = []
        for s, t in reversed(_segments(back)):
            _, b, pipeline, cycles = back[t + 1]
            choice = () if bound else self._chain_choice(s, t, b) if chains else \
                tuple(int(self._op_bins(i, s, self.last_user[i] > t).index[b]) for i in range(s, t + 1))
            segments.append(Segment(s, t, pipeline, cycles, choice))
        return Split(tuple(segments), total)

    def _cheapest(self, bound: bool, chains: bool, cuttable: bool, breaks: frozenset,
                  tight: dict) -> tuple[list, float]:
        """The split's dynamic program: per end position, (start, grid value, pipeline, cycles) of its cheapest
        last segment, and the split's cycles; the segments (s, t) of `tight` at its (grid value, cycles,
        pipeline)."""
        n = len(self.schedule)
        switch = self.device.epoch_switch_cycles
        best = [math.inf] * (n + 1)
        back: list = [None] * (n + 1)
        best[0] = 0.0
        for s in range(n):
            if not math.isfinite(best[s]):
                continue
            paid = best[s] + (switch if s and s not in self.program_start else 0)
            for t, b, cycles, pipeline in self._segments_from(s, bound, chains or bound, cuttable, breaks):
                if (s, t) in tight:
                    b, cycles, pipeline = tight[s, t]
                if paid + cycles < best[t + 1]:
                    best[t + 1] = paid + cycles
                    back[t + 1] = (s, b, pipeline, cycles)
        if not math.isfinite(best[n]):
            raise BalancerError("no split of the schedule fits the device (an op fits no epoch alone)")
        return back, best[n]

    def _chain_choice(self, s: int, t: int, b: int) -> tuple:
        """The candidates of segment s..t at grid value b: the chains of `_costs` at their fewest cores, each
        chain's last op at its cheapest streaming and every earlier op at the streaming its successor reads at
        the fewest cores (back along the chain); each op its fewest-core candidate of that streaming within the
        grid value (either output context) that moves no more DRAM bytes than the one the split costed it at (its
        fewest-core one in its context, `_op_bins`). Among equals, the costed streaming and candidate first."""
        tails: dict[int, np.ndarray] = {}
        cores: dict[int, np.ndarray] = {}
        parent: dict[int, int] = {}
        for u in range(s, t + 1):
            p, _ = self._extend_chain(u, s, tails, b, True)
            cores[u] = tails[u]
            if p is not None:
                parent[u] = p
        costed = {u: int(self._op_bins(u, s, self.last_user[u] > t).index[b]) for u in range(s, t + 1)}

        def tie_break(u: int) -> np.ndarray:    # half a core against the streamings other than the costed one's
            streams = self._stream_cores(u, s)[0]
            return np.array([0.0 if x == self.candidates[self.schedule[u]][costed[u]].model.t_stream else 0.5
                             for x in streams])

        stream: dict[int, int] = {}
        for u in range(t, s - 1, -1):       # a successor before its chain's producer (schedule order)
            if u not in stream:
                stream[u] = int(np.argmin(cores[u][:, b] + tie_break(u)))
            if u in parent:
                p = parent[u]
                stream[p] = int(np.argmin(cores[p][:, b] + self._link(p, u, s)[0][:, stream[u]] + tie_break(p)))
        choice = []
        for u in range(s, t + 1):
            wanted = self._stream_cores(u, s)[0][stream[u]]
            cands = self.candidates[self.schedule[u]]
            cycles = self._either(u, s, 0)
            dram = self._context(u, s, False)[2]
            lean = self._op_bins(u, s, False).dram[b]
            fit = [j for j, c in enumerate(cands) if c.model.t_stream == wanted and cycles[j] <= self.grid[b]
                   and dram[j] <= lean]
            choice.append(min(fit, key=lambda j: (cands[j].cores, j != costed[u], dram[j], cycles[j])))
        return tuple(choice)


def _segments(back: list) -> list[tuple[int, int]]:
    """The segments (first, last) of the split a dynamic program's `back` pointers describe."""
    segments, t = [], len(back) - 1
    while t > 0:
        segments.append((back[t][0], t - 1))
        t = back[t][0]
    return segments


def _least(cores: np.ndarray) -> np.ndarray:
    """Per grid value, the fewest cores over the streamings (`cores`' rows; UNFIT where there are none)."""
    return np.minimum(cores.min(axis=0), UNFIT)


def _fill_step(partial: dict, whole: dict, i: int, preds: list[int], latency: np.ndarray, cycles: np.ndarray,
               size: int) -> np.ndarray:
    """Op i's step of the fill per grid value: the dependency chains ending at it with every op at its latency
    (`partial[i]`), and with one op of the chain at its whole cycles (`whole[i]`, returned); `preds`: its
    producers in the segment. (A latency no candidate reaches is inf: fmax keeps inf - inf out.)"""
    before = _max_of([partial[p] for p in preds], size)
    partial[i] = latency + before
    whole[i] = np.fmax(cycles + before, latency + _max_of([whole[p] for p in preds], size, -math.inf))
    return whole[i]


def _max_of(arrays: list, size: int, empty: float = 0.0) -> np.ndarray:
    """Elementwise maximum of `arrays` (`empty` everywhere when there are none)."""
    if not arrays:
        return np.full(size, empty)
    out = arrays[0]
    for a in arrays[1:]:
        out = np.maximum(out, a)
    return out
