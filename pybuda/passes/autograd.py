"""Autograd on the PyBuda graph (pybuda-passes.md §5), then the optimizer's graph.

The model's trained parameters (role "trained") get gradients by reverse-mode differentiation over the op
registry's backward rules: each model output gets a `loss_<output>` input (role "loss_gradient": the loss's
gradient with respect to that output, which the host computes), the gradients of a value that fans out are summed,
and a gradient a broadcast made larger is summed back to its operand's shape. Each parameter's gradient is written
into its gradient accumulator `grad_acc_<param>` (a parameter-like node, role "gradient_accumulator", which the
backward program zeroes on the first microbatch and the gradient op sums into), and the optimizer's ops read the
accumulators and write the new parameter values and their state back (outputs with `loopback`).

The graph is one sample, like every framework graph: the device runs a microbatch of samples through it, and the
gradient accumulators sum their gradients.
"""
from __future__ import annotations

import numpy as np

from ..ir import Graph, accumulator_of, epoch_types, loss_gradient_input, residual_of, state_of
from ..ops import registry
from ..ops.registry import OpError, add_op
from .host_io import apply_host_transforms


class AutogradError(OpError):
    """A model that cannot be trained as compiled; the message names the op or parameter."""


class BackwardContext:
    """What a backward rule sees: the forward op, its operands and output, and builders of backward ops (named
    `bw_in<operand>_<op>_<type>_<k>` as the legacy compiler named them)."""

    def __init__(self, graph: Graph, name: str, index: int):
        self.graph = graph
        self.node = graph.node(name)
        self.attrs = self.node.attrs
        self.output = name
        self.operands = [o.src for o in graph.operands(name)]
        self._prefix = f"bw_in{index}_{name}"
        self._count = 0

    def operand(self, index: int) -> str:
        return self.operands[index]

    def shape(self, index: int) -> tuple:
        return self.graph.node(self.operands[index]).shape

    def op(self, op_type: str, operands: list[str], attrs: dict | None = None) -> str:
        name = self.graph.unique_name(f"{self._prefix}_{op_type}_{self._count}")
        self._count += 1
        return add_op(self.graph, name, op_type, operands, attrs)

    def constant(self, value: np.ndarray) -> str:
        return self.graph.add_constant(self.graph.unique_name(f"{self._prefix}_constant"), value)

    def scalar(self, value: float) -> str:
        return self.constant(np.array([value], dtype=np.float32))


def _trained(graph: Graph) -> list[str]:
    return [n.name for n in graph.nodes("parameter") if n.role == "trained"]


def gradient_path(graph: Graph) -> set[str]:
    """The trained parameters and the ops a gradient flows through (on a path from a trained parameter to a model
    output), in one walk each way."""
    order = graph.topo_order()
    reached = set(_trained(graph))
    for name in order:
        if graph.node(name).kind == "op" and any(o.src in reached for o in graph.operands(name)):
            reached.add(name)
    needed = set(graph.output_names)
    for name in reversed(order):
        if name in needed:
            needed.update(o.src for o in graph.operands(name))
    return reached & needed


def check_backward_rules(graph: Graph, path: set[str] | None = None) -> None:
    """AutogradError naming every op on a gradient path (`gradient_path`) whose op type has no backward rule (before
    any work)."""
    path = gradient_path(graph) if path is None else path
    missing = {}
    for name in sorted((n for n in path if graph.node(n).kind == "op"), key=lambda n: graph.node(n).order):
        op_type = graph.node(name).op_type
        if registry.get(op_type).backward is None:
            missing.setdefault(op_type, []).append(name)
    if missing:
        listed = "; ".join(f"{t} (ops {', '.join(ns[:3])}{' ...' if len(ns) > 3 else ''})" for t, ns in missing.items())
        raise AutogradError(f"cannot train this model: no backward rule for op type(s) {listed}; freeze the "
                            "parameters before them (requires_grad=False)")


def _sum(graph: Graph, values: list[str], name: str) -> str:
    total = values[0]
    for k, value in enumerate(values[1:]):
        total = add_op(graph, graph.unique_name(f"{name}_combine_add_{k}"), "add", [total, value])
    return total


