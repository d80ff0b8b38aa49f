"""Decompose: replace composite ops (softmax, layernorm, conv2d, ...) by simpler ones, to a fixpoint.

Each op's decomposition lives in the op registry; this pass only provides the context they build with.
New ops are named `<original>.dc.<op_type>.<k>`, as in the legacy compiler."""
from __future__ import annotations

import numpy as np

from ..ir import Graph, Operand
from ..ops import add_op, registry
from .fuse_pad import fuse_into_conv


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
        """Add an op; it remembers the framework op it came from (`original_op_type`, for mixed precision)."""
        return add_op(self.graph, self._name(op_type), op_type, list(operands), attrs or {},
                      original_op_type=self.node.framework_op_type)

    def constant(self, value: np.ndarray, hint: str = "constant") -> str:
        return self.graph.add_constant(self._name(hint), value)

    def replace(self, result) -> None:
        """Route every user of the decomposed node to `result` (a node name or an Operand)."""
        src = result.src if isinstance(result, Operand) else result
        tms = result.tms if isinstance(result, Operand) else ()
        if self.graph.operand_shape(Operand(src, tms)) != self.node.shape:
            raise registry.OpError(f"decomposition of {self.node.name!r} ({self.node.op_type}) produced shape "
                                   f"{self.graph.operand_shape(Operand(src, tms))}, expected {self.node.shape}")
        self.graph.replace_uses(self.node.name, src, extra_tms=tms)
        self.replaced = True


def fuse_conv_bias(graph: Graph) -> None:
    """conv2d(x, w) + b  ->  conv2d(x, w, b) when b is a per-channel parameter/constant (legacy fuse_conv2d_bias),
    so the bias is added inside the convolution's matmul layout instead of on the NCHW view."""
    for name in graph.topo_order():
        node = graph.node(name) if name in graph else None
        if node is None or node.kind != "op" or node.op_type != "add":
            continue
        for conv_port in (0, 1):
            conv, bias = (o.src for o in (graph.operands(name)[conv_port], graph.operands(name)[1 - conv_port]))
            cnode, bnode = graph.node(conv), graph.node(bias)
            if cnode.kind != "op" or cnode.op_type != "conv2d" or len(graph.operands(conv)) != 2 \
                    or len(graph.users(conv)) != 1 or bnode.kind not in ("parameter", "constant"):
                continue
            cout = cnode.shape[-3]
            core = tuple(bnode.shape)
            while core and core[0] == 1 and len(core) > 1:
                core = core[1:]
            if node.shape != cnode.shape or core not in ((cout,), (cout, 1, 1)):
                continue
            flat = add_op(graph, graph.unique_name(f"{bias}.flat"), "reshape", [bias], {"shape": [cout]})
            fused = add_op(graph, graph.unique_name(f"{conv}.bias"), "conv2d", [*graph.operands(conv), flat],
                                 dict(cnode.attrs))
            graph.replace_uses(name, fused)
            graph.remove_node(name)
            graph.remove_node(conv)
            graph.rename(fused, conv)
            break


def decompose(graph: Graph, config=None) -> Graph:
    """Decompose every op with a registry decomposition until none is left (after a consteval sweep and
    conv-bias fusion, as the legacy post-initial-graph passes do)."""
    from .optimize import simplify

    simplify(graph, config)
    fuse_conv_bias(graph)
    fuse_into_conv(graph)  # zero pads -> conv padding, batchnorm -> conv weights (passes/fuse_pad.py)
    changed = True
    while changed:
        changed = False
        for name in graph.topo_order():
            if name not in graph or graph.node(name).kind != "op":
                continue
            opdef = registry.get(graph.node(name).op_type)
            if opdef.decompose is None:
                continue
            ctx = DecomposeContext(graph, name, config)
            try:
                opdef.decompose(ctx)
            except registry.OpError as e:
                if repr(name) in str(e):
                    raise
                raise registry.OpError(f"op {name!r} ({graph.node(name).op_type}): {e}") from None
            if ctx.replaced:
                graph.remove_node(name)
                changed = True
    graph.remove_dead()
    return graph
