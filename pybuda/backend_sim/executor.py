"""Numeric execution of a netlist: queues with Buda pointer semantics, programs, and op kernels on numpy.

Tensors are float arrays shaped (t, R, C) in elements of whole 32x32 tiles, row-major: ublock order, untilize,
flat layout and a queue's blocking do not change the logical values. Tensors with a tiny tile_dim (e.g. 16x32,
1x32) are held in 32x32 tiles whose elements outside the tile_dim corner are zero, which is what the backend's
golden model does; host push/pop use the compact (tiles x tile_dim) shape. Every value is rounded to the data
format it is stored or computed in.

An execute runs the graph's ops in topological order on a whole chunk of its `input_count` inputs at once (a
leading batch axis), which gives the same values as input-by-input execution: ops of one input never see data of
another input except through rams written and read by the same graph (those graphs run input by input) and
queues whose global read pointer moves per input (likewise).
"""
from __future__ import annotations

import collections
import dataclasses
from typing import Any, Callable, Mapping, NamedTuple

import numpy as np

from pybuda.arch.operands import expected_input
from pybuda.arch.tms import apply_tm, tm_shape
from pybuda.dataformat import DataFormat, tile_bytes
from pybuda.netlist import Graph, Netlist, Op, Queue

from .errors import SimulatorError
from .formats import exactly_representable, quantize, storage_dtype
from .kernels import KERNELS, ROUNDED_TO_ACC_DF, SUPPORTED_OP_TYPES
from .kernels.common import TILE, clear_outside_tile, packer_relu
from .kernels.eltwise import DATACOPY_OPS as COPY_KERNEL_OPS
from .kernels.fused import fused_op
from .loading import load_netlist, program_of, select_device
from .program import ProgramRunner, QueueSetting, param_names

__all__ = ["Simulator", "SUPPORTED_OP_TYPES", "topo_order", "apply_edge_tms", "to_internal",
           "to_host"]

# Largest tensor (elements) one op may produce per chunk of inputs; bounds memory of the batched execution.
DEFAULT_CHUNK_ELEMENTS = 1 << 21

# Ops whose every input has the op's own output shape.