def _unbroadcast(ctx: BackwardContext, grad: str, shape: tuple) -> str:
    """`grad` summed over the dims a broadcast added or widened, reshaped to `shape`."""
    got = ctx.graph.node(grad).shape
    if tuple(got) == tuple(shape):
        return grad
    lead = len(got) - len(shape)
    for d in range(len(got)):
        if got[d] != 1 and (d < lead or shape[d - lead] == 1):
            grad = ctx.op("reduce_sum", [grad], {"dim": d - len(got), "keep_dim": True})
    if lead:
        grad = ctx.op("reshape", [grad], {"shape": list(shape)})
    return grad


def _kept_part(graph: Graph, param: str, grad: str) -> str:
    """The gradient of a trained parameter held padded on the device (`simplify.fold_trained_view`), zero on
    the padding: positions that are not the framework parameter's never change."""
    node = graph.node(param)
    if not any(op_type == "narrow" for op_type, _ in node.host_transforms):
        return grad
    index = np.arange(1, node.value.size + 1, dtype=np.float32).reshape(node.shape)
    kept = np.isin(index, apply_host_transforms(index, node.host_transforms)).astype(np.float32)
    mask = graph.add_constant(graph.unique_name(f"grad_{param}_kept"), kept)
    return add_op(graph, graph.unique_name(f"grad_{param}_kept_multiply"), "multiply", [grad, mask])


def differentiate(graph: Graph) -> dict[str, str]:
    """Add the backward ops of the graph's trained parameters; returns each one's gradient (a node name).

    AutogradError if an op on a gradient path has no backward rule, or no parameter gets a gradient."""
    trained = _trained(graph)
    needed = gradient_path(graph)
    check_backward_rules(graph, needed)
    order = graph.topo_order()
    grads: dict[str, list[str]] = {}
    for out in list(graph.outputs()):
        src = graph.output_source(out.name)
        if src in needed:
            loss = graph.add_input(loss_gradient_input(out.name), out.shape)
            graph.node(loss).role = "loss_gradient"
            grads.setdefault(src, []).append(loss)
    for name in reversed(order):
        node = graph.node(name)
        if node.kind != "op" or name not in grads:
            continue
        grad = _sum(graph, grads.pop(name), name)
        backward = registry.get(node.op_type).backward
        for index, operand in enumerate(graph.operands(name)):
            if operand.src not in needed:
                continue
            ctx = BackwardContext(graph, name, index)
            value = _unbroadcast(ctx, backward(ctx, index, grad), ctx.shape(index))
            grads.setdefault(operand.src, []).append(value)
    result = {p: _kept_part(graph, p, _sum(graph, grads[p], f"grad_{p}")) for p in trained if p in grads}
    if not result:
        raise AutogradError(f"model {graph.name!r}: no trained parameter reaches an output (parameters: "
                            f"{', '.join(trained) or 'none'})")
    return result


