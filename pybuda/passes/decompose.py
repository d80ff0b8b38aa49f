"""Decompose: replace composite ops (softmax, layernorm, conv2d, ...) by simpler ones, to a fixpoint.

Each op's decomposition lives in the op registry; this pass only provides the context they build with.
New ops are named `<original>.dc.<op_type>.<k>`, as in the legacy compiler."""
from __future__ import annotations

import numpy as np

from ..ir import Graph, Node, Operand, as_operand
from ..ops import add_op, registry
from .fuse_pad import CONV_FOLDS
from .rewrite import Pattern, Rewrite, fixpoint, rewrite, sweep
from .simplify import simplify


class DecomposeContext:
    """What a registry decomposition sees: the node, its operands, and builders for replacement ops."""

    def __init__(self, graph: Graph, name: str, config):
        self.graph = graph
        self.node = graph.node(name)
        self.operands: list[Operand] = graph.operands(name)
        self.config = config
        self._count = 0
        self.replaced = False

    def _name(self, kind: str) -> str:
        self._count += 1
        return self.graph.unique_name(f"{self.node.name}.dc.{kind}.{self._count}")

    def node_input_shape(self, index: int) -> tuple:
        return self.graph.operand_shape(self.operands[index])

    def op(self, op_type: str, operands: list, attrs: dict | None = None) -> str:
        """Add an op; it remembers the framework op it came from (`original_op_type`, for mixed precision) and
        its layer."""
        return add_op(self.graph, self._name(op_type), op_type, list(operands), attrs or {},
                      original_op_type=self.node.framework_op_type, layer=self.node.layer)

    def constant(self, value: np.ndarray, hint: str = "constant") -> str:
        return self.graph.add_constant(self._name(hint), value)

    def replace(self, result: str | Operand) -> None:
        """Substitute the decomposed node by `result` (a node name or an Operand) of the same shape."""
        result = as_operand(result)
        if self.graph.operand_shape(result) != self.node.shape:
            raise registry.OpError(f"decomposition of {self.node.name!r} ({self.node.op_type}) produced shape "
                                   f"{self.graph.operand_shape(result)}, expected {self.node.shape}")
        self.graph.replace(self.node.name, result)
        self.replaced = True


@rewrite(Pattern("add"))
def fuse_conv_bias(graph: Graph, node: Node) -> bool:
    """conv2d(x, w) + b  ->  conv2d(x, w, b) when b is a per-channel parameter/constant (legacy fuse_conv2d_bias),
    so the bias is added inside the convolution's matmul layout instead of on the NCHW view."""
    for conv_port in (0, 1):
        conv, bias = graph.producer(node.name, conv_port), graph.producer(node.name, 1 - conv_port)
        if conv.kind != "op" or conv.op_type != "conv2d" or len(graph.operands(conv.name)) != 2 \
                or len(graph.users(conv.name)) != 1 or bias.kind not in ("parameter", "constant"):
            continue
        cout = conv.shape[-3]
        core = tuple(bias.shape)
        while core and core[0] == 1 and len(core) > 1:
            core = core[1:]
        if node.shape != conv.shape or core not in ((cout,), (cout, 1, 1)):
            continue
        flat = add_op(graph, graph.unique_name(f"{bias.name}.flat"), "reshape", [bias.name], {"shape": [cout]})
        fused = add_op(graph, graph.unique_name(f"{conv.name}.bias"), "conv2d", [*graph.operands(conv.name), flat],
                       dict(conv.attrs))
        graph.replace(node.name, fused, prune=True)
        graph.rename(fused, conv.name)
        return True
    return False


def _decompose_op(config) -> Rewrite:
    """The rewrite that applies the registry decomposition of an op."""
    def apply(graph: Graph, node: Node) -> bool:
        ctx = DecomposeContext(graph, node.name, config)
        try:
            registry.get(node.op_type).decompose(ctx)
        except registry.OpError as e:
            if repr(node.name) in str(e):
                raise
            raise registry.OpError(f"op {node.name!r} ({node.op_type}): {e}") from None
        return ctx.replaced
    return Rewrite("decompose_op", Pattern(where=lambda g, n: registry.get(n.op_type).decompose is not None), apply)


def decompose(graph: Graph, config=None) -> Graph:
    """Decompose every op with a registry decomposition until none is left (after the value folds and the folds
    into convolutions, as the legacy post-initial-graph passes do)."""
    simplify(graph, config)
    sweep(graph, [fuse_conv_bias, *CONV_FOLDS])  # zero pads -> conv padding, batchnorm -> conv weights (fuse_pad.py)
    fixpoint(graph, [_decompose_op(config)])
    graph.remove_dead()
    return graph
