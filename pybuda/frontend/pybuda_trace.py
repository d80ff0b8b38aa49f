"""Trace a PyBudaModule's forward into a Graph (one sample: the leading batch dim becomes 1)."""
from __future__ import annotations

import inspect

from ..errors import UserTypeError
from ..ir import Graph
from ..module import PyBudaModule, Tensor, tracing


def trace_module(module: PyBudaModule, sample_inputs: tuple) -> Graph:
    """Run `module.forward` on traced Tensors shaped like one sample of each input."""
    graph = Graph(module.get_name())
    params = list(inspect.signature(module.forward).parameters)
    names = [params[i] if i < len(params) and not params[i].startswith("*") else f"input_{i}"
             for i in range(len(sample_inputs))]
    acts = [Tensor(graph, graph.add_input(n, (1, *tuple(x.shape)[1:]))) for n, x in zip(names, sample_inputs)]
    with tracing(graph):
        outputs = module(*acts)
    outputs = outputs if isinstance(outputs, (tuple, list)) else (outputs,)
    for i, out in enumerate(outputs):
        if not isinstance(out, Tensor):
            raise UserTypeError(f"{type(module).__name__}.forward must return traced Tensors, got {type(out).__name__}")
        graph.add_output(f"output_{i}", out.name)
    return graph
