"""`loopback_outputs` ({input name: output index}, the legacy option): the named model input becomes device state,
a parameter-like node (role "state") that starts as the sample input given to compile, and the output at that index
(0-based over the model's outputs) writes its value back into it after every run, in place, as training writes
parameters back (a loopback output). The host pushes the state never again and never reads that output: a call of
the compiled model takes the other inputs and returns the other outputs, the state kept on the device between calls
(`RuntimeModel.reset_state` puts the compile-time value back).

The output either has the input's shape (the whole state written back each run; one tensor, so the compile takes
microbatch 1) or is one page of it: the input's rows (dim -2) a multiple `pages` of the output's, whole tiles (32
rows) each, everything else equal, with no dim other than the last two above 1 (a KV cache (1, 1, positions,
width)). A paged state is written at the page the run's `cache_write_index` names (the program parameter
`$p_cache_write_index`): the device keeps two views of one DRAM buffer (netlist `alias`), the readers reading all
pages, the writer one (`PAGES`, the number of pages, on the state node's attrs). A paged state is per sample: with
microbatch B the node's value holds B states (each sample's caches: a batch of sequences decoded at once), the
readers' view one entry per sample, the writer's one page per sample at stride `pages`."""
from __future__ import annotations

import numpy as np

from ..errors import UserInputError
from ..ir import Graph

STATE = "state"   # the role of a parameter-like node holding a looped-back model input
PAGES = "pages"   # attrs key of a paged state: how many output-sized pages it holds
TILE = 32


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
        pages = _pages(name, position, graph.node(source).shape, node.shape)
        if samples[name].shape[0] != 1 and pages == 1:
            raise UserInputError(f"loopback_outputs[{name!r}]: the state written back whole is one tensor, so the "
                                 f"compile takes microbatch 1 (a paged state takes any: one per sample); the sample "
                                 f"inputs have microbatch {samples[name].shape[0]}")
        node.kind, node.role, node.value = "parameter", STATE, np.asarray(samples[name], dtype=np.float32)
        if pages > 1:
            node.attrs[PAGES] = pages
        graph.input_names.remove(name)
        graph.node(outputs[position]).loopback = name
        removed_outputs.append(position)
    return list(loopbacks), sorted(removed_outputs)


def _pages(name: str, position: int, written: tuple, state: tuple) -> int:
    """How many pages of the output's shape the state holds (1: written whole); UserInputError unless the output
    is the state or a page of it (module docstring)."""
    if written == state:
        return 1
    rows, page = state[-2] if len(state) > 1 else 0, written[-2] if len(written) > 1 else 0
    paged = (len(written) == len(state) >= 2 and written[:-2] == state[:-2] and written[-1] == state[-1]
             and page % TILE == 0 and page and rows % page == 0 and all(d == 1 for d in state[:-2]))
    if not paged:
        raise UserInputError(f"loopback_outputs[{name!r}]: output {position} has shape {written[1:]}, input {name!r} "
                             f"{state[1:]} (per sample); legal: the input's shape (written back whole), or a page of "
                             "its rows: a multiple of 32 rows dividing them, the other dims equal, none but the last "
                             "two above 1")
    return rows // page


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
