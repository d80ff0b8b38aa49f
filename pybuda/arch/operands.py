"""What an op's operands are to the hardware (netlist-format.md §3.2, §3.8): the shape each input must have, the
tiles one core reads of it per input, and the granule its input buffer is sized in.

An op is described by an `OpGeometry`: its type, grid, per-core blocking and its attributes. Attributes are read
by name (`pybuda.netlist.model.Attributes` is the typed form; any object with the `OpAttributes` fields works).
"""
from __future__ import annotations

import dataclasses
import math
from typing import Protocol

from .optypes import BINARY_OPS, DATACOPY_OPS, ELTWISE_SHAPED_OPS, SFPU_OPS, family_of

LATENCY_HIDING_BYTES = 32 * 1024   # an input buffer hides ~1024 cycles of 32 B/cycle transfer


class OpAttributes(Protocol):
    """The op attributes the backend model reads; None = not set."""

    m_k: int | None
    u_kt: int | None
    identity: bool | None
    accumulate: bool | None
    z: int | None
    dim: str | None
    bias: bool | None
    act_t: int | None
    min_buffer_input: int | None
    indices_len: int | None
    sparse_nz_ublocks: int | None
    sparse_nz_strips: int | None
    vector: str | None
    approximate_mode: bool | None
    l1_acc: bool | None
    requant: bool | None
    dequant: bool | None

    def kernel_broadcast_tiles(self, index: int) -> int: ...


@dataclasses.dataclass(frozen=True, slots=True)
class OpGeometry:
    """An op as one core runs it: type, grid (rows, cols), t and the per-core mblock/ublock, plus attributes.
    `input_roles` (fused ops): how each input is split over the cores, "rows" (read as a matmul sub-op's first
    operand: every core of a grid row reads the same rows), "cols" (its second operand) or "both"."""

    type: str
    grid: tuple
    t: int
    mblock: tuple
    ublock: tuple
    attrs: OpAttributes
    input_roles: tuple = ()

    @property
    def cores(self) -> int:
        return self.grid[0] * self.grid[1]

    @property
    def m_k(self) -> int:
        return self.attrs.m_k or 1

    @property
    def u_kt(self) -> int:
        return self.attrs.u_kt or 1

    @property
    def k_tiles(self) -> int:
        """Inner-dimension tiles of matmul, depthwise and reduce: m_k * u_kt."""
        return self.m_k * self.u_kt

    @property
    def identity(self) -> bool:
        """A sparse (identity) matmul: inputs are sparse tiles, activations, encoding."""
        return self.type == "matmul" and bool(self.attrs.identity)

    @property
    def mblock_tiles(self) -> int:
        return self.mblock[0] * self.mblock[1] * self.ublock[0] * self.ublock[1]

    @property
    def tiles_per_core(self) -> int:
        """Output tiles one core produces per input."""
        return self.t * self.mblock_tiles

    @property
    def shape(self) -> tuple:
        """(t, rt, ct) of the whole output, in tiles."""
        return (self.t, self.grid[0] * self.mblock[0] * self.ublock[0], self.grid[1] * self.mblock[1] * self.ublock[1])


def inner_dim(op_type: str, *, identity: bool = False, dim: str | None = None) -> tuple[int, int] | None:
    """(input index, axis: 1 = rows, 2 = columns of its (t, rt, ct)) that carries the inner dimension K an op
    accumulates over in m_k steps of u_kt tiles: matmul input 0's columns (an identity matmul: its activations'
    rows), reduce r/c its rows/columns; None for ops without one."""
    if op_type == "matmul":
        return (1, 1) if identity else (0, 2)
    if op_type == "reduce" and dim in ("r", "c"):
        return (0, 1 if dim == "r" else 2)
    return None


