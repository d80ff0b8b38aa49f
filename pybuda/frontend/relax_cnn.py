"""Relax -> registry mappings for CNNs (ResNet, MobileNet, ...), merged into `torch_import._OPS`.

Handlers have the signature of those in `torch_import`: `(importer, call, out_shape) -> value`, and build with
the importer's helpers (`arg`, `emit`, `constant`, `shape`, `unsupported`).

    relax.nn.batch_norm            batchnorm (inference; the result is a tuple whose first field is the output)
    relax.nn.pad                   constant_pad (constant mode; an all-zero pad_width is the identity)
    relax.clip                     clip (ReLU6 is clip(0, 6))
    relax.nn.avg_pool2d            avg_pool2d
    relax.nn.adaptive_avg_pool2d   adaptive_avg_pool2d
    relax.nn.conv1d                conv1d
    relax.nn.conv2d_transpose      conv_transpose2d
    relax.image.resize2d           resize2d (nearest, linear)
    relax.nn.group_norm            groupnorm ((N, C, L) or (N, C, H, W))
    relax.mean                     over H and W of an NCHW tensor (a global average pool): adaptive_avg_pool2d
                                   (1, 1); any other axes: reduce_avg per axis, as torch_import maps it
"""
from __future__ import annotations

import math

import numpy as np
from tvm import relax


def _scalar(e) -> float:
    """A Relax scalar operand (FloatImm/IntImm, a PrimValue wrapping one, a scalar tensor constant) as a float."""
    value = e.value
    while hasattr(value, "value"):  # PrimValue -> FloatImm -> float
        value = value.value
    return float(value.numpy()) if hasattr(value, "numpy") else float(value)


def _batch_norm(imp, call: relax.Call, out: tuple) -> tuple:
    a = call.attrs
    if bool(getattr(a, "training", False)):
        imp.unsupported(" in training mode")
    x = imp.arg(call, 0)
    shape = imp.shape(x)
    axis = int(a.axis) % len(shape)
    c = shape[axis]
    gamma = imp.arg(call, 1) if a.scale else imp.constant(np.ones(c, dtype=np.float32))
    beta = imp.arg(call, 2) if a.center else imp.constant(np.zeros(c, dtype=np.float32))
    y = imp.emit("batchnorm", [x, gamma, beta, imp.arg(call, 3), imp.arg(call, 4)],
                 {"dim": axis - len(shape), "epsilon": float(a.epsilon)})
    return y, None, None  # Relax batch_norm returns (output, new running mean, new running var)


def _pad(imp, call: relax.Call, out: tuple) -> str:
    a = call.attrs
    if str(a.pad_mode) != "constant":
        imp.unsupported(f" in {a.pad_mode} mode")
    x = imp.arg(call, 0)
    widths = [int(p) for p in a.pad_width]
    value = getattr(a, "pad_value", None)
    value = _scalar(call.args[1]) if value is None and len(call.args) > 1 else float(value or 0.0)
    if not any(widths):
        return x
    return imp.emit("constant_pad", [x], {"pad_width": widths, "value": value})


def _clip(imp, call: relax.Call, out: tuple) -> str:
    lo, hi = _scalar(call.args[1]), _scalar(call.args[2])
    attrs = {}
    if lo > -math.inf:
        attrs["min"] = lo
    if hi < math.inf:
        attrs["max"] = hi
    return imp.emit("clip", [imp.arg(call, 0)], attrs)


def _check_layout(imp, a) -> None:
    if a.layout != "NCHW" or (a.out_layout or a.layout) != "NCHW":
        imp.unsupported(f" with layout {a.layout}/{a.out_layout}")


def _avg_pool2d(imp, call: relax.Call, out: tuple) -> str:
    a = call.attrs
    _check_layout(imp, a)
    return imp.emit("avg_pool2d", [imp.arg(call, 0)], {
        "kernel": [int(k) for k in a.pool_size], "stride": [int(s) for s in a.strides],
        "padding": [int(p) for p in a.padding], "dilation": [int(d) for d in a.dilation],
        "ceil_mode": bool(a.ceil_mode), "count_include_pad": bool(a.count_include_pad)})


