"""Epoch types of a training graph's ops, from its structure (pybuda-passes.md §5.8): an op a model output needs
runs in the forward epochs, an op that writes a parameter or optimizer state back (the optimizer's) in the
optimizer epochs, every other op (one that only gradients need) in the backward epochs. An inference graph is all
forward. The gradient ops are the ops that sum into a gradient accumulator."""
from __future__ import annotations

import networkx as nx

from .graph import Graph

EPOCH_TYPES = ("forward", "backward", "optimizer")
LOSS_PREFIX = "loss_"   # the input carrying the loss's gradient of model output <out> is `loss_<out>`


def loss_gradient_input(output: str) -> str:
    """The name of the input that carries the loss's gradient with respect to model output `output`."""
    return f"{LOSS_PREFIX}{output}"


def loss_gradient_output(input_name: str) -> str:
    """The model output whose loss gradient the input `input_name` carries."""
    return input_name.removeprefix(LOSS_PREFIX)


ACCUMULATOR_PREFIX = "grad_acc_"   # the gradient accumulator of trained parameter <p> is `grad_acc_<p>`


def accumulator_of(param: str) -> str:
    return f"{ACCUMULATOR_PREFIX}{param}"


def accumulated_parameter(accumulator: str) -> str:
    return accumulator.removeprefix(ACCUMULATOR_PREFIX)


RESIDUAL_SUFFIX = ".residual"   # the compensation term of trained parameter <p> (passes/autograd.py) is `<p>.residual`


def residual_of(param: str) -> str:
    return f"{param}{RESIDUAL_SUFFIX}"


def residual_parameter(residual: str) -> str:
    return residual.removesuffix(RESIDUAL_SUFFIX)


def state_of(param: str, name: str) -> str:
    """The optimizer state `name` (momentum, moments) of trained parameter `param`."""
    return f"{param}.{name}"


def updated_with(graph: Graph, param: str) -> set[str]:
    """The parameter-like nodes the optimizer writes back with trained parameter `param`: itself, its residual and
    its optimizer state."""
    return {out.loopback for out in graph.outputs() if out.loopback is not None and (
        out.loopback == param or out.loopback.startswith(f"{param}.")
        and graph.node(out.loopback).role in ("optimizer_state", "parameter_residual"))}


GRADIENT_OUTPUT = "gradient"   # the role of a graph output carrying a backward value to the host (a CPU fallback op)


def epoch_types(graph: Graph) -> dict[str, str]:
    """Epoch type of every op, in graph order. An output with role "gradient" (a backward value the host reads)
    is not a model output."""
    forward, optimizer = set(), set()
    for out in graph.outputs():
        ancestors = nx.ancestors(graph._g, out.name)
        if out.loopback is None or graph.node(out.loopback).role == "state":   # state: looped-back inputs
            if out.role != GRADIENT_OUTPUT:
                forward |= ancestors
        elif graph.node(out.loopback).role != "gradient_accumulator":
            optimizer |= ancestors
    return {n: "forward" if n in forward else "optimizer" if n in optimizer else "backward"
            for n in graph.op_names()}


def loopback_writers(graph: Graph) -> dict[str, str]:
    """The op that writes each loopback target (a parameter-like node), by target."""
    return {out.loopback: graph.output_source(out.name) for out in graph.outputs() if out.loopback is not None}


def gradient_ops(graph: Graph) -> set[str]:
    """The ops that sum their output into a gradient accumulator (`gradient_op: true` in the netlist)."""
    return {op for target, op in loopback_writers(graph).items() if graph.node(target).role == "gradient_accumulator"}
