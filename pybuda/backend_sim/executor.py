"""Numeric execution of a netlist: queues with Buda pointer semantics, programs, and op kernels on numpy.

Tensors are float32 arrays shaped (t, R, C) in elements, row-major (no tile layout): ublock order, untilize and
queue layout do not change the logical values. Every value is rounded to the data format it is stored in.
"""
from __future__ import annotations

import collections
from typing import Any, Mapping

import numpy as np

from pybuda.device import DeviceSpec, arch_spec, get_device
from pybuda.ir.tms import apply_tm, tm_shape

from .errors import SimulatorError
from .formats import FidelityMatmul, fidelity_product, quantize, to_source_register
from .netlist_io import TILE, GraphDef, Netlist, OpDef, QueueDef, load_netlist
from .program import ProgramRunner, QueueSetting

BINARY_OPS = ("add", "subtract", "multiply", "maximum")
SFPU_OPS = ("exp", "log", "sqrt", "gelu", "gelu_derivative", "reciprocal", "sigmoid", "tanh", "square", "abs",
            "lrelu", "power", "sine", "cosine", "dropout")
DATACOPY_OPS = ("nop", "datacopy")
SUPPORTED_OP_TYPES = tuple(sorted(BINARY_OPS + SFPU_OPS + DATACOPY_OPS + ("matmul", "reduce")))

_SQRT_2_OVER_PI = float(np.sqrt(2.0 / np.pi))


def _erf(x: np.ndarray) -> np.ndarray:
    """erf in float64 (Abramowitz & Stegun 7.1.26, |error| < 1.5e-7)."""
    x = np.asarray(x, dtype=np.float64)
    s = np.sign(x)
    a = np.abs(x)
    k = 1.0 / (1.0 + 0.3275911 * a)
    poly = k * (0.254829592 + k * (-0.284496736 + k * (1.421413741 + k * (-1.453152027 + k * 1.061405429))))
    return s * (1.0 - poly * np.exp(-a * a))


