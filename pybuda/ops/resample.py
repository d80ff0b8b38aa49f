"""Fixed linear maps of the spatial positions of an (..., C, H, W) tensor: `resize2d` (interpolate: nearest,
bilinear) and the zero insertion of a transposed convolution (`spatial_map`, used by conv_transpose2d).

Each is separable, y = A x B^T per channel with A (Ho, H) and B (Wo, W) built from the attributes, and is
decomposed like a convolution tap: the activation as a (spatial, channel) matrix, one sparse matmul by
kron(A, B) (its non-zeros are the interpolation weights), back to (..., C, Ho, Wo).
"""
from __future__ import annotations

import numpy as np

from ..sparse import SparseMatrix
from .common import ceil_tile
from .conv import from_spatial_rows, picker_matmul, to_spatial_rows
from .registry import OpDef, OpError, register


def spatial_map(ctx, x, shape: tuple, a: np.ndarray, b: np.ndarray):
    """y[..., c] = a @ x[..., c] @ b.T for x of `shape` (..., C, H, W), as one sparse matmul on spatial rows."""
    *lead, c, h, w = shape
    ho, wo = a.shape[0], b.shape[0]
    m = np.kron(a, b)
    r, k = np.nonzero(m)
    rows = ceil_tile(ho * wo)
    xt, lead = to_spatial_rows(ctx, x, c, h, w)
    y = picker_matmul(ctx, SparseMatrix.from_coo((rows, h * w), r, k, m[r, k]), xt)
    return from_spatial_rows(ctx, y, lead, c, ho, wo, rows)


def spatial_map_eval(x: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.einsum("oh,...chw,pw->...cop", a, x, b)


# ---- resize2d ---------------------------------------------------------------------------------------

_ROUND = {
    "round": lambda v: np.sign(v) * np.floor(np.abs(v) + 0.5),      # half away from zero
    "round_prefer_floor": lambda v: np.ceil(v - 0.5),
    "round_prefer_ceil": lambda v: np.floor(v + 0.5),
    "floor": np.floor,
    "ceil": np.ceil,
}


def _source_coords(n_in: int, n_out: int, mode: str) -> np.ndarray:
    """Input coordinate of each output position (Relax/ONNX coordinate_transformation_mode)."""
    i = np.arange(n_out, dtype=np.float64)
    scale = n_in / n_out
    if mode == "align_corners":
        return i * ((n_in - 1) / (n_out - 1) if n_out > 1 else 0.0)
    if mode == "asymmetric":
        return i * scale
    if mode in ("half_pixel", "pytorch_half_pixel"):
        if mode == "pytorch_half_pixel" and n_out == 1:
            return np.zeros(1)
        return (i + 0.5) * scale - 0.5
    raise OpError(f"resize2d coordinate_transformation_mode {mode!r} is not supported (legal: half_pixel, "
                  "pytorch_half_pixel, align_corners, asymmetric)")


def resize_matrix(n_in: int, n_out: int, method: str, mode: str, rounding: str) -> np.ndarray:
    """(n_out, n_in) interpolation matrix of one axis."""
    x = _source_coords(n_in, n_out, mode)
    out = np.zeros((n_out, n_in), dtype=np.float64)
    rows = np.arange(n_out)
    if method == "nearest_neighbor":
        if rounding not in _ROUND:
            raise OpError(f"resize2d rounding_method {rounding!r} is not supported (legal: {', '.join(_ROUND)})")
        out[rows, np.clip(_ROUND[rounding](x), 0, n_in - 1).astype(np.int64)] = 1.0
    elif method == "linear":
        x = np.clip(x, 0, n_in - 1)
        x0 = np.floor(x).astype(np.int64)
        x1 = np.minimum(x0 + 1, n_in - 1)
        frac = x - x0
        np.add.at(out, (rows, x0), 1.0 - frac)
        np.add.at(out, (rows, x1), frac)
    else:
        raise OpError(f"resize2d method {method!r} is not supported (legal: nearest_neighbor, linear)")
    return out.astype(np.float32)


def _resize_matrices(shape: tuple, attrs: dict) -> tuple[np.ndarray, np.ndarray]:
    ho, wo = (int(s) for s in attrs["size"])
    args = (attrs.get("method", "nearest_neighbor"), attrs.get("coordinate_transformation_mode", "half_pixel"),
            attrs.get("rounding_method", "round"))
    return resize_matrix(shape[-2], ho, *args), resize_matrix(shape[-1], wo, *args)


def _resize_shape(shapes, attrs):
    if len(shapes[0]) < 3:
        raise OpError(f"resize2d expects (..., C, H, W), got {shapes[0]}")
    return (*shapes[0][:-2], *(int(s) for s in attrs["size"]))


def _resize_eval(values, attrs):
    return spatial_map_eval(values[0], *_resize_matrices(values[0].shape, attrs))


def _decompose_resize(ctx):
    shape = ctx.node_input_shape(0)
    ctx.replace(spatial_map(ctx, ctx.operands[0], shape, *_resize_matrices(shape, ctx.node.attrs)))


# Relax image.resize2d (NCHW): torch F.interpolate / nn.Upsample, nearest and (bi)linear.
register(OpDef("resize2d", _resize_shape, _resize_eval, kind="nn", decompose=_decompose_resize))