def expected_input(op: OpGeometry, index: int) -> tuple[tuple | None, str | None]:
    """(t, rt, ct) the op expects on input `index` after the edge's TMs and the rule that says so; (None, None)
    when the backend does not constrain that input's shape."""
    t, rt, ct = op.shape
    a = op.attrs
    k = op.k_tiles
    if op.type == "matmul":
        tz = t * (a.z or 1) if a.accumulate else t
        if op.identity:
            return ((a.act_t or tz, k, ct), "shape.matmul_in1") if index == 1 else (None, None)
        if index == 0:
            return (tz, rt, k), "shape.matmul_in0"
        if index == 1:
            return (tz, k, ct), "shape.matmul_in1"
        if index == 2 and a.bias:
            return (t, rt, ct), "shape.matmul_bias"
        return None, None
    if op.type == "depthwise":
        if index == 0:
            return (t, rt, op.m_k * ct), "shape.depthwise"
        if index == 1:
            return (t, op.m_k, ct), "shape.depthwise"
        if index == 2 and a.bias:
            return (t, rt, ct), "shape.depthwise"
        return None, None
    if op.type == "reduce":
        gr, gc = op.grid
        if a.dim == "r":
            return (t, gr * k, ct), "shape.reduce"
        if a.dim == "c":
            return (t, rt, gc * k), "shape.reduce"
        if a.dim == "z":
            return (t * (a.z or 1), rt, ct), "shape.reduce"
        return None, None
    if op.type in ELTWISE_SHAPED_OPS:
        return (t, rt, ct), "shape.eltwise"
    return None, None


def _role(op: OpGeometry, index: int) -> str:
    """How input `index` is split over the cores: "rows" (over grid rows only: every core of a grid row reads
    it), "cols" (over grid columns only) or "both"."""
    if op.identity:
        return "cols" if index == 1 else "rows"
    if op.type == "matmul" and index in (0, 1):
        return "rows" if index == 0 else "cols"
    if index < len(op.input_roles):
        return op.input_roles[index]
    return "both"


def tiles_read_per_core(op: OpGeometry, index: int, shape: tuple) -> float:
    """Tiles one core reads of input `index` per input, from the input's (t, rt, ct) after TMs: matmul input 0
    is split over grid rows and input 1 over grid columns (identity matmul: sparse tiles and encoding per grid
    row, all activations of the core's columns; a fused op's inputs by their `input_roles`); anything else is
    split evenly over the cores."""
    total = shape[0] * shape[1] * shape[2]
    gr, gc = op.grid
    role = _role(op, index)
    return total / (gr if role == "rows" else gc if role == "cols" else op.cores)


def input_buffer_inputs(op: OpGeometry, index: int, shape: tuple, tile_bytes: int, min_tiles: int = 0) -> float:
    """How many inputs' worth of input `index` (shape (t, rt, ct) after TMs) the op's input buffer holds, as the
    backend sizes it (`input_buffer_tiles`); unbounded for a kernel-broadcast input (read once, kept)."""
    if op.attrs.kernel_broadcast_tiles(index):
        return math.inf
    tiles = input_buffer_tiles(input_granule(op, index), tile_bytes, min_tiles=min_tiles)
    per_input = tiles_read_per_core(op, index, shape)
    return tiles / per_input if per_input else math.inf


def output_granules(op: OpGeometry) -> int:
    """How many blocks of one input's output the op emits one after the other: a whole mblock per t slice when
    its output accumulates over an inner dimension (matmul with m_k > 1, reduce, an identity matmul), else every
    ublock as it is computed."""
    accumulates = op.type == "reduce" or op.identity or (op.type in ("matmul", "depthwise") and op.m_k > 1)
    return op.t * (1 if accumulates else op.mblock[0] * op.mblock[1])


def output_buffer_inputs(op: OpGeometry, buf_size_mb: int) -> float:
    """How many inputs' worth of output the op's output buffer (`buf_size_mb` mblocks) holds: one input is t
    mblocks."""
    return max(buf_size_mb, 1) / op.t


