"""Random stimulus for a netlist: data for every host-fed queue and every ram, then run its programs.

Used by `pybuda sim run NETLIST --random`, the corpus tests and the speed benchmark. Float values: activations
uniform in [-1, 1), parameters (rams) scaled by 1/sqrt(rows), constants (single-entry host queues) uniform in
[0, 1), except PyBuda's lowered reduce/broadcast vectors, which get the values the compiler would have pushed;
small integers for Int8/Int32; RawUInt32 operands get meaning from their consumer:
embedding indices are valid table rows, identity-matmul operands (sparse tiles + encoding) come from a random
tile-sparse matrix encoded with pybuda.sparse.encode.
"""
from __future__ import annotations

import collections
import dataclasses
from typing import Any, Mapping

import numpy as np

from pybuda.arch.tms import TMError, shape_after_tms
from pybuda.dataformat import DataFormat
from pybuda.netlist import Netlist, Op, Queue

from .errors import SimulatorError
from .executor import Simulator
from .kernels.common import TILE
from .kernels.sparse import random_operands
from .loading import program_of
from .program import ProgramRunner, QueueSetting, param_names


@dataclasses.dataclass
class OutputStats:
    """Statistics of the entries popped from one output queue."""

    queue: str
    entries: int
    shape: tuple[int, ...]
    mean: float
    std: float
    min: float
    max: float
    nan: int
    inf: int


class _CountListener:
    """Counts, without computing anything, the entries each execute reads from each host queue: input_count for
    a streaming read, 1 for a prologue read or one that does not advance per input."""

    def __init__(self, nl: Netlist) -> None:
        self.nl = nl
        self.reads: collections.Counter = collections.Counter()  # (graph, queue) -> entries over the program

    def execute(self, graph: str, settings: Mapping[str, QueueSetting]) -> None:
        g = self.nl.graphs.get(graph)
        if g is None:
            return
        for name in {src for op in g.ops.values() for src in op.inputs if src in self.nl.queues}:
            s = settings.get(name)
            streaming = s is None or not (s.flag("prologue") or s.get("rd_ptr_autoinc", 1) == 0)
            self.reads[(graph, name)] += g.effective_input_count if streaming else 1

    def variable_changed(self, name: str, value: int) -> None:
        pass

    def allocate(self, queues: list[str], allocate: bool) -> None:
        pass