class OptimizerContext:
    """What an optimizer sees while it builds one parameter's update: builders of optimizer ops (named
    `opt_<param>_<type>_<k>`), its state (role "optimizer_state", kept on the device) and per-step scalars
    (role "optimizer_parameter", `input_opt_<param>_0.<name>`, written by the host before every step)."""

    def __init__(self, graph: Graph, param: str, scalars: dict[str, float], compensated: bool):
        self.graph = graph
        self.param = param
        self.compensated = compensated
        self.shape = graph.node(param).shape
        self.scalars = scalars
        self.writes: dict[str, str] = {}
        self._count = 0

    def op(self, op_type: str, operands: list[str], attrs: dict | None = None) -> str:
        name = self.graph.unique_name(f"opt_{self.param}_{op_type}_{self._count}")
        self._count += 1
        return add_op(self.graph, name, op_type, operands, attrs)

    def constant(self, value: float) -> str:
        return self.graph.add_constant(self.graph.unique_name(f"opt_{self.param}_constant"),
                                       np.array([value], dtype=np.float32))

    def scalar(self, name: str) -> str:
        """The per-step scalar `name` (its first step's value now; the runtime writes each step's)."""
        node = f"input_opt_{self.param}_0.{name}"
        if node not in self.graph:
            self.graph.add_parameter(node, np.array([self.scalars[name]], dtype=np.float32))
            self.graph.node(node).role = "optimizer_parameter"
        return node

    def state(self, name: str) -> str:
        """The state tensor `name` of this parameter (zeros at the start)."""
        node = state_of(self.param, name)
        if node not in self.graph:
            self.graph.add_parameter(node, np.zeros(self.shape, dtype=np.float32))
            self.graph.node(node).role = "optimizer_state"
        return node

    def write(self, target: str, value: str) -> None:
        """`value` becomes the new value of the parameter or state `target` after the step."""
        self.writes[target] = value

    def update(self, delta: str) -> None:
        """The parameter becomes param - delta. Compensated (Kahan summation), the parameter p keeps a residual r
        (`<p>.residual`) and its value is T(p) + r, T(p) being p as the device's math unit reads it (operands pass
        19-bit source registers, so a Float32 p near 1.0 loses any step below 2^-10; a 16-bit dest rounds the sum
        to the parameter's format): s = r - delta, p' = p + s, r' = s - (p' - p). The math unit computes
        p' - p as T(p') - T(p), exactly (two nearby values it holds), so what p' loses is kept in r' and no small
        update is lost. The runtime splits the initial value and adds the two back (runtime/training.py)."""
        if not self.compensated:
            self.write(self.param, self.op("subtract", [self.param, delta]))
            return
        residual = residual_of(self.param)
        self.graph.add_parameter(residual, np.zeros(self.shape, dtype=np.float32))
        self.graph.node(residual).role = "parameter_residual"
        self.graph.node(residual).host_transforms = self.graph.node(self.param).host_transforms
        s = self.op("subtract", [residual, delta])
        param = self.op("nop", [self.param])   # the one read of the parameter's ram, before its write
        new_param = self.op("add", [param, s])
        self.write(self.param, new_param)
        self.write(residual, self.op("subtract", [s, self.op("subtract", [new_param, param])]))


def recompute(graph: Graph) -> Graph:
    """`enable_recompute` (pybuda-passes.md §5.7): every forward value a backward op reads is computed again for the
    backward pass, by a copy `<op>_recompute` of the forward ops it needs (reading the graph inputs and parameters
    again), so no forward activation is kept for the backward epochs; the copies reach no model output and so run
    in the backward epochs."""
    types = epoch_types(graph)
    copies: dict[str, str] = {}

    def copy_of(name: str) -> str:
        if name not in copies:
            order, stack = [], [name]
            while stack:             # the forward ops `name` needs that have no copy yet, producers first
                n = stack.pop()
                if n in copies or n in order:
                    continue
                order.append(n)
                stack.extend(o.src for o in graph.operands(n) if types.get(o.src) == "forward")
            for n in sorted(order, key=lambda n: graph.node(n).order):
                node = graph.node(n)
                operands = [copies.get(o.src, o.src) if types.get(o.src) == "forward" else o.src
                            for o in graph.operands(n)]
                copies[n] = add_op(graph, graph.unique_name(f"{n}_recompute"), node.op_type, operands,
                                   dict(node.attrs))
        return copies[name]

    for name, kind in types.items():
        if kind == "forward":
            continue
        for port, operand in enumerate(graph.operands(name)):
            if types.get(operand.src) == "forward":
                graph.set_operand(name, port, copy_of(operand.src))
    return graph


def training_graph(graph: Graph, optimizer, compensated: bool = True, on_host: bool = False) -> Graph:
    """The graph with its backward ops, a gradient accumulator per trained parameter and the optimizer's update
    of each (pybuda.optimizers), parameters and state written back by loopback outputs; `compensated`: parameter
    updates keep a residual (`OptimizerContext.update`); `on_host`: no optimizer ops (the runtime updates the
    parameters on the host from the accumulators)."""
    grads = differentiate(graph)
    for param, grad in grads.items():
        acc = graph.add_parameter(accumulator_of(param), np.zeros(graph.node(param).shape, dtype=np.float32))
        graph.node(acc).role = "gradient_accumulator"
        graph.node(acc).host_transforms = graph.node(param).host_transforms   # back to the framework's layout
        graph.add_output(f"{acc}.write", grad, loopback=acc)
        if on_host:
            continue
        ctx = OptimizerContext(graph, param, optimizer.step_scalars(1), compensated)
        optimizer.build(ctx, param, acc)
        for target, value in ctx.writes.items():
            graph.add_output(f"{target}.write", value, loopback=target)
    return graph
