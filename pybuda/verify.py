"""Golden evaluation of any stage's graph (numpy, float32), the comparisons used to check it, and the PCC a
netlist run in the backend simulator must reach for its least precise data format."""
from __future__ import annotations

import dataclasses

import numpy as np

from .dataformat import DataFormat, MathFidelity
from .errors import InternalError, UserInputError
from .ir import Graph, accumulated_parameter, apply_tms
from .netlist import Netlist
from .ops import registry
from .passes.cpu_fallback import DEVICE, Segment
from .passes.host_io import apply_host_transforms, from_device_layout, to_device_layout
from .passes.loopback import STATE


GRAPH_PCC_THRESHOLD = 0.999   # a stage's graph, evaluated in float32, against the framework
OP_RELATIVE_ERROR = 1e-3      # op-level comparison: max abs error over the op's largest value before the stage
                              # (PCC alone misses a scaled op)

# The simulated netlist against the framework, by its least precise data format (in precision order), as (HiFi
# fidelities, LoFi in some op): a little below the lowest PCC of the fast-tier zoo models at that format
# (benchmarks/format_pcc.py; the figures are in docs/user_guide.md). mnist_cnn at Bfp4_b (0.27) is below its
# threshold: verify fails it. Lf8, Fp8_e4m3 and Bfp4 were not measured and take Bfp4_b's threshold.
NETLIST_PCC_THRESHOLDS: dict[DataFormat, tuple[float, float]] = {
    DataFormat.Float32: (0.999, 0.985), DataFormat.Float16: (0.99, 0.985), DataFormat.Float16_b: (0.985, 0.975),
    DataFormat.Bfp8: (0.985, 0.98), DataFormat.Bfp8_b: (0.985, 0.98), DataFormat.Lf8: (0.85, 0.85),
    DataFormat.Fp8_e4m3: (0.85, 0.85), DataFormat.Bfp4: (0.85, 0.85), DataFormat.Bfp4_b: (0.85, 0.85),
    DataFormat.Bfp2: (0.1, 0.1), DataFormat.Bfp2_b: (0.1, 0.1),
}


class VerificationError(InternalError, AssertionError):
    """A stage's golden outputs diverge from the framework's; the message names the first such stage."""


@dataclasses.dataclass
class StageCheck:
    """One verify result: a stage's worst output against the framework. For the netlist stage (the netlist run in
    the backend simulator) also its least precise data format and that format's PCC threshold; for an op-level
    check, the worst of the ops the stage kept, compared with their values before it."""

    stage: str
    pcc: float
    max_abs_error: float
    data_format: str | None = None
    threshold: float = GRAPH_PCC_THRESHOLD
    op: str | None = None           # an op-level check (`enable_op_level_comparision`): its worst op
    ops_compared: int = 0           # and how many ops it compared


def least_precise_format(netlist: Netlist) -> DataFormat:
    """The least precise float format of the netlist's op outputs and intermediates, which every computed value
    goes through (the order of NETLIST_PCC_THRESHOLDS; exact operands such as 0/1 pickers in Bfp2_b are inputs,
    not counted)."""
    order = list(NETLIST_PCC_THRESHOLDS)
    used = {df for op in netlist.ops.values() for df in (op.out_df, op.intermed_df)}
    return max((df for df in used if df in NETLIST_PCC_THRESHOLDS), key=order.index, default=DataFormat.Float32)


def netlist_pcc_threshold(netlist: Netlist) -> tuple[DataFormat, bool, float]:
    """The netlist's least precise format, whether any op computes at LoFi, and the PCC it must reach."""
    fmt = least_precise_format(netlist)
    lofi = any(op.math_fidelity is MathFidelity.LoFi for op in netlist.ops.values())
    return fmt, lofi, NETLIST_PCC_THRESHOLDS[fmt][lofi]