def _tiles(shape: tuple) -> tuple[int, ...]:
    t, r, c = shape[-3:]
    return (int(t), r / TILE if r % TILE else r // TILE, c / TILE if c % TILE else c // TILE)


class _QueueState:
    """Contents and pointers of one queue or ram (pointers of `type: queue` range over [0, 2*entries))."""

    def __init__(self, q: QueueDef):
        self.q = q
        self.entries = max(1, q.entries)
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


class Simulator:
    """Runs a netlist's programs on numpy.

    netlist: a path, YAML text, parsed dict or Netlist. device: a device name ("e150", "n150", ...) used for the
    arch and for `estimate`; default: the netlist's first supported arch on its largest single-chip device.
    """

    def __init__(self, netlist: Any, device: str | None = None):
        self.netlist: Netlist = load_netlist(netlist)
        spec = get_device(device) if device is not None else None
        self.arch: str = self.netlist.resolve_arch(spec.arch if spec else None)
        self.device: DeviceSpec = spec or arch_spec(self.arch)
        self._queues = {name: _QueueState(q) for name, q in self.netlist.queues.items()}
        self._statics: dict[str, dict[str, int]] = {}
        self._op_graph = {name: op.graph for name, op in self.netlist.ops.items()}
        self._writers: dict[str, list[str]] = collections.defaultdict(list)
        for name, q in self.netlist.queues.items():
            if q.input in self._op_graph:
                self._writers[q.input].append(name)
        self._graph_read_queues = {q for g in self.netlist.graphs.values() for op in g.ops.values()
                                   for q in op.inputs if q in self.netlist.queues}
        self._orders: dict[str, list[OpDef]] = {}
        self.executed: list[str] = []  # graph names in execution order

    # -- host interface -----------------------------------------------------------------------------------
    def queue_shape(self, name: str) -> tuple[int, int, int]:
        """(t, R, C) in elements of one entry of a queue."""
        return self._state(name).q.shape

    def push(self, queue_name: str, array: np.ndarray, *, entry: int | None = None) -> None:
        """Write host data: one entry (t, R, C) or several (entries, t, R, C), rounded to the queue's df.

        `type: queue`: appended at the write pointer (entries beyond capacity wait and are written when the
        program pops). `type: ram`: written at entry index `entry` (default 0) onward.
        """
        st = self._state(queue_name)
        data = np.asarray(array, dtype=np.float32)
        if data.ndim == 3:
            data = data[None]
        if data.ndim != 4 or tuple(data.shape[1:]) != st.q.shape:
            raise SimulatorError(f"push to queue {queue_name!r}: expected shape (t, R, C) = {st.q.shape} or "
                                 f"(entries, {', '.join(map(str, st.q.shape))}), got {tuple(np.shape(array))}")
        data = quantize(data, st.q.df)
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
        if st.q.is_ram:
            return self.peek(queue_name, st.rd)
        if st.host_out:
            return st.host_out.popleft().copy()
        if st.occupancy == 0:
            raise SimulatorError(f"pop from queue {queue_name!r}: the queue is empty (rd_ptr={st.rd}, "
                                 f"wr_ptr={st.wr})")
        value = st.take()
        st.refill()
        return value.copy()

    def peek(self, queue_name: str, entry: int = 0) -> np.ndarray:
        """Entry `entry` without removing it: counted from the oldest entry of a queue, absolute for a ram."""
        st = self._state(queue_name)
        if st.q.is_ram:
            value = st.slots[int(entry) % st.entries]
            if value is None:
                raise SimulatorError(f"ram {queue_name!r} entry {entry} was never written")
            return value.copy()
        held = list(st.host_out) + [st.slots[(st.rd + k) % st.wrap % st.entries] for k in range(st.occupancy)]
        if not 0 <= entry < len(held):
            raise SimulatorError(f"peek queue {queue_name!r}: entry {entry} not present ({len(held)} held)")
        return held[entry].copy()

    def occupancy(self, queue_name: str) -> int:
        """Entries a host pop could return now (queue), or the number of entries of a ram."""
        st = self._state(queue_name)
        return st.entries if st.q.is_ram else st.occupancy + len(st.host_out)

    def run(self, program: str | None = None, **params: Any) -> None:
        """Run a program (default: the first) with its `param` values, e.g. run(p_loop_count=2)."""
        name = program if program is not None else next(iter(self.netlist.programs))
        if name not in self.netlist.programs:
            raise SimulatorError(f"no program {name!r}; programs: {', '.join(self.netlist.programs)}")
        runner = ProgramRunner(self.netlist.programs[name], _Listener(self), params=params,
                               statics=self._statics.setdefault(name, {}))
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
            raw = {k: (v.strip() if isinstance(v, str) else v) for k, v in s.raw.items()}
            if st.q.is_ram:
                if raw.get("wr_ptr_global") == name and not s.flag("read_only"):
                    st.wr = value % st.entries
                if raw.get("rd_ptr_global") == name:
                    st.rd = value % st.entries
                continue
            if raw.get("rd_ptr_autoinc") == name:
                st.rd_autoinc = value
            if raw.get("global_rdptr_autoinc") == name:
                st.global_rd_autoinc = value
            if raw.get("rd_ptr_local") == name:
                st.local = value % st.wrap
            if raw.get("rd_ptr_global") == name:
                self._set_rd(st, value)

    def _apply_settings(self, graph: GraphDef, settings: Mapping[str, QueueSetting]) -> None:
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
                if streaming and graph.input_count > st.entries:
                    raise SimulatorError(f"graph {graph.name!r} reads {graph.input_count} inputs per execute from "
                                         f"streaming queue {name!r} with only {st.entries} entries")
            if s.flag("zero"):
                zero = np.zeros(st.q.shape, dtype=np.float32)
                st.slots = [zero.copy() for _ in st.slots]
            st.settings = s

    def _execute(self, graph_name: str, settings: Mapping[str, QueueSetting]) -> None:
        if graph_name not in self.netlist.graphs:
            raise SimulatorError(f"execute: no graph {graph_name!r}; graphs: {', '.join(self.netlist.graphs)}")
        graph = self.netlist.graphs[graph_name]
        order = self._order(graph)
        self._apply_settings(graph, settings)
        for i in range(graph.input_count):
            values: dict[str, np.ndarray] = {}
            for op in order:
                inputs = [self._input(op, k, src, i, values) for k, src in enumerate(op.inputs)]
                out = self._compute(op, inputs)
                values[op.name] = out
                for qname in self._writers.get(op.name, []):
                    self._write(qname, op, out, i)
            for name, s in settings.items():
                st = self._queues[name]
                if not st.q.is_ram and st.global_rd_autoinc:
                    self._set_rd(st, st.rd + st.global_rd_autoinc)
        for name in settings:
            st = self._queues[name]
            if not st.q.is_ram:
                st.local = st.rd
        self.executed.append(graph_name)

    def _order(self, graph: GraphDef) -> list[OpDef]:
        if graph.name in self._orders:
            return self._orders[graph.name]
        for op in graph.ops.values():
            for src in op.inputs:
                if src in self._op_graph and self._op_graph[src] != graph.name:
                    raise SimulatorError(f"op {op.name!r} (graph {graph.name!r}) reads op {src!r} of graph "
                                         f"{self._op_graph[src]!r}; cross-graph data must go through a queue")
        order = topo_order(graph, self.netlist)
        self._orders[graph.name] = order
        return order

    # -- data movement ---------------------------------------------------------------------------------------
    def _read_queue(self, name: str, index: int, op: OpDef) -> np.ndarray:
        st = self._queues[name]
        if st.q.is_ram:
            entry = (st.rd + index * st.global_rd_autoinc) % st.entries
            value = st.slots[entry]
            if value is None:
                raise SimulatorError(f"op {op.name!r} reads ram {name!r} entry {entry}, which was never written; "
                                     f"push it before run()")
            return value
        prologue = st.settings is not None and st.settings.flag("prologue")
        ptr = st.local if prologue else (st.local + index * st.rd_autoinc) % st.wrap
        if not st.holds(ptr):
            raise SimulatorError(f"op {op.name!r} (graph {op.graph!r}) reads queue {name!r} at pointer {ptr} for "
                                 f"input {index}, but the queue holds pointers [{st.rd}, {st.wr}) (mod {st.wrap}): "
                                 f"push more entries or check the program's pointers")
        return st.slots[ptr % st.entries]

    def _input(self, op: OpDef, k: int, src: str, index: int, values: Mapping[str, np.ndarray]) -> np.ndarray:
        if src in values:
            x = values[src]
        elif src in self._queues:
            x = self._read_queue(src, index, op)
            if self.netlist.queues[src].tile_dim != (TILE, TILE):
                raise SimulatorError(f"op {op.name!r} input {k} ({src!r}): tile_dim other than 32x32 is not "
                                     f"supported by the numeric simulator")
        else:
            raise SimulatorError(f"op {op.name!r} input {k}: {src!r} has not been computed")
        if op.input_unpad.get(k):
            raise SimulatorError(f"op {op.name!r} input {k}: input_{k}_unpad is not supported by the numeric "
                                 f"simulator")
        x = apply_edge_tms(x, op.input_tms.get(k, ()), f"op {op.name!r} input {k}")
        if k in op.input_pad:
            rt, ct, value = op.input_pad[k]
            x = apply_edge_tms(x, (("pad", rt, ct, value),), f"op {op.name!r} input {k}")
        expected = op.expected_input_tiles(k)
        if expected is not None and _tiles(x.shape) != expected:
            raise SimulatorError(f"op {op.name!r} ({op.type}) input {k} ({src!r}): expected (t, rt, ct) = "
                                 f"{expected} tiles after TMs, got {_tiles(x.shape)}")
        return quantize(x, op.in_df[k])

    def _write(self, name: str, op: OpDef, value: np.ndarray, index: int) -> None:
        st = self._queues[name]
        q = st.q
        x = apply_edge_tms(value, q.input_tms, f"queue {name!r} input_tms")
        if _tiles(x.shape) != q.tiles:
            raise SimulatorError(f"queue {name!r} fed by op {op.name!r}: expected (t, rt, ct) = {q.tiles} tiles, "
                                 f"got {_tiles(x.shape)}")
        x = quantize(x, q.df)
        if q.is_ram:
            entry = (st.wr + index * st.global_wr_autoinc) % st.entries
            if op.gradient_op:
                old = st.slots[entry]
                x = quantize(x if old is None else old + x, q.df)
            st.slots[entry] = x
            return
        if op.gradient_op:
            raise SimulatorError(f"op {op.name!r}: gradient_op output into a FIFO queue ({name!r}) is not supported; "
                                 f"use a ram")
        if st.occupancy >= st.entries:
            if name in self._graph_read_queues:
                raise SimulatorError(f"op {op.name!r} writes queue {name!r}, which is full ({st.entries} entries, "
                                     f"rd_ptr={st.rd}, wr_ptr={st.wr}): the device would stall")
            st.host_out.append(st.take())  # the host drains output queues while the device runs
        st.put(x)

    # -- compute -------------------------------------------------------------------------------------------
    def _compute(self, op: OpDef, ins: list[np.ndarray]) -> np.ndarray:
        if op.tile_dim != (TILE, TILE):
            raise SimulatorError(f"op {op.name!r}: tile_dim {list(op.tile_dim)} is not supported by the numeric "
                                 f"simulator (32x32 only)")
        kind = op.type
        with np.errstate(all="ignore"):
            if kind in BINARY_OPS:
                y = self._binary(op, ins)
            elif kind in SFPU_OPS or kind in DATACOPY_OPS:
                _expect_inputs(op, ins, 1)
                y = quantize(_unary(op, ins[0]), op.acc_df)
            elif kind == "matmul":
                y = self._matmul(op, ins)
            elif kind == "reduce":
                _expect_inputs(op, ins, 1)
                y = quantize(_reduce(op, ins[0]), op.acc_df)
            else:
                raise SimulatorError(f"op {op.name!r} has type {kind!r}, which the numeric simulator does not "
                                     f"support; supported: {', '.join(SUPPORTED_OP_TYPES)}")
            y = _packer_relu(op, y)
        return quantize(y, op.out_df)

    def _binary(self, op: OpDef, ins: list[np.ndarray]) -> np.ndarray:
        _expect_inputs(op, ins, 2)
        a, b = ins
        if op.type == "multiply":
            y = fidelity_product(a, b, op.math_fidelity)
        else:
            a, b = to_source_register(a), to_source_register(b)
            y = {"add": np.add, "subtract": np.subtract, "maximum": np.maximum}[op.type](a, b)
        return quantize(y, op.acc_df)

    def _matmul(self, op: OpDef, ins: list[np.ndarray]) -> np.ndarray:
        if op.attr_bool("identity"):
            raise SimulatorError(f"op {op.name!r}: sparse (identity) matmul is not supported by the numeric "
                                 f"simulator; supported: {', '.join(SUPPORTED_OP_TYPES)} (dense matmul)")
        has_bias = op.attr_bool("bias")
        _expect_inputs(op, ins, 3 if has_bias else 2)
        a, b = ins[0], ins[1]
        z = int(op.attributes.get("z", 1)) if op.attr_bool("accumulate") else 1
        t = a.shape[0] // z
        a = a.reshape(t, z, *a.shape[1:])
        b = b.reshape(t, z, *b.shape[1:])
        mm = FidelityMatmul(a, b, op.math_fidelity)
        kstep = op.u_kt * TILE
        steps = [(zi, k) for zi in range(z) for k in range(op.m_k)]
        acc = None
        for n, (zi, k) in enumerate(steps):
            idx = (slice(None), zi)
            part = mm.partial(k * kstep, (k + 1) * kstep, b_index=idx, a_index=idx)
            acc = part if acc is None else acc + part
            acc = quantize(acc, op.acc_df)  # dest register
            if n < len(steps) - 1:
                acc = quantize(acc, op.intermed_df)  # partial sum spilled to the intermediate buffer
        if has_bias:
            acc = quantize(acc + to_source_register(ins[2]), op.acc_df)
        return acc


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
            self.sim._state(name).allocated = allocate


def topo_order(graph: GraphDef, netlist: Netlist) -> list[OpDef]:
    """Ops of a graph in dependency order (op->op edges and op->queue->op edges inside the graph), file order
    among independent ops; SimulatorError on a cycle."""
    ops = graph.ops
    writer_of = {name: q.input for name, q in netlist.queues.items() if q.input in ops}
    deps: dict[str, set[str]] = {}
    for name, op in ops.items():
        d = set()
        for src in op.inputs:
            if src in ops:
                d.add(src)
            elif src in writer_of and writer_of[src] != name:
                d.add(writer_of[src])
        deps[name] = d
    order: list[OpDef] = []
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


def apply_edge_tms(x: np.ndarray, tms: tuple, where: str) -> np.ndarray:
    """Apply netlist TMs to a (t, R, C) array; broadcast factors count tiles, pads add tiles of a value."""
    for tm in tms:
        kind = tm[0]
        if kind == "pad":
            _, rt, ct, value = tm
            x = np.pad(x, ((0, 0), (0, rt * TILE), (0, ct * TILE)), constant_values=value)
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
    return np.ascontiguousarray(x, dtype=np.float32)


def _expect_inputs(op: OpDef, ins: list, n: int) -> None:
    if len(ins) != n:
        raise SimulatorError(f"op {op.name!r} ({op.type}) takes {n} inputs, got {len(ins)}")


def _unary(op: OpDef, x: np.ndarray) -> np.ndarray:
    kind = op.type
    attrs = op.attributes
    approx = op.attr_bool("approximate_mode")
    xd = x.astype(np.float64)
    if kind in DATACOPY_OPS or kind == "dropout":  # dropout is the identity at inference
        y = xd
    elif kind == "exp":
        y = np.exp(xd)
    elif kind == "log":
        y = np.log(xd)
    elif kind == "sqrt":
        y = np.sqrt(xd)
    elif kind == "gelu":
        if approx:
            y = 0.5 * xd * (1.0 + np.tanh(_SQRT_2_OVER_PI * (xd + 0.044715 * xd ** 3)))
        else:
            y = 0.5 * xd * (1.0 + _erf(xd / np.sqrt(2.0)))
    elif kind == "gelu_derivative":
        if approx:
            inner = _SQRT_2_OVER_PI * (xd + 0.044715 * xd ** 3)
            th = np.tanh(inner)
            y = 0.5 * (1.0 + th) + 0.5 * xd * (1.0 - th * th) * _SQRT_2_OVER_PI * (1.0 + 3 * 0.044715 * xd * xd)
        else:
            y = 0.5 * (1.0 + _erf(xd / np.sqrt(2.0))) + xd * np.exp(-0.5 * xd * xd) / np.sqrt(2.0 * np.pi)
    elif kind == "reciprocal":
        y = 1.0 / xd
    elif kind == "sigmoid":
        y = 1.0 / (1.0 + np.exp(-xd))
    elif kind == "tanh":
        y = np.tanh(xd)
    elif kind == "square":
        y = xd * xd
    elif kind == "abs":
        y = np.abs(xd)
    elif kind == "lrelu":
        if "slope" not in attrs:
            raise SimulatorError(f"op {op.name!r} (lrelu) needs attribute slope")
        y = np.where(xd > 0, xd, xd * float(attrs["slope"]))
    elif kind == "power":
        if "exp" not in attrs:
            raise SimulatorError(f"op {op.name!r} (power) needs attribute exp")
        y = np.power(xd, int(attrs["exp"]))
    elif kind == "sine":
        y = np.sin(xd)
    elif kind == "cosine":
        y = np.cos(xd)
    else:  # pragma: no cover - dispatch is checked by the caller
        raise SimulatorError(f"op {op.name!r}: no unary model for {kind!r}")
    return y.astype(np.float32)


def _reduce(op: OpDef, x: np.ndarray) -> np.ndarray:
    if str(op.attributes.get("type", "max")) != "max":
        raise SimulatorError(f"op {op.name!r}: reduce type {op.attributes.get('type')!r} is not supported (max only)")
    dim = str(op.attributes.get("dim", ""))
    gr, gc = op.grid_size
    x = to_source_register(x)
    t, rows, cols = x.shape
    if dim == "z":
        z = int(op.attributes.get("z", 1))
        return x.reshape(t // z, z, rows, cols).max(axis=1)
    if dim == "c":
        if op.mblock[1] * op.ublock[1] != 1:
            raise SimulatorError(f"op {op.name!r}: reduce dim c with mblock_n*ublock_ct = "
                                 f"{op.mblock[1] * op.ublock[1]} output tiles per core is not supported (1 only)")
        m = x.reshape(t, rows, gc, cols // gc).max(axis=3)  # (t, R, gc)
        out = np.zeros((t, rows, gc * TILE), dtype=np.float32)
        out[:, :, ::TILE] = m
        return out
    if dim == "r":
        if op.mblock[0] * op.ublock[0] != 1:
            raise SimulatorError(f"op {op.name!r}: reduce dim r with mblock_m*ublock_rt = "
                                 f"{op.mblock[0] * op.ublock[0]} output tiles per core is not supported (1 only)")
        m = x.reshape(t, gr, rows // gr, cols).max(axis=2)  # (t, gr, C)
        out = np.zeros((t, gr * TILE, cols), dtype=np.float32)
        out[:, ::TILE, :] = m
        return out
    raise SimulatorError(f"op {op.name!r}: reduce needs attribute dim r, c or z, got {dim!r}")


def _packer_relu(op: OpDef, y: np.ndarray) -> np.ndarray:
    if not op.attr_bool("relu_en"):
        return y
    threshold = float(op.attributes.get("relu_threshold", 0.0))
    mode = str(op.attributes.get("relu_mode", "min"))
    if mode == "min":
        return np.where(y > threshold, y, 0.0).astype(np.float32)
    if mode == "max":
        return np.clip(y, 0.0, threshold).astype(np.float32)
    raise SimulatorError(f"op {op.name!r}: relu_mode must be min or max, got {mode!r}")