def default_params(nl: Netlist, program: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Program parameters: the given ones, every other `param` set to 1."""
    given = {str(k).lstrip("$"): v for k, v in (params or {}).items()}
    names = [name.lstrip("$") for name in param_names(program_of(nl, program))]
    return {name: given.get(name, 1) for name in names} | given


def _reads(nl: Netlist, programs: list[str], params: Mapping[str, Any]) -> dict[str, int]:
    """Entries of each host queue the programs read: the most any one graph reads (forward and backward passes
    read the same microbatches)."""
    total: collections.Counter = collections.Counter()
    for name in programs:
        listener = _CountListener(nl)
        ProgramRunner(program_of(nl, name), listener, params=default_params(nl, name, params), default_param=1,
                      loop_shortcut=False).run()
        total.update(listener.reads)
    out: dict[str, int] = {}
    for (_, queue), n in total.items():
        out[queue] = max(out.get(queue, 0), n)
    return out


def queue_role(q: Queue) -> str:
    """'param' (a ram: weights, biases, ...), 'const' (a single-entry host queue: PyBuda's constants) or
    'stream' (activations)."""
    if q.is_ram:
        return "param"
    if q.entries == 1:
        return "const"
    return "stream"


def _random_values(df: DataFormat, shape: tuple, rng: np.random.Generator, role: str = "stream") -> np.ndarray:
    """Activations uniform in [-1, 1); parameters uniform in [-1, 1) / sqrt(rows) (keeps matmul outputs of order
    one); constants uniform in [0, 1) (PyBuda's constants are mostly reduction vectors, scales and epsilons: positive
    values keep square roots and reciprocals finite); small integers for Int8 / Int32."""
    if df in (DataFormat.Int8, DataFormat.UInt8):
        lo = 0 if df is DataFormat.UInt8 else -2
        return rng.integers(lo, 3, shape).astype(np.float32)
    if df is DataFormat.Int32:
        return rng.integers(-1000, 1001, shape).astype(np.float64)
    if df.is_integer:  # raw / unsigned formats without a known consumer
        return np.zeros(shape, dtype=np.float64)
    if role == "const":
        return rng.uniform(0.0, 1.0, shape).astype(np.float32)
    values = rng.uniform(-1.0, 1.0, shape).astype(np.float32)
    if role == "param":
        values *= np.float32(1.0 / np.sqrt(max(1, shape[-2])))
    return values


def fill_random(sim: Simulator, seed: int = 0, *, programs: list[str] | None = None,
                params: Mapping[str, Any] | None = None) -> dict[str, int]:
    """Push random data to every host-fed queue (enough entries for `programs` with `params`) and every ram.

    Returns {queue: entries pushed}.
    """
    nl = sim.netlist
    rng = np.random.default_rng(seed)
    programs = programs if programs is not None else [p.name for p in nl.programs]
    reads = _reads(nl, programs, params or {})
    special = _special_operands(sim, rng)
    pushed: dict[str, int] = {}
    for name, q in nl.queues.items():
        if not (q.host_fed or q.is_ram):
            continue
        n = max(1, q.entries) if q.is_ram else max(1, q.entries, reads.get(name, 0))
        shape = (n,) + q.element_shape
        if name in special:
            data = np.broadcast_to(special[name], shape)
        else:
            data = _random_values(q.df, shape, rng, queue_role(q))
        sim.push(name, data)
        pushed[name] = n
    return pushed


def _special_operands(sim: Simulator, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Values for queues whose meaning comes from their consumer: embedding indices, sparse matmul operands,
    PyBuda's lowered reduce/broadcast constants."""
    nl = sim.netlist
    out: dict[str, np.ndarray] = {}
    for op in nl.ops.values():
        if op.type == "matmul":
            for k, src in enumerate(op.inputs[:2]):
                q = nl.queues.get(src)
                if q is not None and q.entries == 1 and not q.is_ram and q.host_fed:
                    value = lowered_constant(src, q.element_shape, k)
                    if value is not None:
                        out[src] = value
        if op.type == "embedding" and len(op.inputs) == 2 and op.inputs[1] in nl.queues:
            table = nl.queues.get(op.inputs[0])
            rows = table.element_shape[1] if table is not None else op.element_shape[1]
            q = nl.queues[op.inputs[1]]
            out[op.inputs[1]] = rng.integers(0, max(1, rows), q.element_shape).astype(np.float64)
        if op.type == "matmul" and op.attrs.identity and len(op.inputs) >= 3:
            sp, act, enc = op.inputs[:3]
            if sp not in nl.queues or enc not in nl.queues:
                continue
            act_shape = _post_tm_shape(nl, op, 1)
            try:
                sparse, encoding, _ = random_operands(op, nl.queues[sp].element_shape, nl.queues[enc].element_shape,
                                                      act_shape, rng)
            except (SimulatorError, ValueError):
                continue
            out[sp] = sparse
            out[enc] = encoding
    return out


def lowered_constant(name: str, shape: tuple[int, int, int], operand: int) -> np.ndarray | None:
    """The value legacy PyBuda pushes to a lowered-constant queue (`lc.input_tensor.<op>...`) that turns a reduce
    or a broadcast into a matmul, read from the constant's name; None for any other queue.

    A reduction vector (`...reduce_sum...` / `...reduce_avg...`) is all ones (1/K for an average over K): every
    column of x @ v (every row of v @ x) holds the sum, so consumers may tile-broadcast any column. A broadcast
    vector (`..._s_brcst_...`) holds ones in its first column as the left operand (every output row is row 0 of
    the other operand) or its first row as the right operand (every output column is column 0); the rest of its
    tile is zero padding.
    """
    if not name.startswith("lc.input_tensor."):
        return None
    if ".reduce_sum." in name or ".reduce_avg." in name:
        k = shape[-2] if operand == 1 else shape[-1]
        return np.full(shape, 1.0 / k if ".reduce_avg." in name else 1.0, dtype=np.float32)
    if "_s_brcst_" not in name:
        return None
    value = np.zeros(shape, dtype=np.float32)
    if operand == 0:
        value[..., :, 0] = 1.0
    else:
        value[..., 0, :] = 1.0
    return value


def _post_tm_shape(nl: Netlist, op: Op, k: int) -> tuple[int, int, int]:
    """(t, R, C) in elements of op input `k` after the edge's TMs."""
    try:
        t, rt, ct = shape_after_tms(nl.producer(op.inputs[k]).shape, op.tms(k))
    except TMError as e:
        raise SimulatorError(f"op {op.name!r} input {k}: {e}") from None
    return (t, rt * TILE, ct * TILE)


def run_random(netlist: Any, *, seed: int = 0, program: str | None = None, params: Mapping[str, Any] | None = None,
               device: str | None = None, sim: Simulator | None = None) -> tuple[Simulator, dict[str, OutputStats]]:
    """Random stimulus, then run `program` (default: every program in file order) with `params` (missing
    `param`s = 1); pop every host-readable output queue and return statistics per queue."""
    sim = sim or Simulator(netlist, device=device)
    nl = sim.netlist
    programs = [program_of(nl, program).name] if program is not None else [p.name for p in nl.programs]
    fill_random(sim, seed, programs=programs, params=params)
    for name in programs:
        sim.run(name, **default_params(nl, name, params))
    return sim, output_stats(sim)


def output_queues(nl: Netlist) -> list[str]:
    """Queues written by an op and read by no op: the netlist's outputs."""
    ops = nl.ops
    read = {src for op in ops.values() for src in op.inputs}
    return [name for name, q in nl.queues.items() if q.input in ops and name not in read]


def output_stats(sim: Simulator) -> dict[str, OutputStats]:
    stats: dict[str, OutputStats] = {}
    for name in output_queues(sim.netlist):
        q = sim.netlist.queues[name]
        values = []
        if q.is_ram:
            for e in range(max(1, q.entries)):
                try:
                    values.append(sim.peek(name, e))
                except SimulatorError:
                    pass
        else:
            while sim.occupancy(name):
                values.append(sim.pop(name))
        if not values:
            stats[name] = OutputStats(name, 0, q.element_shape, float("nan"), float("nan"), float("nan"), float("nan"),
                                      0, 0)
            continue
        data = np.stack(values).astype(np.float64)
        finite = data[np.isfinite(data)]
        stats[name] = OutputStats(
            queue=name, entries=len(values), shape=tuple(q.element_shape),
            mean=float(finite.mean()) if finite.size else float("nan"),
            std=float(finite.std()) if finite.size else float("nan"),
            min=float(finite.min()) if finite.size else float("nan"),
            max=float(finite.max()) if finite.size else float("nan"),
            nan=int(np.isnan(data).sum()), inf=int(np.isinf(data).sum()))
    return stats
