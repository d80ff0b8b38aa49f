"""Move TMs that sit directly on graph inputs and outputs to the host (as the legacy runtime tensor
transforms did): the device then reads and writes the already-transformed layout, and the compiled model
applies the same registry ops to the host tensors before pushing and after popping."""
from __future__ import annotations

import numpy as np

from ..ir import Graph
from ..ops import registry

_INPUT_TMS = {"reshape", "transpose", "permute", "pad"}
_OUTPUT_TMS = {"reshape", "transpose", "permute", "narrow"}


def hoist_io_transforms(graph: Graph, config=None) -> Graph:
    """Fold input-side and output-side TM chains into the `host_transforms` of the io nodes."""
    for inp in graph.inputs():
        while True:
            users = graph.users(inp.name)
            if len(users) != 1:
                break
            user, _ = users[0]
            node = graph.node(user)
            if node.kind != "op" or node.op_type not in _INPUT_TMS or graph.operands(user)[0].tms \
                    or len(graph.operands(user)) != 1:
                break
            inp.host_transforms = (*inp.host_transforms, (node.op_type, dict(node.attrs)))
            inp.shape = node.shape
            graph.replace(user, inp.name)
    for out in graph.outputs():
        while True:
            (operand,) = graph.operands(out.name)
            node = graph.node(operand.src)
            if operand.tms or node.kind != "op" or node.op_type not in _OUTPUT_TMS \
                    or len(graph.users(node.name)) != 1:
                break
            out.host_transforms = ((node.op_type, dict(node.attrs)), *out.host_transforms)
            graph.replace(node.name, graph.operands(node.name)[0])
    return graph


def apply_host_transforms(value: np.ndarray, transforms: list) -> np.ndarray:
    """Apply recorded (op_type, attrs) transforms to one sample's array."""
    for op_type, attrs in transforms:
        value = registry.evaluate(op_type, [value], attrs)
    return value