def _adaptive_avg_pool2d(imp, call: relax.Call, out: tuple) -> str:
    a = call.attrs
    _check_layout(imp, a)
    x = imp.arg(call, 0)
    if tuple(imp.shape(x)) == tuple(out):
        return x
    return imp.emit("adaptive_avg_pool2d", [x], {"output_size": [int(out[-2]), int(out[-1])]})


def _mean(imp, call: relax.Call, out: tuple) -> str:
    x = imp.arg(call, 0)
    rank = len(imp.shape(x))
    axes = None if call.attrs.axis is None else sorted({int(i) % rank for i in call.attrs.axis})
    if rank == 4 and axes == [2, 3]:
        y = imp.emit("adaptive_avg_pool2d", [x], {"output_size": [1, 1]})
        return y if imp.shape(y) == tuple(out) else imp.emit("reshape", [y], {"shape": list(out)})
    from .torch_import import _reduce  # the generic mapping (imported late: torch_import imports this module)
    return _reduce("reduce_avg")(imp, call, out)


def _layouts(imp, call: relax.Call, data: str, kernel: str) -> None:
    a = call.attrs
    if (a.data_layout, a.kernel_layout, a.out_layout or a.data_layout) != (data, kernel, data):
        imp.unsupported(f" with layouts {a.data_layout}/{a.kernel_layout}/{a.out_layout}")


def _conv1d(imp, call: relax.Call, out: tuple) -> str:
    _layouts(imp, call, "NCW", "OIW")
    a = call.attrs
    return imp.emit("conv1d", [imp.arg(call, 0), imp.arg(call, 1)], {
        "stride": int(a.strides[0]), "padding": [int(p) for p in a.padding], "dilation": int(a.dilation[0]),
        "groups": int(a.groups)})


def _conv2d_transpose(imp, call: relax.Call, out: tuple) -> str:
    _layouts(imp, call, "NCHW", "IOHW")
    a = call.attrs
    return imp.emit("conv_transpose2d", [imp.arg(call, 0), imp.arg(call, 1)], {
        "stride": [int(s) for s in a.strides], "padding": [int(p) for p in a.padding],
        "output_padding": [int(p) for p in a.output_padding], "dilation": [int(d) for d in a.dilation],
        "groups": int(a.groups)})


def _resize2d(imp, call: relax.Call, out: tuple) -> str:
    a = call.attrs
    if a.layout != "NCHW":
        imp.unsupported(f" with layout {a.layout}")
    return imp.emit("resize2d", [imp.arg(call, 0)], {
        "size": list(out[-2:]), "method": str(a.method),
        "coordinate_transformation_mode": str(a.coordinate_transformation_mode),
        "rounding_method": str(a.rounding_method)})


def _group_norm(imp, call: relax.Call, out: tuple) -> str:
    a = call.attrs
    x = imp.arg(call, 0)
    rank = len(imp.shape(x))
    if rank not in (3, 4) or int(a.channel_axis) % rank != 1 or sorted(int(i) % rank for i in a.axes) != \
            list(range(2, rank)):
        imp.unsupported(f" over channel axis {a.channel_axis}, axes {list(a.axes)} (only (N, C, L) or (N, C, H, W))")
    c = imp.shape(x)[1]
    gamma = imp.arg(call, 1) if a.scale else imp.constant(np.ones(c, dtype=np.float32))
    beta = imp.arg(call, 2) if a.center else imp.constant(np.zeros(c, dtype=np.float32))
    return imp.emit("groupnorm", [x, gamma, beta], {"groups": int(a.num_groups), "epsilon": float(a.epsilon)})


HANDLERS = {
    "relax.nn.conv1d": _conv1d,
    "relax.nn.conv2d_transpose": _conv2d_transpose,
    "relax.image.resize2d": _resize2d,
    "relax.nn.group_norm": _group_norm,
    "relax.nn.batch_norm": _batch_norm,
    "relax.nn.pad": _pad,
    "relax.clip": _clip,
    "relax.nn.avg_pool2d": _avg_pool2d,
    "relax.nn.adaptive_avg_pool2d": _adaptive_avg_pool2d,
    "relax.mean": _mean,
}