def _tiles(shape: tuple) -> tuple[int, ...]:
    t, r, c = shape[-3:]
    return (int(t), r / TILE if r % TILE else r // TILE, c / TILE if c % TILE else c // TILE)


def to_internal(x: np.ndarray, tile_dim: tuple[int, int]) -> np.ndarray:
    """Host layout (..., t, RT*h, CT*w) of a tensor with tile_dim (h, w) -> 32x32 tiles with zero padding."""
    h, w = tile_dim
    if (h, w) == (TILE, TILE):
        return x
    *lead, t, rows, cols = x.shape
    rt, ct = rows // h, cols // w
    out = np.zeros((*lead, t, rt, TILE, ct, TILE), dtype=x.dtype)
    out[..., :h, :, :w] = x.reshape(*lead, t, rt, h, ct, w)
    return out.reshape(*lead, t, rt * TILE, ct * TILE)


def to_host(x: np.ndarray, tile_dim: tuple[int, int]) -> np.ndarray:
    """Inverse of `to_internal`."""
    h, w = tile_dim
    if (h, w) == (TILE, TILE):
        return x
    *lead, t, rows, cols = x.shape
    rt, ct = rows // TILE, cols // TILE
    v = x.reshape(*lead, t, rt, TILE, ct, TILE)[..., :h, :, :w]
    return np.ascontiguousarray(v).reshape(*lead, t, rt * h, ct * w)


class Transfer(NamedTuple):
    """One host transfer: a push of `entries` into a queue or a pop of one entry, with its bytes on the wire."""

    kind: str        # "push" or "pop"
    queue: str
    bytes: int


def _entry_bytes(q) -> int:
    """Bytes of one tilized entry of a queue in its data format."""
    return int(np.prod(q.shape)) * tile_bytes(q.df, q.effective_tile_dim)


class _QueueState:
    """Contents and pointers of one queue or ram (pointers of `type: queue` range over [0, 2*entries))."""

    def __init__(self, q: Queue):
        self.q = q
        self.entries = max(1, q.entries)
        t, rt, ct = q.shape
        self.internal_shape = (t, rt * TILE, ct * TILE)
        self.dtype = storage_dtype(q.df)
        self.slots: list[np.ndarray | None] = [None] * self.entries
        self.rd = 0
        self.wr = 0
        self.local = 0
        self.rd_autoinc = 0 if q.is_ram else 1
        self.global_rd_autoinc = 0
        self.global_wr_autoinc = 0 if q.is_ram else 1
        self.pending: collections.deque = collections.deque()  # host pushes waiting for space
        self.host_out: collections.deque = collections.deque()  # entries drained to the host while running
        self.settings: QueueSetting | None = None
        self.allocated = True

    @property
    def wrap(self) -> int:
        return 2 * self.entries

    @property
    def occupancy(self) -> int:
        return (self.wr - self.rd) % self.wrap

    def holds(self, ptr: int) -> bool:
        return (ptr - self.rd) % self.wrap < self.occupancy

    def put(self, value: np.ndarray) -> None:
        self.slots[self.wr % self.entries] = value
        self.wr = (self.wr + 1) % self.wrap

    def take(self) -> np.ndarray:
        value = self.slots[self.rd % self.entries]
        self.rd = (self.rd + 1) % self.wrap
        return value

    def refill(self) -> None:
        while self.pending and self.occupancy < self.entries:
            self.put(self.pending.popleft())

    def set_allocated(self, allocated: bool) -> None:
        """`allocate_queue` / `deallocate_queue`: a deallocated queue's DRAM is free for others, so its contents
        are dropped (its pointers persist, as the program's variables do)."""
        self.allocated = allocated
        if not allocated and isinstance(self.slots, list):    # an aliased view's entries are its base's
            self.slots = [None] * self.entries

    def check_allocated(self, what: str) -> None:
        """SimulatorError for `what` (an op's read or write) of a queue that `deallocate_queue` freed."""
        if not self.allocated:
            raise SimulatorError(f"{what} queue {self.q.name!r} after deallocate_queue freed it (and before an "
                                 f"allocate_queue): on the device it would read or overwrite another queue's DRAM")


class _AliasedSlots:
    """The entries of a ram that aliases another (`alias:`, the backend's dual-view IO): both views hold the same
    t-slices in (entry, t) order, so entry e of a view of t slices is slices e*t .. e*t + t - 1 of the base's.
    A view reads None where a slice was never written; a write into a base entry never written fills the rest of
    that entry with zeros."""

    def __init__(self, base: _QueueState, view: _QueueState):
        if base.internal_shape[1:] != view.internal_shape[1:] or \
                base.entries * base.internal_shape[0] != view.entries * view.internal_shape[0]:
            raise SimulatorError(f"ram {view.q.name!r} aliases {base.q.name!r}: {view.entries} entries of "
                                 f"{view.internal_shape} against {base.entries} of {base.internal_shape}; legal: "
                                 "t-slices of one shape and equal totals")
        self.base, self.t = base, view.internal_shape[0]

    def __len__(self) -> int:
        return self.base.entries * self.base.internal_shape[0] // self.t

    def _slices(self, entry: int) -> list[tuple[int, int]]:
        tb = self.base.internal_shape[0]
        return [divmod(g, tb) for g in range(entry * self.t, (entry + 1) * self.t)]

    def __getitem__(self, entry: int) -> np.ndarray | None:
        parts = [self.base.slots[b] for b, _ in self._slices(entry)]
        if any(p is None for p in parts):
            return None
        return np.stack([p[k] for p, (_, k) in zip(parts, self._slices(entry))])

    def __setitem__(self, entry: int, value: np.ndarray) -> None:
        for (b, k), piece in zip(self._slices(entry), value):
            old = self.base.slots[b]
            new = np.zeros(self.base.internal_shape, dtype=value.dtype) if old is None else old.copy()
            new[k] = piece                  # a copy: values read from the entry before stay as they were
            self.base.slots[b] = new


@dataclasses.dataclass
class _OpPlan:
    op: Op
    kernel: Callable
    writes: tuple[str, ...]
    release: tuple[str, ...]  # op values no later op of the graph reads


@dataclasses.dataclass
class _GraphPlan:
    ops: list[_OpPlan]
    sequential: bool          # a ram written by the graph is also read by it: run input by input
    sample_elements: int      # largest tensor of one input (elements), for chunking


class Simulator:
    """Runs a netlist's programs on numpy.

    netlist: a path, YAML text, parsed dict or `pybuda.netlist.Netlist` (read by `pybuda.netlist.load`; the
    Simulator does not modify it). device: a device name ("e150", "n150", ...) used for the arch and for
    `estimate`; default: the netlist's first supported arch on its largest single-chip device.
    chunk_elements: memory bound of the batched execution (largest per-op tensor of a chunk of inputs).
    """

    def __init__(self, netlist: Any, device: str | None = None, *, chunk_elements: int = DEFAULT_CHUNK_ELEMENTS):
        self.netlist: Netlist = load_netlist(netlist)
        self.arch, self.device = select_device(self.netlist, device)
        self.chunk_elements = int(chunk_elements)
        self._queues = {name: _QueueState(q) for name, q in self.netlist.queues.items()}
        for name, q in self.netlist.queues.items():
            if q.alias is not None and q.alias in self._queues:
                self._queues[name].slots = _AliasedSlots(self._queues[q.alias], self._queues[name])
        self._statics: dict[str, dict[str, int]] = {}
        self._op_graph = {name: g.name for g in self.netlist.graphs.values() for name in g.ops}
        self._writers: dict[str, list[str]] = collections.defaultdict(list)
        for name, q in self.netlist.queues.items():
            if q.input in self._op_graph:
                self._writers[q.input].append(name)
        self._graph_read_queues = {q for g in self.netlist.graphs.values() for op in g.ops.values()
                                   for q in op.inputs if q in self.netlist.queues}
        self._plans: dict[str, _GraphPlan] = {}
        self._kernels: dict[str, Callable] = dict(KERNELS)
        self._kernels["fused_op"] = lambda op, ins: fused_op(op, ins, self.netlist, KERNELS)
        self.executed: list[str] = []  # graph names in execution order
        self.transfers: list[Transfer] = []   # host pushes and pops, in order

    # -- host interface -----------------------------------------------------------------------------------
    def queue_shape(self, name: str) -> tuple[int, int, int]:
        """(t, R, C) in elements of one entry of a queue (R, C count the queue's tile_dim)."""
        return self._state(name).q.element_shape

    def push(self, queue_name: str, array: np.ndarray, *, entry: int | None = None) -> None:
        """Write host data: one entry (t, R, C) or several (entries, t, R, C), rounded to the queue's df.

        `type: queue`: appended at the write pointer (entries beyond capacity wait and are written when the
        program pops). `type: ram`: written at entry index `entry` (default 0) onward.
        """
        st = self._state(queue_name)
        data = np.asarray(array, dtype=st.dtype)
        if data.ndim == 3:
            data = data[None]
        shape = st.q.element_shape
        if data.ndim != 4 or tuple(data.shape[1:]) != shape:
            raise SimulatorError(f"push to queue {queue_name!r}: expected shape (t, R, C) = {shape} or "
                                 f"(entries, {', '.join(map(str, shape))}), got {tuple(np.shape(array))}")
        data = quantize(to_internal(data, st.q.effective_tile_dim), st.q.df)
        self.transfers.append(Transfer("push", queue_name, len(data) * _entry_bytes(st.q)))
        if st.q.is_ram:
            start = 0 if entry is None else int(entry)
            if start < 0 or start + len(data) > st.entries:
                raise SimulatorError(f"push to ram {queue_name!r}: entries {start}..{start + len(data) - 1} out of "
                                     f"range (ram has {st.entries})")
            for k, e in enumerate(data):
                st.slots[start + k] = e
            return
        if entry is not None:
            raise SimulatorError(f"push to queue {queue_name!r}: `entry` is only for rams (type: ram)")
        for e in data:
            st.pending.append(e)
        st.refill()

    def pop(self, queue_name: str) -> np.ndarray:
        """Read one entry (t, R, C): the oldest one of a `type: queue` (removing it), or a ram's entry at its
        read pointer (not removed)."""
        st = self._state(queue_name)
        self.transfers.append(Transfer("pop", queue_name, _entry_bytes(st.q)))
        if st.q.is_ram:
            return self.peek(queue_name, st.rd)
        if st.host_out:
            return self._host_copy(st, st.host_out.popleft())
        if st.occupancy == 0:
            raise SimulatorError(f"pop from queue {queue_name!r}: the queue is empty (rd_ptr={st.rd}, "
                                 f"wr_ptr={st.wr})")
        value = st.take()
        st.refill()
        return self._host_copy(st, value)

    def peek(self, queue_name: str, entry: int = 0) -> np.ndarray:
        """Entry `entry` without removing it: counted from the oldest entry of a queue, absolute for a ram."""
        st = self._state(queue_name)
        if st.q.is_ram:
            value = st.slots[int(entry) % st.entries]
            if value is None:
                raise SimulatorError(f"ram {queue_name!r} entry {entry} was never written")
            return self._host_copy(st, value)
        held = list(st.host_out) + [st.slots[(st.rd + k) % st.wrap % st.entries] for k in range(st.occupancy)]
        if not 0 <= entry < len(held):
            raise SimulatorError(f"peek queue {queue_name!r}: entry {entry} not present ({len(held)} held)")
        return self._host_copy(st, held[entry])

    @staticmethod
    def _host_copy(st: _QueueState, value: np.ndarray) -> np.ndarray:
        return np.array(to_host(value, st.q.effective_tile_dim), copy=True)

    def occupancy(self, queue_name: str) -> int:
        """Entries a host pop could return now (queue), or the number of entries of a ram."""
        st = self._state(queue_name)
        return st.entries if st.q.is_ram else st.occupancy + len(st.host_out)

    def program_params(self, program: str | None = None) -> list[str]:
        """Names (without '$') of the `param` variables a program (default: the first) needs."""
        return [name.lstrip("$") for name in param_names(program_of(self.netlist, program))]

    def run(self, program: str | None = None, **params: Any) -> None:
        """Run a program (default: the first) with its `param` values, e.g. run(p_loop_count=2)."""
        prog = program_of(self.netlist, program)
        runner = ProgramRunner(prog, _Listener(self), params=params, statics=self._statics.setdefault(prog.name, {}))
        runner.run()

    def estimate(self, program: str | None = None, **params: Any):
        """Timing estimate of this netlist on this simulator's device (see timing.estimate)."""
        from .timing import estimate
        return estimate(self.netlist, self.device.name, program=program, params=params)

    # -- program callbacks ---------------------------------------------------------------------------------
    def _state(self, name: str) -> _QueueState:
        if name not in self._queues:
            raise SimulatorError(f"no queue {name!r} in the netlist")
        return self._queues[name]

    def _set_rd(self, st: _QueueState, value: int) -> None:
        new = value % st.wrap
        occupancy = (st.wr - new) % st.wrap
        if occupancy > st.entries:
            raise SimulatorError(f"queue {st.q.name!r}: read pointer {value} is inconsistent with write pointer "
                                 f"{st.wr} ({st.entries} entries, pointers wrap at {st.wrap})")
        st.rd = new
        st.refill()

    def _variable_changed(self, name: str, value: int) -> None:
        for st in self._queues.values():
            s = st.settings
            if s is None:
                continue
            if st.q.is_ram:
                if s.reads_variable("wr_ptr_global", name) and not s.flag("read_only"):
                    st.wr = value % st.entries
                if s.reads_variable("rd_ptr_global", name):
                    st.rd = value % st.entries
                continue
            if s.reads_variable("rd_ptr_autoinc", name):
                st.rd_autoinc = value
            if s.reads_variable("global_rdptr_autoinc", name):
                st.global_rd_autoinc = value
            if s.reads_variable("rd_ptr_local", name):
                st.local = value % st.wrap
            if s.reads_variable("rd_ptr_global", name):
                self._set_rd(st, value)

    def _apply_settings(self, graph: Graph, settings: Mapping[str, QueueSetting]) -> None:
        used = {q for op in graph.ops.values() for q in op.inputs} | {
            q for op in graph.ops.values() for q in self._writers.get(op.name, [])}
        for name, s in settings.items():
            if name not in self._queues:
                raise SimulatorError(f"execute {graph.name!r}: queue_settings names unknown queue {name!r}")
            if name not in used:
                raise SimulatorError(f"execute {graph.name!r}: queue {name!r} in queue_settings is neither an input "
                                     f"nor an output of the graph")
            st = self._queues[name]
            if st.q.is_ram:
                st.global_wr_autoinc = s.get("global_wrptr_autoinc", 0)
                st.global_rd_autoinc = s.get("global_rdptr_autoinc", 0)
                if "wr_ptr_global" in s.values and not s.flag("read_only"):
                    st.wr = s.values["wr_ptr_global"] % st.entries
                if "rd_ptr_global" in s.values:
                    st.rd = s.values["rd_ptr_global"] % st.entries
            else:
                st.rd_autoinc = s.get("rd_ptr_autoinc", 1)
                st.global_rd_autoinc = s.get("global_rdptr_autoinc", 0)
                if "rd_ptr_global" in s.values:
                    self._set_rd(st, s.values["rd_ptr_global"])
                st.local = s.get("rd_ptr_local", st.rd) % st.wrap
                streaming = not (s.flag("prologue") or s.flag("epilogue")) and st.rd_autoinc and \
                    not st.global_rd_autoinc and name in {q for op in graph.ops.values() for q in op.inputs}
                n = graph.effective_input_count
                if streaming and n > st.entries:
                    raise SimulatorError(f"graph {graph.name!r} reads {n} inputs per execute from streaming queue "
                                         f"{name!r} with only {st.entries} entries")
            if s.flag("zero"):
                zero = np.zeros(st.internal_shape, dtype=st.dtype)
                st.slots = [zero for _ in st.slots]
            st.settings = s

    def _execute(self, graph_name: str, settings: Mapping[str, QueueSetting]) -> None:
        if graph_name not in self.netlist.graphs:
            raise SimulatorError(f"execute: no graph {graph_name!r}; graphs: {', '.join(self.netlist.graphs)}")
        graph = self.netlist.graphs[graph_name]
        plan = self._plan(graph)
        self._apply_settings(graph, settings)
        n = graph.effective_input_count
        per_input_pointers = [self._queues[q] for q in settings
                              if not self._queues[q].q.is_ram and self._queues[q].global_rd_autoinc]
        if plan.sequential or per_input_pointers:
            chunk = 1
        else:
            chunk = max(1, min(n, self.chunk_elements // max(1, plan.sample_elements)))
        for start in range(0, n, chunk):
            idx = range(start, min(n, start + chunk))
            values: dict[str, tuple[np.ndarray, DataFormat | None]] = {}
            aliased = []     # writes into a view of another ram: after the chunk's reads (the graph reads, then writes)
            for p in plan.ops:
                op = p.op
                ins = [self._input(graph, op, k, src, idx, values) for k, src in enumerate(op.inputs)]
                out = self._compute(op, p.kernel, ins)
                values[op.name] = (out, op.out_df)
                for qname in p.writes:
                    if self._queues[qname].q.alias is None:
                        self._write(qname, op, out, idx)
                    else:
                        aliased.append((qname, op, out))
                for name in p.release:
                    values.pop(name, None)
            for qname, op, out in aliased:
                self._write(qname, op, out, idx)
            if chunk == 1:
                for st in per_input_pointers:
                    self._set_rd(st, st.rd + st.global_rd_autoinc)
        for name in settings:
            st = self._queues[name]
            if not st.q.is_ram:
                st.local = st.rd
        self.executed.append(graph_name)

    def _plan(self, graph: Graph) -> _GraphPlan:
        if graph.name in self._plans:
            return self._plans[graph.name]
        for op in graph.ops.values():
            for src in op.inputs:
                if src in self._op_graph and self._op_graph[src] != graph.name:
                    raise SimulatorError(f"op {op.name!r} (graph {graph.name!r}) reads op {src!r} of graph "
                                         f"{self._op_graph[src]!r}; cross-graph data must go through a queue")
        order = topo_order(graph, self.netlist)
        for op in order:
            if op.type not in self._kernels:
                raise SimulatorError(f"op {op.name!r} has type {op.type!r}, which the numeric simulator does not "
                                     f"support; supported: {', '.join(SUPPORTED_OP_TYPES)}")
        last_use = {op.name: i for i, op in enumerate(order)}
        for i, op in enumerate(order):
            for src in op.inputs:
                if src in last_use:
                    last_use[src] = max(last_use[src], i)
        releases: dict[int, list[str]] = collections.defaultdict(list)
        for name, i in last_use.items():
            releases[i].append(name)
        read = {q for op in order for q in op.inputs if q in self.netlist.queues}
        written = {q for op in order for q in self._writers.get(op.name, [])}
        sequential = graph.effective_input_count > 1 and any(self.netlist.queues[q].is_ram for q in read & written)
        sample = 1
        for op in order:
            t, rt, ct = op.shape
            sample = max(sample, t * rt * ct * TILE * TILE)
            for src in op.inputs:  # streamed inputs (rams and prologue queues are read once per chunk)
                if src in self.netlist.queues and not self.netlist.queues[src].is_ram:
                    t, rt, ct = self.netlist.queues[src].shape
                    sample = max(sample, t * rt * ct * TILE * TILE)
        plan = _GraphPlan(
            ops=[_OpPlan(op=op, kernel=self._kernels[op.type], writes=tuple(self._writers.get(op.name, [])),
                         release=tuple(releases.get(i, []))) for i, op in enumerate(order)],
            sequential=sequential, sample_elements=sample)
        self._plans[graph.name] = plan
        return plan

    # -- data movement ---------------------------------------------------------------------------------------
    def _read_queue(self, name: str, idx: range, graph: Graph, op: Op) -> np.ndarray:
        """Entries an op reads from a queue for the inputs `idx`: (len(idx) or 1, t, R, C)."""
        st = self._queues[name]
        st.check_allocated(f"op {op.name!r} (graph {graph.name!r}) reads")
        if st.q.is_ram:
            entries = [(st.rd + i * st.global_rd_autoinc) % st.entries for i in idx]
            for e in entries:
                if st.slots[e] is None:
                    raise SimulatorError(f"op {op.name!r} reads ram {name!r} entry {e}, which was never written; "
                                         f"push it before run()")
        else:
            prologue = st.settings is not None and st.settings.flag("prologue")
            entries = []
            for i in idx:
                ptr = st.local if prologue else (st.local + i * st.rd_autoinc) % st.wrap
                if not st.holds(ptr):
                    raise SimulatorError(f"op {op.name!r} (graph {graph.name!r}) reads queue {name!r} at pointer "
                                         f"{ptr} for input {i}, but the queue holds pointers [{st.rd}, {st.wr}) "
                                         f"(mod {st.wrap}): push more entries or check the program's pointers")
                entries.append(ptr % st.entries)
        if len(set(entries)) == 1:
            return st.slots[entries[0]][None]
        return np.stack([st.slots[e] for e in entries])

    def _input(self, graph: Graph, op: Op, k: int, src: str, idx: range,
               values: Mapping[str, tuple[np.ndarray, DataFormat | None]]) -> np.ndarray:
        if src in values:
            x, tag = values[src]
        elif src in self._queues:
            x, tag = self._read_queue(src, idx, graph, op), self.netlist.queues[src].df
        else:
            raise SimulatorError(f"op {op.name!r} input {k}: {src!r} has not been computed")
        where = f"op {op.name!r} input {k}"
        unpad = op.input_unpad.get(k)
        if unpad is not None:
            rt, ct = unpad.rt or 0, unpad.ct or 0
            t, r, c = _tiles(x.shape)
            if rt >= r or ct >= c or rt < 0 or ct < 0:
                raise SimulatorError(f"{where}: unpad rt={rt}, ct={ct} does not fit (t, rt, ct) = {(t, r, c)}")
            x = x[..., :x.shape[-2] - rt * TILE, :x.shape[-1] - ct * TILE]
        tms = op.tms(k)
        pad = op.input_pad.get(k)
        if pad is not None:
            tms = [*tms, ("pad", pad.rt or 0, pad.ct or 0, float(pad.pad_value or 0))]
        if tms:
            # TMs move tiles (a transpose also transposes tile contents in the unpacker); values keep the format
            # they are stored in, so a block-float value is not re-blocked along its new rows
            x = apply_edge_tms(x, tms, where)
        expected, _ = expected_input(op.geometry, k)
        if expected is not None and _tiles(x.shape) != expected:
            raise SimulatorError(f"op {op.name!r} ({op.type}) input {k} ({src!r}): expected (t, rt, ct) = "
                                 f"{expected} tiles after TMs, got {_tiles(x.shape)}")
        df = op.in_df[k]
        return x if exactly_representable(tag, df) else quantize(x, df)

    def _write(self, name: str, op: Op, value: np.ndarray, idx: range) -> None:
        st = self._queues[name]
        st.check_allocated(f"op {op.name!r} writes")
        q = st.q
        x = apply_edge_tms(value, q.input_tms, f"queue {name!r} input_tms") if q.input_tms else value
        if _tiles(x.shape) != q.shape:
            raise SimulatorError(f"queue {name!r} fed by op {op.name!r}: expected (t, rt, ct) = {q.shape} tiles, "
                                 f"got {_tiles(x.shape)}")
        if not exactly_representable(op.out_df, q.df):
            x = quantize(x, q.df)
        x = clear_outside_tile(x, q.effective_tile_dim)
        if x.dtype != st.dtype:
            x = x.astype(st.dtype)
        many = x.shape[0] > 1
        for j, i in enumerate(idx):
            v = x[j] if many else x[0]
            if q.is_ram:
                entry = (st.wr + i * st.global_wr_autoinc) % st.entries
                if op.gradient_op:
                    old = st.slots[entry]
                    with np.errstate(all="ignore"):
                        v = quantize(v if old is None else old + v, q.df)
                st.slots[entry] = v
                continue
            if op.gradient_op:
                raise SimulatorError(f"op {op.name!r}: gradient_op output into a FIFO queue ({name!r}) is not "
                                     f"supported; use a ram")
            if st.occupancy >= st.entries:
                if name in self._graph_read_queues:
                    raise SimulatorError(f"op {op.name!r} writes queue {name!r}, which is full ({st.entries} entries, "
                                         f"rd_ptr={st.rd}, wr_ptr={st.wr}): the device would stall")
                st.host_out.append(st.take())  # the host drains output queues while the device runs
            st.put(v)

    # -- compute -------------------------------------------------------------------------------------------
    def _compute(self, op: Op, kernel: Callable, ins: list[np.ndarray]) -> np.ndarray:
        with np.errstate(all="ignore"):
            try:
                y = ins[0] if _copies_exactly(op) else kernel(op, ins)
            except SimulatorError:
                raise
            except (ValueError, IndexError) as e:
                shapes = ", ".join(str(_tiles(x.shape)) for x in ins)
                raise SimulatorError(f"op {op.name!r} ({op.type}): {e} (input (t, rt, ct) tiles: {shapes})") from None
            y = packer_relu(op, y)
            y = clear_outside_tile(y, op.effective_tile_dim)
            if not _packed_unchanged(op):
                y = quantize(y, op.out_df)
        t, rt, ct = op.shape
        if y.shape[-3:] != (t, rt * TILE, ct * TILE):
            raise SimulatorError(f"op {op.name!r} ({op.type}) produced (t, rt, ct) = {_tiles(y.shape)} tiles, its "
                                 f"t/grid/mblock/ublock say {(t, rt, ct)}")
        return y


def _copies_exactly(op: Op) -> bool:
    """True for a datacopy-type op whose result is its input: the input holds in_df values (rounded on read, or
    stored in a format exact in in_df) that no transpose re-blocked, and in_df values are exact in acc_df."""
    if op.type not in COPY_KERNEL_OPS:
        return False
    transposed = any(tm[0] == "transpose" for tm in op.tms(0))
    return not transposed and exactly_representable(op.in_df[0], op.effective_acc_df)


def _packed_unchanged(op: Op) -> bool:
    """True if packing the op's result to out_df changes no value: the kernel rounded it to acc_df, acc_df values
    are exact in out_df, and the packer at most zeroes values (zeroing never makes a block-float value
    unrepresentable: its block's shared exponent can only fall to one whose step divides the old step)."""
    relu_clamps = bool(op.attrs.relu_en) and op.attrs.relu_mode == "max"
    return op.type in ROUNDED_TO_ACC_DF and not relu_clamps and exactly_representable(op.effective_acc_df,
                                                                                      op.out_df)


class _Listener:
    """Adapter from the program interpreter to a Simulator."""

    def __init__(self, sim: Simulator):
        self.sim = sim

    def execute(self, graph: str, settings: Mapping[str, QueueSetting]) -> None:
        self.sim._execute(graph, settings)

    def variable_changed(self, name: str, value: int) -> None:
        self.sim._variable_changed(name, value)

    def allocate(self, queues: list[str], allocate: bool) -> None:
        for name in queues:
            self.sim._state(name).set_allocated(allocate)


def topo_order(graph: Graph, netlist: Netlist) -> list[Op]:
    """Ops of a graph in dependency order (op->op edges and op->queue->op edges inside the graph), file order
    among independent ops; SimulatorError on a cycle. A ram that an op of the graph writes back (an optimizer's
    loopback into a parameter) is read before it is written: its readers come before its writer."""
    ops = graph.ops
    writer_of = {name: q.input for name, q in netlist.queues.items() if q.input in ops}
    deps: dict[str, set[str]] = {name: set() for name in ops}
    for name, op in ops.items():
        for src in op.inputs:
            if src in ops:
                deps[name].add(src)
            elif src in writer_of and writer_of[src] != name:
                if netlist.queues[src].is_ram:
                    deps[writer_of[src]].add(name)
                else:
                    deps[name].add(writer_of[src])
    order: list[Op] = []
    done: set[str] = set()
    remaining = list(ops)
    while remaining:
        ready = [n for n in remaining if deps[n] <= done]
        if not ready:
            raise SimulatorError(f"graph {graph.name!r} has a cycle among ops {', '.join(remaining)}")
        for n in ready:
            order.append(ops[n])
            done.add(n)
        remaining = [n for n in remaining if n not in done]
    return order


def apply_edge_tms(x: np.ndarray, tms: list, where: str) -> np.ndarray:
    """Apply netlist TMs to a (..., t, R, C) array; broadcast factors count tiles, pads add tiles of a value."""
    for tm in tms:
        kind = tm[0]
        if kind == "pad":
            _, rt, ct, value = tm
            widths = [(0, 0)] * (x.ndim - 2) + [(0, rt * TILE), (0, ct * TILE)]
            x = np.pad(x, widths, constant_values=value)
            continue
        if kind == "tile_broadcast":
            raise SimulatorError(f"{where}: tile_broadcast is only legal inside fused ops")
        shape = _tiles(x.shape)
        try:
            tm_shape(shape, tm)
        except ValueError as e:
            raise SimulatorError(f"{where}: {e}") from None
        if kind == "broadcast" and tm[1] == "z" and shape[0] != 1:
            raise SimulatorError(f"{where}: broadcast z needs t == 1, got (t, rt, ct) = {shape}")
        x = apply_tm(x, tm)
    return x
