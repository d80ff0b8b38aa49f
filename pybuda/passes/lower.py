"""Lower (PyBuda IR -> Buda IR): every tensor becomes 4-D (w=1, z, r, c) padded to 32x32 tiles, every op a
Buda op type, every TM op an edge TM. Implicit broadcasts become tile broadcasts (plus an in-tile
replication: a pre-replicated constant or a tile-broadcast matmul).

Padding is tracked, not ignored: each lowered value knows whether its row/column padding is zero, and
lowerings mask padding where it would leak into results (matmul inner dim, max reductions, softmax)."""
from __future__ import annotations

import dataclasses

import numpy as np

from ..arch.operands import transpose_illegal
from ..ir import Graph, Operand, ShapeOnly
from ..ops import registry
from ..ops.common import ceil_tile
from ..ops.registry import OpError
from ..ops.tm import to4d
from .loopback import PAGES


def padded4(shape: tuple) -> tuple:
    """Device shape (1, z, R, C) in elements, R and C multiples of 32."""
    w, z, r, c = to4d(shape)
    if w != 1:
        raise OpError(f"shape {shape} has a non-unit 4th-from-last dim; only (z, r, c) tensors fit on device")
    return (1, z, ceil_tile(r), ceil_tile(c))


def pad_value(value: np.ndarray | ShapeOnly) -> np.ndarray | ShapeOnly:
    """A logical array zero-padded to its device shape (a read-only view when it needs no padding: BERT-Large's
    weights are 1.3 GB that a copy would only duplicate); unknown numbers stay unknown."""
    if isinstance(value, ShapeOnly):
        return ShapeOnly(padded4(value.shape))
    v4 = np.asarray(value, dtype=np.float32).reshape(to4d(np.shape(value)))
    if v4.shape == padded4(np.shape(value)):
        view = v4.view()
        view.flags.writeable = False
        return view
    out = np.zeros(padded4(np.shape(value)), dtype=np.float32)
    out[:, :, :v4.shape[2], :v4.shape[3]] = v4
    return out


@dataclasses.dataclass(frozen=True)
class Lowered:
    """A value in the Buda graph: producer, edge TMs, logical shape, padding knowledge."""

    src: str
    tms: tuple
    shape: tuple
    pad_zero: tuple = (True, True)        # (rows, cols) padding known to be zero
    replicated: frozenset = frozenset()   # "r"/"c": a size-1 logical dim replicated across the tile
    filled: frozenset = frozenset()       # (dim, value): padding along dim (-1 or -2) holds `value`

    @property
    def operand(self) -> Operand:
        return Operand(self.src, self.tms)


