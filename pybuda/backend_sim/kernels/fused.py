"""fused_op: run a `fused_ops` schedule per core.

Every core of the op runs the schedules on its own block of the inputs, so the kernel splits each input into
per-core blocks (extra leading dims (grid_r, grid_c)): an input read as input 1 of a matmul sub-op is split by
grid columns only (each core row needs all K rows), as input 0 of a matmul by grid rows only, otherwise by rows
and columns. Sub-ops run in schedule order on these blocks with their own TMs (broadcast r/c/z in tiles,
tile_broadcast r/c). Results go to `dest` (rounded to acc_df), `intermed<K>` (intermed_df) or `output`
(out_df). `pop` / `pop_last` only free buffers on hardware; an intermediate keeps its latest value here.
"""
from __future__ import annotations

import dataclasses
import re
from typing import Callable, Mapping

import numpy as np

from pybuda.arch.tms import apply_tm, tile_broadcast
from pybuda.netlist import Attributes, FusedOp, FusedSubOp, Netlist, Op

from ..errors import SimulatorError
from ..formats import quantize
from .common import TILE, packer_relu

_INDEXED = re.compile(r"^(input|intermed)(\d+)$")


def fused_op_definition(netlist: Netlist, op: Op) -> FusedOp:
    """The `fused_ops` entry a fused_op op runs (its `fused_op_id`)."""
    fid = op.attrs.fused_op_id
    if fid is None:
        raise SimulatorError(f"op {op.name!r} (fused_op) has no fused_op_id attribute")
    fdef = netlist.fused_op_of(op)
    if fdef is None:
        raise SimulatorError(f"op {op.name!r}: fused_op_id {fid!r} is not defined in fused_ops "
                             f"(defined: {', '.join(netlist.fused_ops or ()) or 'none'})")
    return fdef


def sub_op_as_op(op: Op, sub: FusedSubOp, in_df: list, attributes: Attributes) -> Op:
    """A sub-op as the kernels take it: one core's op (grid 1x1) with the sub-op's type, blocking and
    `attributes`, and the fused op's t, output / intermediate / dest formats and math fidelity; `in_df` are the
    formats its operands hold values of."""
    return Op(name=f"{op.name}.{sub.name}", type=sub.type, grid_size=(1, 1), inputs=list(sub.inputs), t=op.t,
              mblock=sub.mblock, ublock=sub.ublock, buf_size_mb=op.buf_size_mb, ublock_order=op.ublock_order,
              in_df=in_df, out_df=op.out_df, intermed_df=op.intermed_df, acc_df=op.effective_acc_df,
              math_fidelity=op.math_fidelity, attributes=attributes, graph=op.graph)


def _ref(name: str, where: str) -> tuple[str, int]:
    if name == "dest":
        return "dest", 0
    m = _INDEXED.match(name)
    if not m:
        raise SimulatorError(f"{where}: unknown operand {name!r}; legal: input<N>, intermed<K>, dest")
    return m.group(1), int(m.group(2))