def prologue_tiles_per_core(op: OpGeometry, index: int, queue_shape: tuple) -> int:
    """Tiles of a prologued queue one core holds in L1: the queue's (t, rt, ct) split over the op's grid (each
    grid dim by its largest factor not above it); an identity matmul's sparse tiles and encoding whole per grid
    row (the kernel reads them in place)."""
    t, rt, ct = queue_shape
    if op.identity and index != 1:
        return -(-t * rt * ct // op.grid[0])
    role = "both" if op.type == "matmul" else _role(op, index)
    rows = rt if role == "cols" else rt // _largest_factor_le(rt, op.grid[0])
    cols = ct if role == "rows" else ct // _largest_factor_le(ct, op.grid[1])
    return t * rows * cols


def _largest_factor_le(n: int, limit: int) -> int:
    return next(f for f in range(min(n, limit), 0, -1) if n % f == 0)


def input_granule(op: OpGeometry, index: int) -> int:
    """Tiles of input `index` the kernel consumes at a time (its input buffer holds whole granules, §3.8):
    matmul input 0 a ublock row strip of u_kt (a whole mblock row unless min_buffer_input is 0), input 1 a
    column strip (a whole mblock column unless min_buffer_input is 1); reduce a strip along the reduced dim;
    anything else one ublock. 0 for an identity matmul's sparse tiles, read in place from their prologue buffer."""
    urt, uct = op.ublock
    mm, mn = op.mblock
    a = op.attrs
    if op.type == "matmul" and index == 0:
        return 0 if op.identity else urt * op.u_kt * (1 if a.min_buffer_input == 0 else mm)
    if op.type == "matmul" and index == 1:
        return op.u_kt * uct * (1 if a.min_buffer_input == 1 else mn)
    if op.type == "reduce" and a.dim == "r":
        return uct * op.u_kt
    if op.type == "reduce" and a.dim == "c":
        return urt * op.u_kt
    return urt * uct


def input_buffer_tiles(granule: int, tile_bytes: int, *, latency_hiding: bool = True, min_tiles: int = 0) -> int:
    """Tiles of an input buffer (§3.8): two granules (double buffering), at least `min_tiles`
    (input_buf_min_size_tiles) and, with latency hiding as the backend sizes it, ~32 KB (a power-of-two number of
    tiles), rounded up to whole double granules."""
    if granule == 0:
        return min_tiles
    tiles = max(2 * granule, min_tiles)
    if latency_hiding:
        latency = 1
        while latency * tile_bytes < LATENCY_HIDING_BYTES:
            latency *= 2
        tiles = max(tiles, latency)
    return -(-tiles // (2 * granule)) * 2 * granule


def input_count(op: OpGeometry) -> int | None:
    """How many inputs the backend expects the op to have; None when it varies (splice, fused ops, ...)."""
    family = family_of(op.type)
    a = op.attrs
    if family == "binary":
        return 2
    if family in ("datacopy", "sfpu", "ethernet", "tilizer", "buffer", "reduce"):
        return 1
    if op.type == "matmul" and not op.identity:
        return 2 + bool(a.bias) + bool(a.requant or a.dequant)
    if op.type == "depthwise":
        return 2 + bool(a.bias)
    if op.type == "embedding":
        return 2
    return None


def transpose_illegal(op_type: str, index: int, arch: str | None) -> tuple[str, object, object] | None:
    """Why a transpose TM on input `index` of an `op_type` op is illegal on `arch` (None: on every arch), as
    (message, what would be legal, what was found), or None if it is legal (netlist-format.md §3.8): matmul input 1,
    any unary (datacopy/sfpu) input, binary input 0 on wormhole_b0. Int32 inputs are the validator's concern."""
    if op_type == "matmul":
        return None if index == 1 else (
            f"transpose is only supported on matmul input 1, found on input {index}", 1, index)
    if op_type in DATACOPY_OPS or op_type in SFPU_OPS:
        return None
    if index == 0 and op_type in BINARY_OPS:
        return None if arch == "wormhole_b0" else (
            "transpose on binary input 0 is not supported on grayskull", "wormhole_b0", arch or "any arch")
    return (f"transpose can be done only on matmul input 1, a unary input or binary input 0 (not on grayskull); "
            f"found on {op_type} input {index}", "matmul in1 / unary / binary in0", f"{op_type} input {index}")