def pcc(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson correlation of two arrays (1.0 when both are constant and equal)."""
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    if a.shape != b.shape:
        raise UserInputError(f"pcc of arrays with different sizes {a.shape} and {b.shape}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        return float("nan")
    sa, sb = a.std(), b.std()
    if sa == 0 or sb == 0:
        return 1.0 if np.allclose(a, b) else 0.0
    return float(np.mean((a - a.mean()) * (b - b.mean())) / (sa * sb))


def is_device_graph(graph: Graph) -> bool:
    """True for a lowered (Buda) graph: its nodes carry device shapes and logical shapes."""
    return any(n.logical_shape is not None for n in graph.nodes("input"))


def evaluate_sample(graph: Graph, inputs: dict[str, np.ndarray], sample: int = 0) -> dict[str, np.ndarray]:
    """Evaluate sample `sample` of a microbatch; `inputs` (that sample's) are in the graph's own input layout.
    Returns output arrays as produced."""
    values = evaluate_values(graph, inputs, sample)
    return {name: values[name] for name in graph.output_names}


def evaluate_values(graph: Graph, inputs: dict[str, np.ndarray], sample: int = 0) -> dict[str, np.ndarray]:
    """Evaluate sample `sample` of a microbatch (its inputs in the graph's own layout: a paged state holds one
    value per sample); every node's value as produced, in topological order."""
    values: dict[str, np.ndarray] = {}
    for name in graph.topo_order():
        node = graph.node(name)
        if node.kind == "input":
            values[name] = inputs[name]
        elif node.role == STATE and node.value.shape[0] != node.shape[0]:
            values[name] = node.value[sample:sample + 1]
        elif node.kind in ("parameter", "constant"):
            values[name] = node.value
        else:
            args = [apply_tms(values[o.src], list(o.tms)) if o.tms else values[o.src] for o in graph.operands(name)]
            values[name] = args[0] if node.kind == "output" else registry.evaluate(node.op_type, args, node.attrs)
    return values


def host_inputs(graph: Graph, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """One sample's values for the graph's inputs (by name) in the layout the graph reads: host transforms
    applied, tile padded for a device graph."""
    device = is_device_graph(graph)
    return {node.name: to_device_layout(feeds[node.name], node.host_transforms,
                                        node.shape if device else None) for node in graph.inputs()}


def host_outputs(graph: Graph, outputs: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Graph outputs back in the framework layout (tile padding removed, host transforms applied).

    Device-graph outputs may hold several samples along axis 0; each is unpadded and transformed alone."""
    result = []
    for node in graph.outputs():
        x = outputs[node.name]
        if is_device_graph(graph):
            x = from_device_layout(x, node.logical_shape, node.host_transforms)
        else:
            x = apply_host_transforms(x, node.host_transforms)
        result.append(x)
    return result


def golden_gradients(segments: tuple[Segment, ...] | list[Segment], batch: dict[str, np.ndarray]
                     ) -> dict[str, np.ndarray]:
    """A training model's segments (framework or Buda graphs; one graph `g`: `(Segment(DEVICE, g),)`) evaluated
    in order on a microbatch (model inputs and `loss_<output>` gradients, by name): every trained parameter's
    gradient summed over the samples, in the framework's layout, by name."""
    sums: dict[str, np.ndarray] = {}
    graph_of: dict[str, Graph] = {}
    for i in range(next(iter(batch.values())).shape[0]):
        values = {k: v[i:i + 1] for k, v in batch.items()}
        for segment in segments:
            graph = segment.graph
            got = evaluate_sample(graph, host_inputs(graph, values))
            values.update((out.name, x) for out, x in zip(graph.outputs(), host_outputs(graph, got))
                          if out.loopback is None)
            for out in graph.outputs():
                if out.loopback and graph.node(out.loopback).role == "gradient_accumulator":
                    value = got[out.name]
                    if is_device_graph(graph):
                        value = from_device_layout(value, out.logical_shape, ()).reshape(out.logical_shape)
                    sums[out.loopback] = sums.get(out.loopback, 0) + value
                    graph_of[out.loopback] = graph
    return {accumulated_parameter(target): apply_host_transforms(value, graph_of[target].node(target).host_transforms)
            for target, value in sums.items()}


def run_golden(graph: Graph, batch: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Evaluate one graph on a microbatch of named inputs, one sample at a time; returns the batched framework
    outputs."""
    return run_segments((Segment(DEVICE, graph),), batch, graph.output_names)


@dataclasses.dataclass(frozen=True)
class OpValue:
    """An op's value on one sample in the framework layout, and the names of its operands."""

    value: np.ndarray
    operands: tuple[str, ...]


def op_values(segments: tuple[Segment, ...] | list[Segment], sample: dict[str, np.ndarray]) -> dict[str, OpValue]:
    """Every op's value on one sample of named model inputs (leading dim 1), the segments evaluated in order, in
    the framework layout (a device graph's op: tile padding removed to its logical shape), by op name in
    evaluation order."""
    values, ops = dict(sample), {}
    for segment in segments:
        graph = segment.graph
        got = evaluate_values(graph, host_inputs(graph, values))
        device = is_device_graph(graph)
        for node in (graph.node(n) for n in graph.topo_order()):
            if node.kind != "op":
                continue
            x = got[node.name]
            ops[node.name] = OpValue(from_device_layout(x, node.logical_shape, ()) if device and node.logical_shape
                                     else x, tuple(o.src for o in graph.operands(node.name)))
        values.update(zip(graph.output_names, host_outputs(graph, {n: got[n] for n in graph.output_names})))
    return ops


def compare_ops(stage: str, got: dict[str, OpValue], before: dict[str, OpValue]) -> StageCheck:
    """The ops a stage kept, compared with the stage before it: those of `got` (in evaluation order) that `before`
    has with the same name, operands and shape and a finite value (a rewritten op takes a new name or operands; a
    layout rewrite changes its shape). VerificationError naming the first whose PCC is below the graph threshold
    or whose max abs error exceeds `OP_RELATIVE_ERROR` of its largest value; else the check of the worst one
    (`op`, and how many were compared)."""
    worst, compared = StageCheck(stage, 1.0, 0.0), 0
    for name, op in got.items():
        ref = before.get(name)
        if ref is None or ref.operands != op.operands or ref.value.shape != op.value.shape or \
                not np.isfinite(ref.value).all():
            continue
        compared += 1
        a, b = op.value, ref.value
        this = StageCheck(stage, pcc(a, b), float(np.max(np.abs(a - b))) if a.size else 0.0, op=name)
        scale = float(np.max(np.abs(b))) if b.size else 0.0
        if not (this.pcc >= GRAPH_PCC_THRESHOLD and this.max_abs_error <= OP_RELATIVE_ERROR * max(scale, 1e-6)):
            raise VerificationError(f"stage {stage!r}: op {name!r} diverges from its value before the stage: pcc "
                                    f"{this.pcc:.6f} (at least {GRAPH_PCC_THRESHOLD}), max abs error "
                                    f"{this.max_abs_error:.3g} (at most {OP_RELATIVE_ERROR} of its largest value "
                                    f"{scale:.3g}; the ops evaluated before it matched)")
        worst = this if worst.op is None or this.pcc < worst.pcc else worst
    return dataclasses.replace(worst, ops_compared=compared)


def run_segments(segments: tuple[Segment, ...] | list[Segment], batch: dict[str, np.ndarray],
                 outputs: list[str]) -> list[np.ndarray]:
    """Evaluate the segments in order (each reads the named values the model inputs and earlier segments give)
    on a microbatch of named model inputs, one sample at a time; returns the batched values named `outputs`."""
    per_sample = []
    for i in range(next(iter(batch.values())).shape[0]):
        values = {k: v[i:i + 1] for k, v in batch.items()}
        for segment in segments:
            graph = segment.graph
            got = host_outputs(graph, evaluate_sample(graph, host_inputs(graph, values), i))
            values.update(zip(graph.output_names, got))
        per_sample.append([values[name] for name in outputs])
    return [np.concatenate([s[k] for s in per_sample], axis=0) for k in range(len(outputs))]