class LowerContext:
    """What a registry lowering sees: the PyBuda node, its lowered operands, and Buda-graph builders."""

    def __init__(self, bgraph: Graph, node, operands: list[Lowered], config, arch: str | None = None):
        self.graph = bgraph
        self.node = node
        self.operands = operands
        self.config = config
        self.arch = arch                  # the target arch; None: what is legal on every arch
        self._count = 0

    def _name(self, aux: str | None) -> str:
        """The op's own name for its first main op, `.lc<k>` for further ones, `.<aux>` for helper ops."""
        if aux:
            return self.graph.unique_name(f"{self.node.name}.{aux}")
        name = self.node.name if self._count == 0 else f"{self.node.name}.lc{self._count}"
        self._count += 1
        return self.graph.unique_name(name)

    def op(self, buda_type: str, operands: list[Lowered], attrs: dict, pad_zero: tuple = (False, False),
           replicated: frozenset = frozenset(), logical_shape: tuple | None = None, aux: str | None = None,
           filled: frozenset = frozenset()) -> Lowered:
        """Add a Buda op reading `operands`; `aux` names a helper op (mask, broadcast) after its purpose."""
        logical = tuple(logical_shape if logical_shape is not None else self.node.shape)
        expected = padded4(logical)
        operands = [self._transpose_legal(buda_type, i, x) for i, x in enumerate(operands)]
        name = self._name(aux)
        shape = registry.infer_shape(buda_type, [self.graph.operand_shape(o.operand) for o in operands], attrs, name)
        if shape != expected:
            raise OpError(f"lowering of {self.node.name!r} ({self.node.op_type}) built {buda_type} {name!r} with "
                          f"device shape {shape}, expected {expected} for logical shape {logical}")
        # large_padding: a block-float format would flush the real values that share a block with the fill
        self.graph.add_op(name, buda_type, [o.operand for o in operands], attrs, shape=shape, logical_shape=logical,
                          original_op_type=self.node.framework_op_type, large_padding=any(v for _, v in filled),
                          layer=self.node.layer)
        return Lowered(name, (), logical, tuple(pad_zero), frozenset(replicated), frozenset(filled))

    def _transpose_legal(self, buda_type: str, index: int, x: Lowered) -> Lowered:
        """x, or a datacopy (nop) applying x's TMs when they hold a transpose the backend does not allow on
        input `index` of a `buda_type` op (the rule of pybuda.arch.operands, which the validator applies too)."""
        if not any(tm[0] == "transpose" for tm in x.tms) or transpose_illegal(buda_type, index, self.arch) is None:
            return x
        return self.op("nop", [x], {}, pad_zero=x.pad_zero, replicated=x.replicated, logical_shape=x.shape,
                       aux=f"in{index}_transpose", filled=x.filled)

    def constant_padded(self, value4d: np.ndarray, logical_shape: tuple, name_hint: str = "constant",
                        kind: str = "constant") -> Lowered:
        name = self.graph.unique_name(f"{self.node.name}.{name_hint}")
        (self.graph.add_parameter if kind == "parameter" else self.graph.add_constant)(name, value4d)
        self.graph.node(name).logical_shape = tuple(logical_shape)
        r, c = to4d(logical_shape)[2:]
        pad_rows_zero = not np.any(value4d[..., r:, :])
        pad_cols_zero = not np.any(value4d[..., :, c:])
        return Lowered(name, (), tuple(logical_shape), (pad_rows_zero, pad_cols_zero))

    def tm(self, x: Lowered, tm: tuple, logical_shape: tuple) -> Lowered:
        pad, rep = x.pad_zero, x.replicated
        if tm[0] == "transpose":
            pad = (pad[1], pad[0])
            rep = frozenset({"r": "c", "c": "r"}[a] for a in rep)
        out = Lowered(x.src, x.tms + (tm,), tuple(logical_shape), pad, rep)
        got = self.graph.operand_shape(out.operand)
        if got != padded4(logical_shape):
            raise OpError(f"lowering of {self.node.name!r}: TM {tm} gives device shape {got}, expected "
                          f"{padded4(logical_shape)}")
        return out

    def relabel(self, x: Lowered, logical_shape: tuple, pad_zero: tuple | None = None) -> Lowered:
        """Same device tensor seen with another logical shape (must have the same device shape)."""
        if padded4(x.shape) != padded4(logical_shape):
            raise OpError(f"lowering of {self.node.name!r}: {x.shape} and {logical_shape} differ on device")
        return dataclasses.replace(x, shape=tuple(logical_shape), pad_zero=tuple(pad_zero or x.pad_zero))

    # -- broadcasting and padding control ---------------------------------------------------------
    def broadcast_to(self, x: Lowered, target: tuple, axes: str = "zrc") -> Lowered:
        """x broadcast (numpy rules) to `target` along the allowed axes, with tile TMs."""
        _, z, r, c = to4d(x.shape)
        _, tz, tr, tc = to4d(target)
        if r == 1 and tr > 1 and "r" in axes:
            x = self._replicate(x, "r")
        if c == 1 and tc > 1 and "c" in axes:
            x = self._replicate(x, "c")
        shape = list(to4d(x.shape))
        pad = list(x.pad_zero)
        for axis, have, want, idx in (("r", r, tr, 2), ("c", c, tc, 3)):
            if have == 1 and want > 1 and axis in axes:
                shape[idx] = want
                pad[idx - 2] = want % 32 == 0
                if ceil_tile(want) > 32:
                    x = self.tm(x, ("broadcast", axis, ceil_tile(want) // 32), tuple(shape))
                else:
                    x = self.relabel(x, tuple(shape))
                x = dataclasses.replace(x, pad_zero=tuple(pad))
        if z == 1 and tz > 1 and "z" in axes:
            shape[1] = tz
            x = self.tm(x, ("broadcast", "z", tz), tuple(shape))
        if tuple(shape) != to4d(x.shape):
            x = self.relabel(x, tuple(shape))
        return x

    def _replicate(self, x: Lowered, axis: str) -> Lowered:
        """Make a logical size-1 row (axis "r") or column ("c") fill its whole tile."""
        if axis in x.replicated:
            return x
        src = self.graph.node(x.src)
        if src.kind in ("parameter", "constant") and not x.tms and not src.mutable:
            # constants are replicated on the host, along every size-1 dim at once (a scalar fills its tile)
            _, _, r, c = to4d(x.shape)
            axes = {a for a, n in (("r", r), ("c", c)) if n == 1} | {axis}
            reps = (1, 1, 32 if "r" in axes else 1, 32 if "c" in axes else 1)
            value = (ShapeOnly(tuple(d if n == 1 else 32 for d, n in zip(src.value.shape, reps)))
                     if isinstance(src.value, ShapeOnly) else
                     np.tile(src.value[..., :1 if "r" in axes else None, :1 if "c" in axes else None], reps))
            name = f"{x.src}.brcst_{''.join(sorted(axes))}"
            if name not in self.graph:
                (self.graph.add_parameter if src.kind == "parameter" else self.graph.add_constant)(name, value)
                self.graph.node(name).logical_shape = src.logical_shape if src.logical_shape is not None else x.shape
            return Lowered(name, (), x.shape, ("r" not in axes and x.pad_zero[0], "c" not in axes and x.pad_zero[1]),
                           x.replicated | axes)
        z = to4d(x.shape)[1]
        picker = np.zeros((1, 1, 32, 32), dtype=np.float32)
        if axis == "r":
            picker[..., :, 0] = 1.0  # out = picker @ x: every row = row 0
            b = self.broadcast_to(self.constant_padded(picker, (32, 1), "tile_brcst_r_picker"), (z, 32, 1), axes="z")
            operands = [self.relabel(b, (*b.shape[:-1], 32)), x]
        else:
            picker[..., 0, :] = 1.0  # out = x @ picker: every column = column 0
            b = self.broadcast_to(self.constant_padded(picker, (1, 32), "tile_brcst_c_picker"), (z, 1, 32), axes="z")
            operands = [x, self.relabel(b, (*b.shape[:-2], 32, 32))]
        pad = (False, x.pad_zero[1]) if axis == "r" else (x.pad_zero[0], False)
        return self.op("matmul", operands, {}, pad_zero=pad, replicated=x.replicated | {axis},
                       logical_shape=x.shape, aux=f"tile_brcst_{axis}")

    def _edge_constant(self, row: np.ndarray | None, col: np.ndarray | None, x: Lowered, hint: str) -> Lowered:
        """A constant of x's device shape from a row pattern (1 tile high) or a column pattern (1 tile wide)."""
        _, z, r, c = to4d(x.shape)
        if row is not None:
            k = self.constant_padded(np.tile(row.reshape(1, 1, 1, -1), (1, 1, 32, 1)), (1, c), hint)
            k = dataclasses.replace(k, replicated=frozenset({"r"}))
        else:
            k = self.constant_padded(np.tile(col.reshape(1, 1, -1, 1), (1, 1, 1, 32)), (r, 1), hint)
            k = dataclasses.replace(k, replicated=frozenset({"c"}))
        return self.broadcast_to(k, (z, r, c))

    def mask_padding(self, x: Lowered, rows: bool, cols: bool) -> Lowered:
        """x with its row and/or column padding forced to zero (multiply by a 0/1 mask)."""
        _, z, r, c = to4d(x.shape)
        for axis, enabled, n in (("r", rows, r), ("c", cols, c)):
            if not enabled or n % 32 == 0:
                continue
            pattern = np.zeros(ceil_tile(n), dtype=np.float32)
            pattern[:n] = 1.0
            mask = self._edge_constant(pattern if axis == "c" else None, pattern if axis == "r" else None, x,
                                       f"pad_mask_{axis}")
            pad = (True, x.pad_zero[1]) if axis == "r" else (x.pad_zero[0], True)
            x = self.op("multiply", [x, mask], {}, pad_zero=pad, replicated=x.replicated, logical_shape=x.shape,
                        aux=f"pad_mask_{axis}")
        return x

    def fill_padding(self, x: Lowered, dim: int, value: float) -> Lowered:
        """x with `value` added into its padding along dim (-1 columns, -2 rows): keeps padding out of a max
        reduction or an exp (large negative value), or out of a reciprocal/log (1.0 onto zero padding)."""
        if (dim, value) in x.filled:
            return x
        n = to4d(x.shape)[dim]
        pattern = np.zeros(ceil_tile(n), dtype=np.float32)
        pattern[n:] = value
        k = self._edge_constant(pattern if dim == -1 else None, pattern if dim == -2 else None, x, "pad_fill")
        return self.op("add", [x, k], {}, pad_zero=(False, False), replicated=x.replicated, logical_shape=x.shape,
                       aux=None if self.node.op_type == "fill_padding" else "pad_fill",
                       filled=frozenset({(dim, value)}))

    def nonzero_padding(self, x: Lowered) -> Lowered:
        """x whose padding holds no zero (for ops with no finite value at 0): zero it where unknown, add 1.0."""
        shape = to4d(x.shape)
        for dim, axis in ((-2, "r"), (-1, "c")):
            if shape[dim] % 32 == 0 or axis in x.replicated or any(d == dim and v for d, v in x.filled):
                continue
            if not x.pad_zero[dim + 2]:
                x = self.mask_padding(x, rows=dim == -2, cols=dim == -1)
            x = self.fill_padding(x, dim, 1.0)
        return x


def _paged_state(bgraph: Graph, node) -> Lowered:
    """A paged state (`passes/loopback.py`) as a parameter of its pages along z (each the output's rows, t-slices
    the writer writes one of), read whole through a vstack of the pages on every reader's edge; its value holds one
    state per sample (samples, pages, rows, cols), its shape one sample's."""
    pages = node.attrs[PAGES]
    value = np.stack([pad_value(sample[None]) for sample in node.value])     # (samples, 1, 1 or z, rows, cols)
    samples, _, _, rows, cols = value.shape
    bgraph.add_parameter(node.name, value.reshape(samples, pages, rows // pages, cols))
    state = bgraph.node(node.name)
    state.shape = (1, pages, rows // pages, cols)
    state.logical_shape, state.role, state.attrs = node.shape, node.role, {PAGES: pages}
    return Lowered(node.name, (("vstack", pages),), node.shape)


def _loopback_writer(ctx: LowerContext, v: Lowered, target) -> Lowered:
    """The op that writes `v` back into the parameter-like `target`: the value with the zero padding every reader
    of a parameter assumes; a gradient accumulator gets a `nop` of its own (the gradient op, which sums into the
    accumulator: it may feed nothing else). A paged state takes one page (its rows over its pages)."""
    pages = target.attrs.get(PAGES, 1)
    page = tuple(target.shape) if pages == 1 else (*target.shape[:-2], target.shape[-2] // pages, target.shape[-1])
    if tuple(v.shape) != page:
        raise OpError(f"the update of {target.name!r} has shape {v.shape}, the parameter {target.shape}")
    v = ctx.mask_padding(v, rows=not v.pad_zero[0], cols=not v.pad_zero[1])
    if target.role == "gradient_accumulator" or v.tms or ctx.graph.node(v.src).kind != "op":
        v = ctx.op("nop", [v], {}, v.pad_zero, v.replicated, logical_shape=v.shape, aux="loopback_nop")
    return v


GRADIENT_OP_TYPES = ("matmul", "multiply", "nop")   # the ops every arch lets accumulate (gradient_op)


def _gradient_ops_write_directly(bgraph: Graph) -> None:
    """A gradient accumulator's `loopback_nop` is bypassed where the op before it may itself be the gradient op (a
    matmul, multiply or nop read by the nop alone, without TMs): the weight gradient's matmul then sums straight
    into the accumulator instead of handing every sample's gradient on (as the legacy compiler's gradient ops)."""
    for out in bgraph.outputs():
        if out.loopback is None or bgraph.node(out.loopback).role != "gradient_accumulator":
            continue
        nop = bgraph.node(bgraph.output_source(out.name))
        if nop.op_type != "nop" or nop.attrs or len(bgraph.users(nop.name)) != 1:
            continue
        (operand,) = bgraph.operands(nop.name)
        src = bgraph.node(operand.src)
        if (operand.tms or src.kind != "op" or src.op_type not in GRADIENT_OP_TYPES or src.attrs
                or len(bgraph.users(src.name)) != 1 or _transposes_input(bgraph, src)):
            continue
        bgraph.replace(nop.name, src.name)


def _transposes_input(bgraph: Graph, op) -> bool:
    """An input transpose on an op other than a matmul or nop, which a gradient op may not have (the backend's
    gradient.transpose rule)."""
    return op.op_type not in ("matmul", "nop") and any(
        tm[0] == "transpose" for operand in bgraph.operands(op.name) for tm in operand.tms)


def lower(graph: Graph, config=None, arch: str | None = None) -> Graph:
    """Build the Buda graph of a decomposed and optimized PyBuda graph for `arch` (None: legal on every arch)."""
    bgraph = Graph(graph.name)
    values: dict[str, Lowered] = {}
    for name in graph.topo_order():
        node = graph.node(name)
        if node.kind == "input":
            inp = bgraph.node(bgraph.add_input(name, padded4(node.shape)))
            inp.logical_shape, inp.host_transforms, inp.role = node.shape, node.host_transforms, node.role
            values[name] = Lowered(name, (), node.shape)
        elif node.role == "optimizer_parameter":
            # a per-step scalar: the host writes it into its whole tile (replicated, no zero padding)
            bgraph.add_parameter(name, np.full((1, 1, 32, 32), float(np.ravel(node.value)[0]), dtype=np.float32))
            bgraph.node(name).logical_shape, bgraph.node(name).role = node.shape, node.role
            values[name] = Lowered(name, (), node.shape, (False, False), frozenset({"r", "c"}))
        elif node.attrs.get(PAGES):
            values[name] = _paged_state(bgraph, node)
        elif node.kind in ("parameter", "constant"):
            (bgraph.add_parameter if node.kind == "parameter" else bgraph.add_constant)(name, pad_value(node.value))
            bgraph.node(name).logical_shape, bgraph.node(name).role = node.shape, node.role
            bgraph.node(name).host_transforms = node.host_transforms
            values[name] = Lowered(name, (), node.shape)
        elif node.kind == "op":
            opdef = registry.get(node.op_type)
            if opdef.lower is None:
                raise OpError(f"op {name!r} ({node.op_type}) has no device lowering: run it on the host by adding "
                              f"{node.op_type!r} to cpu_fallback_ops (with enable_tvm_cpu_fallback; it may sit "
                              "anywhere in the model), or report the op")
            if any(o.tms for o in graph.operands(name)):
                raise OpError(f"op {name!r}: PyBuda-level edge TMs are not expected before lowering")
            ctx = LowerContext(bgraph, node, [values[o.src] for o in graph.operands(name)], config, arch)
            result = opdef.lower(ctx)
            if tuple(result.shape) != tuple(node.shape):
                raise OpError(f"lowering of {name!r} ({node.op_type}) produced logical shape {result.shape}, "
                              f"expected {node.shape}")
            values[name] = result
        else:  # output: device output queues read op outputs without TMs
            v = values[graph.operands(name)[0].src]
            ctx = LowerContext(bgraph, graph.node(graph.operands(name)[0].src), [v], config, arch)
            if node.loopback is not None:
                v = _loopback_writer(ctx, v, graph.node(node.loopback))
            elif v.tms or bgraph.node(v.src).kind != "op":
                v = ctx.op("nop", [v], {}, v.pad_zero, v.replicated, logical_shape=v.shape, aux="output_nop")
            out = bgraph.node(bgraph.add_output(name, v.src, loopback=node.loopback))
            out.logical_shape, out.host_transforms, out.role = v.shape, node.host_transforms, node.role
    _gradient_ops_write_directly(bgraph)
    return bgraph
