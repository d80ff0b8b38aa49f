"""Move TMs that sit directly on graph inputs and outputs to the host (as the legacy runtime tensor
transforms did): the device then reads and writes the already-transformed layout, and the runtime applies the
same registry ops to the host tensors before pushing (`to_device_layout`) and after popping (`from_device_layout`)."""
from __future__ import annotations

import numpy as np

from ..arch.tms import apply_tm
from ..errors import InternalError
from ..ir import Graph
from ..ops import registry
from ..ops.common import ceil_tile
from ..ops.tm import to4d


def hoist_io_transforms(graph: Graph, config=None) -> Graph:
    """Fold input-side and output-side TM chains (of the registry's groups "host_input_tm" and "host_output_tm")
    into the `host_transforms` of the io nodes."""
    for inp in graph.inputs():
        while True:
            users = graph.users(inp.name)
            if len(users) != 1:
                break
            user, _ = users[0]
            node = graph.node(user)
            if node.kind != "op" or not registry.belongs(node.op_type, "host_input_tm") \
                    or graph.operands(user)[0].tms or len(graph.operands(user)) != 1:
                break
            inp.host_transforms = (*inp.host_transforms, (node.op_type, dict(node.attrs)))
            inp.shape = node.shape
            graph.replace(user, inp.name)
    for out in graph.outputs():
        while out.loopback is None:  # a loopback writes the parameter's own layout on the device
            (operand,) = graph.operands(out.name)
            node = graph.node(operand.src)
            if operand.tms or node.kind != "op" or not registry.belongs(node.op_type, "host_output_tm") \
                    or len(graph.users(node.name)) != 1:
                break
            out.host_transforms = ((node.op_type, dict(node.attrs)), *out.host_transforms)
            graph.replace(node.name, graph.operands(node.name)[0])
    return graph


def apply_host_transforms(value: np.ndarray, transforms: list | tuple) -> np.ndarray:
    """Apply recorded (op_type, attrs) transforms to one sample's array."""
    for op_type, attrs in transforms:
        value = registry.evaluate(op_type, [value], attrs)
    return value


def to_device_layout(value: np.ndarray, transforms: list | tuple, device_shape: tuple | None = None) -> np.ndarray:
    """One sample as a graph input reads it: host transforms applied, then tile padded with zeros into the
    lowered input's 4-D `device_shape` (None: a graph before lowering, no padding)."""
    value = apply_host_transforms(value, transforms)
    if device_shape is None:
        return value
    padded = np.zeros(device_shape, dtype=np.float32)
    x4 = value.reshape(to4d(value.shape))
    padded[:, :, :x4.shape[2], :x4.shape[3]] = x4
    return padded


def from_device_layout(value: np.ndarray, logical_shape: tuple, transforms: list | tuple) -> np.ndarray:
    """Device output entries (any number along axis 0) back in the framework layout: each sample's slices stacked
    back if a streamed op wrote them (`unstream`), tile padding removed, reshaped to `logical_shape`, host
    transforms applied; samples concatenated along axis 0."""
    _, z, r, c = to4d(logical_shape)
    samples = [unstream(s, (z, ceil_tile(r), ceil_tile(c)))[:z, :r, :c]
               for s in value.reshape(-1, *value.shape[-3:])]
    return np.concatenate([apply_host_transforms(s.reshape(logical_shape), transforms) for s in samples], axis=0)


def unstream(entry: np.ndarray, padded: tuple) -> np.ndarray:
    """One output entry (t, R, C) back to its tile-padded (z, R, C) shape `padded`: an op t-streamed along its rows
    wrote t = z * f slices of R / f rows (stacked back by a vstack), along its columns slices of C / f columns (an
    hstack); an unstreamed op's entry is returned as it is."""
    z, r, c = padded
    if entry.shape == (z, r, c):
        return entry
    t, rows, cols = entry.shape
    tm = ("vstack", r // rows) if rows != r else ("hstack", c // cols)
    if t != z * tm[1] or rows * cols * t != z * r * c:
        raise InternalError(f"an output entry of shape {entry.shape} is no streaming of the padded output {padded}")
    return apply_tm(entry, tm)
