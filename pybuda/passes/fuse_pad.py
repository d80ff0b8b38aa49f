"""Fold into each convolution the neighbours its decomposition absorbs for free. Run by `decompose` after
conv-bias fusion and before the registry decompositions (which would turn the convolution into matmuls):

- `fuse_pad_into_conv`: a zero `constant_pad` of H and W in front of a conv2d becomes part of the
  convolution's own padding (MobileNet's TF-"same" padding arrives as an explicit `nn.pad`);
- `fuse_batchnorm_into_conv`: an inference `batchnorm` whose input is a conv2d (used by nothing else)
  becomes the convolution's weights and bias, w' = w * scale and b' = b * scale + shift with
  scale = gamma / sqrt(var + eps), shift = beta - mean * scale, built as ops on the parameters so consteval
  folds them. The per-channel multiply and add then happen inside the convolution's matmul layout instead of
  on the NCHW view, where they would block the cancellation of the layout TMs between layers.
"""
from __future__ import annotations

from ..ir import Graph
from ..ops import add_op
from ..ops.conv import _pads
from ..ops.norm import build_scale_shift


def _op(graph: Graph, base: str):
    def op(op_type: str, operands: list, attrs: dict | None = None) -> str:
        return add_op(graph, graph.unique_name(f"{base}.{op_type}"), op_type, operands, attrs or {})
    return op


def fuse_pad_into_conv(graph: Graph) -> bool:
    changed = False
    for name in graph.topo_order():
        if name not in graph:
            continue
        node = graph.node(name)
        if node.kind != "op" or node.op_type != "conv2d":
            continue
        operand = graph.operands(name)[0]
        pad = graph.node(operand.src)
        if operand.tms or pad.kind != "op" or pad.op_type != "constant_pad" or float(pad.attrs.get("value", 0.0)):
            continue
        widths = [int(p) for p in pad.attrs["pad_width"]]
        if any(widths[:-4]) or any(p < 0 for p in widths):
            continue
        top, bottom, left, right = widths[-4:]
        pt, pl, pb, pr = _pads(node.attrs.get("padding", 0))
        node.attrs["padding"] = [pt + top, pl + left, pb + bottom, pr + right]
        graph.set_operand(name, 0, graph.operands(pad.name)[0])
        if not graph.users(pad.name):
            graph.remove_node(pad.name)
        changed = True
    return changed


def fuse_batchnorm_into_conv(graph: Graph) -> bool:
    changed = False
    for name in graph.topo_order():
        if name not in graph:
            continue
        node = graph.node(name)
        if node.kind != "op" or node.op_type != "batchnorm":
            continue
        dim = int(node.attrs.get("dim", -3))
        x, gamma, beta, mean, var = graph.operands(name)
        conv = graph.node(x.src)
        if (dim if dim < 0 else dim - len(node.shape)) != -3 or x.tms or conv.kind != "op" \
                or conv.op_type != "conv2d" or len(graph.users(conv.name)) != 1:
            continue
        op = _op(graph, f"{name}.fold")
        scale, shift = build_scale_shift(op, lambda v: graph.add_constant(graph.unique_name(f"{name}.fold.eps"), v),
                                         gamma, beta, mean, var, float(node.attrs.get("epsilon", 1e-5)))
        cx, w, *bias = graph.operands(conv.name)
        cout = conv.shape[-3]
        # the folded parameters are named after the conv weight and the batchnorm bias (consteval keeps the names)
        w_scaled = add_op(graph, graph.unique_name(f"{w.src}.folded"), "multiply",
                                [w, op("reshape", [scale], {"shape": [cout, 1, 1, 1]})])
        b_name = graph.unique_name(f"{beta.src}.folded")
        if bias:
            b_new = add_op(graph, b_name, "add", [op("multiply", [bias[0], scale]), shift])
        else:
            graph.rename(shift, b_name)
            b_new = b_name
        fused = add_op(graph, graph.unique_name(f"{conv.name}.bn"), "conv2d", [cx, w_scaled, b_new], dict(conv.attrs))
        graph.replace_uses(name, fused)
        graph.remove_node(name)
        graph.remove_node(conv.name)
        graph.rename(fused, conv.name)
        changed = True
    return changed


def fuse_into_conv(graph: Graph) -> Graph:
    """Both folds (pads first: a pad sits in front of the convolution, the batchnorm after it)."""
    fuse_pad_into_conv(graph)
    fuse_batchnorm_into_conv(graph)
    return graph
