"""`loopback_outputs` ({input name: output index}, the legacy option): the named model input becomes device state,
a parameter-like node (role "state") that starts as the sample input given to compile, and the output at that index
(0-based over the model's outputs) writes its value back into it after every run, in place, as training writes
parameters back (a loopback output). The host pushes the state never again and never reads that output: a call of
the compiled model takes the other inputs and returns the other outputs, the state kept on the device between calls
(`RuntimeModel.reset_state` puts the compile-time value back).

The state is one tensor, so a compile with a loopback takes microbatch 1; the output must have the input's shape
(the whole state written back each run)."""
from __future__ import annotations

import numpy as np

from ..errors import UserInputError
from ..ir import Graph

STATE = "state"   # the role of a parameter-like node holding a looped-back model input


def link_loopbacks(graph: Graph, loopbacks: dict[str, int], samples: dict[str, np.ndarray]
                   ) -> tuple[list[str], list[int]]:
    """Turn each input named in `loopbacks` into state written back by its output (module docstring); returns the
    inputs and the output positions (in the model's order) that no longer cross to or from the host."""
    outputs = list(graph.output_names)
    removed_outputs: list[int] = []
    for name, index in loopbacks.items():
        position = _output_position(graph, name, index, outputs)
        node = graph.node(name)
        source = graph.output_source(outputs[position])
        if graph.node(source).shape != node.shape:
            raise UserInputError(f"loopback_outputs[{name!r}]: output {position} has shape "
                                 f"{graph.node(source).shape[1:]}, input {name!r} {node.shape[1:]} (per sample); "
                                 "legal: an output of the input's shape, written back whole")
        if samples[name].shape[0] != 1:
            raise UserInputError(f"loopback_outputs[{name!r}]: the state is one tensor, so the compile takes "
                                 f"microbatch 1; the sample inputs have microbatch {samples[name].shape[0]}")
        node.kind, node.role, node.value = "parameter", STATE, np.asarray(samples[name], dtype=np.float32)
        graph.input_names.remove(name)
        graph.node(outputs[position]).loopback = name
        removed_outputs.append(position)
    return list(loopbacks), sorted(removed_outputs)


def _output_position(graph: Graph, name: str, index: int, outputs: list[str]) -> int:
    """The output position a loopback entry names; UserInputError naming the legal inputs and positions."""
    if name not in graph.input_names:
        raise UserInputError(f"loopback_outputs: {name!r} is not an input of the model; its inputs: "
                             f"{', '.join(graph.input_names)}")
    if not 0 <= index < len(outputs):
        raise UserInputError(f"loopback_outputs[{name!r}] = {index}: legal: an output index 0..{len(outputs) - 1}")
    if graph.node(outputs[index]).loopback is not None:
        raise UserInputError(f"loopback_outputs[{name!r}]: output {index} already writes back into "
                             f"{graph.node(outputs[index]).loopback!r}; legal: one input per output")
    return index
