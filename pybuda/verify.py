"""Golden evaluation of any stage's graph (numpy, float32) and the comparisons used to check it."""
from __future__ import annotations

import numpy as np

from .ir import Graph, apply_tms
from .ops import registry
from .passes.cpu_fallback import DEVICE, Segment
from .passes.host_io import apply_host_transforms, from_device_layout, to_device_layout


def pcc(a: np.ndarray, b: np.ndarray) -> float:
    """Pearson correlation of two arrays (1.0 when both are constant and equal)."""
    a = np.asarray(a, dtype=np.float64).ravel()
    b = np.asarray(b, dtype=np.float64).ravel()
    if a.shape != b.shape:
        raise ValueError(f"pcc of arrays with different sizes {a.shape} and {b.shape}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        return float("nan")
    sa, sb = a.std(), b.std()
    if sa == 0 or sb == 0:
        return 1.0 if np.allclose(a, b) else 0.0
    return float(np.mean((a - a.mean()) * (b - b.mean())) / (sa * sb))


def is_device_graph(graph: Graph) -> bool:
    """True for a lowered (Buda) graph: its nodes carry device shapes and logical shapes."""
    return any(n.logical_shape is not None for n in graph.nodes("input"))


def evaluate_sample(graph: Graph, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Evaluate one sample; `inputs` are in the graph's own input layout. Returns output arrays as produced."""
    values: dict[str, np.ndarray] = {}
    for name in graph.topo_order():
        node = graph.node(name)
        if node.kind == "input":
            values[name] = inputs[name]
        elif node.kind in ("parameter", "constant"):
            values[name] = node.value
        else:
            args = [apply_tms(values[o.src], list(o.tms)) if o.tms else values[o.src] for o in graph.operands(name)]
            values[name] = args[0] if node.kind == "output" else registry.evaluate(node.op_type, args, node.attrs)
    return {name: values[name] for name in graph.output_names}


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


def run_golden(graph: Graph, batch: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Evaluate one graph on a microbatch of named inputs, one sample at a time; returns the batched framework
    outputs."""
    return run_segments((Segment(DEVICE, graph),), batch, graph.output_names)


def run_segments(segments: tuple[Segment, ...] | list[Segment], batch: dict[str, np.ndarray],
                 outputs: list[str]) -> list[np.ndarray]:
    """Evaluate the segments in order (each reads the named values the model inputs and earlier segments give)
    on a microbatch of named model inputs, one sample at a time; returns the batched values named `outputs`."""
    per_sample = []
    for i in range(next(iter(batch.values())).shape[0]):
        values = {k: v[i:i + 1] for k, v in batch.items()}
        for segment in segments:
            graph = segment.graph
            got = host_outputs(graph, evaluate_sample(graph, host_inputs(graph, values)))
            values.update(zip(graph.output_names, got))
        per_sample.append([values[name] for name in outputs])
    return [np.concatenate([s[k] for s in per_sample], axis=0) for k in range(len(outputs))]