def _split(x: np.ndarray, gr: int, gc: int, role: str, where: str) -> np.ndarray:
    """(..., t, R, C) -> (..., gr', gc', t, R/gr', C/gc') with gr' = 1 for 'cols', gc' = 1 for 'rows'."""
    *lead, t, rows, cols = x.shape
    rr = 1 if role == "cols" else gr
    cc = 1 if role == "rows" else gc
    if rows % (rr * TILE) or cols % (cc * TILE):
        raise SimulatorError(f"{where}: {rows // TILE}x{cols // TILE} tiles do not split into {rr}x{cc} cores")
    v = x.reshape(*lead, t, rr, rows // rr, cc, cols // cc)
    n = len(lead)
    order = list(range(n)) + [n + 1, n + 3, n, n + 2, n + 4]
    return v.transpose(order)


def _merge(x: np.ndarray) -> np.ndarray:
    """(..., gr, gc, t, Rc, Cc) -> (..., t, gr*Rc, gc*Cc)."""
    *lead, gr, gc, t, rc, cc = x.shape
    n = len(lead)
    order = list(range(n)) + [n + 2, n, n + 3, n + 1, n + 4]
    return np.ascontiguousarray(x.transpose(order)).reshape(*lead, t, gr * rc, gc * cc)


def _apply_tms(x: np.ndarray, tms: list, where: str) -> np.ndarray:
    for tm in tms:
        if tm[0] == "tile_broadcast":
            x = tile_broadcast(x, tm[1])
        elif tm[0] == "broadcast":
            x = apply_tm(x, tm)
        else:
            raise SimulatorError(f"{where}: TM {tm[0]!r} is not allowed inside fused ops (broadcast and "
                                 f"tile_broadcast only)")
    return x


def fused_op(op: Op, ins: list[np.ndarray], netlist: Netlist, kernels: Mapping[str, Callable]) -> np.ndarray:
    fdef = fused_op_definition(netlist, op)
    where = f"op {op.name!r} (fused_op {fdef.id})"
    if len(ins) != fdef.inputs:
        raise SimulatorError(f"{where}: {len(ins)} inputs but the fused op definition has {fdef.inputs}")
    gr, gc = op.grid_size
    roles = dict(enumerate(fdef.input_roles()))
    blocks = {k: _split(x, gr, gc, roles.get(k, "both"), f"{where} input {k}") for k, x in enumerate(ins)}
    intermed: dict[int, np.ndarray] = {}
    dest: np.ndarray | None = None
    result: np.ndarray | None = None
    approx = op.attrs.approximate_mode
    for sub in fdef.sub_ops:
        swhere = f"{where} sub-op {sub.name!r}"
        args = []
        formats = []  # the formats the sub-op's inputs hold values of
        for pos, name in enumerate(sub.inputs):
            kind, idx = _ref(name, swhere)
            if kind == "input":
                if idx not in blocks:
                    raise SimulatorError(f"{swhere}: input{idx} does not exist ({len(ins)} inputs)")
                v, df = blocks[idx], op.in_df[idx]
            elif kind == "intermed":
                if idx >= max(fdef.intermediates, 1) and idx not in intermed:
                    raise SimulatorError(f"{swhere}: intermed{idx} outside the {fdef.intermediates} intermediates")
                if idx not in intermed:
                    raise SimulatorError(f"{swhere}: intermed{idx} is read before any sub-op wrote it")
                v, df = intermed[idx], op.intermed_df
            else:
                if dest is None:
                    raise SimulatorError(f"{swhere}: reads dest before any sub-op wrote it")
                v, df = dest, op.effective_acc_df
            formats.append(df)
            args.append(_apply_tms(v, sub.input_tms.get(pos) or [], swhere))
        if "dest" not in sub.inputs:
            dest = None  # every sub-op that does not read dest overwrites it
        attrs = sub.attrs
        if approx and attrs.approximate_mode is None:
            attrs = dataclasses.replace(attrs, approximate_mode=approx)
        spec = sub_op_as_op(op, sub, formats, attrs)
        if sub.type not in kernels or sub.type in ("fused_op", "splice", "embedding"):
            raise SimulatorError(f"{swhere}: op type {sub.type!r} is not supported inside fused ops")
        if sub.type == "matmul" and attrs.identity:
            raise SimulatorError(f"{swhere}: identity matmul is not supported inside fused ops")
        y = kernels[sub.type](spec, args)
        expect = (sub.mblock[0] * sub.ublock[0] * TILE, sub.mblock[1] * sub.ublock[1] * TILE)
        if y.shape[-2:] != expect:
            raise SimulatorError(f"{swhere}: produces {y.shape[-2] // TILE}x{y.shape[-1] // TILE} tiles per core, "
                                 f"mblock x ublock is {expect[0] // TILE}x{expect[1] // TILE}")
        y = packer_relu(spec, y)
        out_kind, out_idx = ("output", 0) if sub.output == "output" else _ref(sub.output, swhere)
        if out_kind == "dest":
            dest = quantize(y, op.effective_acc_df)
        elif out_kind == "intermed":
            if out_idx >= fdef.intermediates:
                raise SimulatorError(f"{swhere}: writes intermed{out_idx}, but the fused op has "
                                     f"{fdef.intermediates} intermediates")
            intermed[out_idx] = quantize(y, op.intermed_df)
        elif out_kind == "output":
            result = y
        else:
            raise SimulatorError(f"{swhere}: output must be intermed<K>, dest or output, got {sub.output!r}")
    if result is None:
        raise SimulatorError(f"{where}: no sub-op writes the output")
    if result.shape[-5:-3] != (gr, gc):
        result = np.broadcast_to(result, result.shape[:-5] + (gr, gc) + result.shape[-3:])
    return _merge(result)

