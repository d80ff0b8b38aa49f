"""Fold into each convolution the neighbours its decomposition absorbs for free. Run by `decompose` after
conv-bias fusion and before the registry decompositions (which would turn the convolution into matmuls):

- `fuse_pad_into_conv`: a zero `constant_pad` of H and W in front of a conv2d becomes part of the
  convolution's own padding (MobileNet's TF-"same" padding arrives as an explicit `nn.pad`);
- `fuse_batchnorm_into_conv`: an inference `batchnorm` whose input is a conv2d (used by nothing else)
  becomes the convolution's weights and bias, w' = w * scale and b' = b * scale + shift with
  scale = gamma / sqrt(var + eps), shift = beta - mean * scale, built as ops on the parameters so consteval
  folds them. The per-channel multiply and add then happen inside the convolution's matmul layout instead of
  on the NCHW view, where they would block the cancellation of the layout TMs between layers. Not when a
  parameter of either is trained: the folded weight would be an op on the trained weight, which the device
  cannot hold in its matrix layout; the batchnorm then decomposes on its own (a per-channel scale and shift).
"""
from __future__ import annotations

from ..ir import Graph, Node
from ..ops import add_op
from ..ops.conv import _pads
from ..ops.norm import build_scale_shift
from .rewrite import Pattern, rewrite, sweep


def _zero_pad_of_hw(graph: Graph, pad: Node) -> bool:
    widths = [int(p) for p in pad.attrs["pad_width"]]
    return not float(pad.attrs.get("value", 0.0)) and not any(widths[:-4]) and all(p >= 0 for p in widths)


@rewrite(Pattern("conv2d", operands=[Pattern("constant_pad", where=_zero_pad_of_hw)]))
def fuse_pad_into_conv(graph: Graph, node: Node) -> bool:
    """conv2d(constant_pad(x, zeros on H and W)) -> conv2d(x) with the pad added to the conv's padding."""
    pad = graph.producer(node.name)
    top, bottom, left, right = [int(p) for p in pad.attrs["pad_width"]][-4:]
    pt, pl, pb, pr = _pads(node.attrs.get("padding", 0))
    node.attrs["padding"] = [pt + top, pl + left, pb + bottom, pr + right]
    graph.set_operand(node.name, 0, graph.operands(pad.name)[0], prune=True)
    return True


def _on_channels(graph: Graph, node: Node) -> bool:
    dim = int(node.attrs.get("dim", -3))
    return (dim if dim < 0 else dim - len(node.shape)) == -3


def _foldable_batchnorm(graph: Graph, node: Node) -> bool:
    conv = graph.producer(node.name)
    params = [o.src for o in (*graph.operands(node.name)[1:], *graph.operands(conv.name)[1:])]
    return _on_channels(graph, node) and not any(graph.node(p).mutable for p in params)


@rewrite(Pattern("batchnorm", where=_foldable_batchnorm, operands=[Pattern("conv2d", single_user=True)]))
def fuse_batchnorm_into_conv(graph: Graph, node: Node) -> bool:
    """batchnorm(conv2d(x, w[, b])) -> conv2d(x, w * scale, b * scale + shift), built as ops on the parameters."""
    x, gamma, beta, mean, var = graph.operands(node.name)
    conv = graph.node(x.src)
    base = f"{node.name}.fold"

    def op(op_type: str, operands: list, attrs: dict | None = None) -> str:
        return add_op(graph, graph.unique_name(f"{base}.{op_type}"), op_type, operands, attrs or {})

    scale, shift = build_scale_shift(op, lambda v: graph.add_constant(graph.unique_name(f"{base}.eps"), v),
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
    graph.replace(node.name, fused, prune=True)
    graph.rename(fused, conv.name)
    return True


# Pads first: a pad sits in front of the convolution, the batchnorm after it.
CONV_FOLDS = (fuse_pad_into_conv, fuse_batchnorm_into_conv)


def fuse_into_conv(graph: Graph) -> Graph:
    """One sweep of each fold."""
    sweep(graph, CONV_FOLDS)
    return graph
