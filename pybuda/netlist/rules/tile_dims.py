"""Tile-dimension rules (netlist-format.md §3.4): tiny tiles (Nx32, 32x16) only where the backend supports them.

The rules on ops apply to sized ops that meet a tile other than 32x32 (on an input, after the edge's transposes,
or on the output)."""
from __future__ import annotations

from ...arch.optypes import BINARY_OPS, DATACOPY_OPS, SFPU_OPS
from ...dataformat import DataFormat as DF
from ..model import Op, Queue
from ..sizes import tile_data_aligned
from .registry import Context, rule, sized

_TRANSPOSE_TILE = {(32, 16): (16, 32), (16, 32): (32, 16)}
_TINY_OK_TYPES = DATACOPY_OPS | SFPU_OPS | BINARY_OPS | {"tilizer"}
_FULL = (32, 32)


def input_tile_dims(c: Context, op: Op) -> list:
    """The tile dims of each input of `op` after its edge's transposes (None where the input names nothing)."""
    def compute():
        g = c.graph_of[id(op)]
        out = []
        for i, src in enumerate(op.inputs):
            prod = c.producer(src, g)
            td = prod.effective_tile_dim if prod is not None else None
            for tm in op.tms(i) if td is not None else ():
                if tm[0] == "transpose":
                    td = _TRANSPOSE_TILE.get(td, td)
            out.append(td)
        return out
    return c.memo(("tile_dims", id(op)), compute)


def tiny_tiles(c: Context, op: Op) -> list | None:
    """The input tile dims of a sized op that meets a tile other than 32x32, else None."""
    if not sized(op):
        return None
    tiles = input_tile_dims(c, op)
    if all(td in (None, _FULL) for td in tiles) and op.effective_tile_dim == _FULL:
        return None
    return tiles


@rule("tile_dim.op_input", on=Op, section="§3.4")
def tile_dim_op_input(c: Context, op: Op) -> None:
    """Tiny input tiles only on dense matmul inputs 0/1 (1x32 also on input 2), identity matmul input 1 and
    datacopy, SFPU, binary and tilizer ops."""
    tiles = tiny_tiles(c, op)
    dense = op.type == "matmul" and not op.attrs.identity
    ident = op.type == "matmul" and bool(op.attrs.identity)
    for i, td in enumerate(tiles or ()):
        if td in (None, _FULL):
            continue
        if not ((dense and (td == (1, 32) or i != 2)) or (ident and i == 1) or op.type in _TINY_OK_TYPES):
            c.fail(op, f"tile_dim {list(td)} on input {i} of a {op.type} op: tiny tiles are supported on dense "
                   "matmul inputs 0/1, identity matmul input 1 and datacopy/SFPU/binary ops", [32, 32], list(td))


@rule("tile_dim.alignment", on=(Queue, Op), section="§3.4")
def tile_dim_alignment(c: Context, x) -> None:
    """Tiles are 32 B aligned for the NOC (not Bfp2 with 1x32 / 2x32 tiles, nor Bfp4 with 1x32): queues, op
    outputs and op inputs."""
    if isinstance(x, Queue):
        if x.tile_dim is not None and not tile_data_aligned(x.df, x.tile_dim):
            c.fail(x, f"{x.df.value} tiles of {list(x.tile_dim)} are not 32 B aligned", "a 32 B aligned tile",
                   list(x.tile_dim))
        return
    tiles = tiny_tiles(c, x)
    if tiles is None:
        return
    if not tile_data_aligned(x.out_df, x.effective_tile_dim):
        c.fail(x, f"{x.out_df.value} output tiles of {list(x.effective_tile_dim)} are not 32 B aligned",
               "a 32 B aligned tile", list(x.effective_tile_dim))
    for i, td in enumerate(tiles):
        if td is not None and i < len(x.in_df) and not tile_data_aligned(x.in_df[i], td):
            c.fail(x, f"input {i}: {x.in_df[i].value} tiles of {list(td)} are not 32 B aligned",
                   "a 32 B aligned tile", list(td))


@rule("tile_dim.int", on=Op, section="§3.4")
def tile_dim_int(c: Context, op: Op) -> None:
    """No tiny tiles with Int8/Int32 formats."""
    tiles = tiny_tiles(c, op)
    ints = (DF.Int8, DF.Int32)
    if tiles is not None and (any(d in ints for d in op.in_df) or op.out_df in ints):
        c.fail(op, "tiny tiles are not supported with Int8/Int32 formats", [32, 32],
               [list(t) for t in tiles if t] + [list(op.effective_tile_dim)])


@rule("tile_dim.binary", on=Op, when=lambda op: op.type in BINARY_OPS, section="§3.4")
def tile_dim_binary(c: Context, op: Op) -> None:
    """Binary op inputs have the same tile dims."""
    tiles = tiny_tiles(c, op)
    if tiles is not None and len(tiles) >= 2 and None not in tiles[:2] and tiles[0] != tiles[1]:
        c.fail(op, "binary op inputs must have the same tile dims", list(tiles[0]), list(tiles[1]))


@rule("tile_dim.32x16", on=Op, when=lambda op: op.type in _TINY_OK_TYPES, section="§3.4")
def tile_dim_32x16(c: Context, op: Op) -> None:
    """On eltwise ops, 32x16 input tiles go with 32x16 output tiles and vice versa."""
    tiles = tiny_tiles(c, op)
    first = tiles[0] if tiles else None
    if first is not None and (first == (32, 16)) != (op.effective_tile_dim == (32, 16)):
        c.fail(op, "32x16 input tiles need 32x16 output tiles and vice versa", list(first),
               list(op.effective_tile_dim))


@rule("tile_dim.sfpu_vector", on=Op, when=lambda op: op.type in SFPU_OPS, section="§3.4")
def tile_dim_sfpu_vector(c: Context, op: Op) -> None:
    """SFPU ops on Nx32 tiles use vector mode r, on 32x16 tiles vector mode c."""
    tiles = tiny_tiles(c, op)
    first = tiles[0] if tiles else None
    vector = op.attrs.vector
    if first is not None and first not in ((32, 32), (32, 16)) and vector not in (None, "r"):
        c.fail(op, "SFPU ops on Nx32 tiles need vector mode r", "r", vector)
    if first == (32, 16) and vector not in (None, "c"):
        c.fail(op, "SFPU ops on 32x16 tiles need vector mode c", "c", vector)


@rule("tile_dim.matmul_32x16", on=Op, when=lambda op: op.type == "matmul", section="§3.4")
def tile_dim_matmul_32x16(c: Context, op: Op) -> None:
    """Matmul input 1 tiles and output tiles are both 32x16 or neither."""
    tiles = tiny_tiles(c, op)
    if tiles is not None and len(tiles) > 1 and tiles[1] is not None and \
            (tiles[1] == (32, 16)) != (op.effective_tile_dim == (32, 16)):
        c.fail(op, "matmul input 1 tiles and output tiles must both be 32x16 or neither", list(tiles[1]),
               list(op.effective_tile_dim))


@rule("tile_dim.matmul_features", on=Op, when=lambda op: op.type == "matmul" and not op.attrs.identity,
      section="§3.4")
def tile_dim_matmul_features(c: Context, op: Op) -> None:
    """A dense matmul with tiny tiles fuses no SFPU op and accumulates no gradients."""
    if tiny_tiles(c, op) is not None and (op.attrs.sfpu_op is not None or op.gradient_op):
        c.fail(op, "matmul with tiny tiles cannot fuse an SFPU op or accumulate gradients", "32x32 tiles",
               list(op.effective_tile_dim))


@rule("tile_dim.gradient_datacopy", on=Op, when=lambda op: op.type in DATACOPY_OPS and bool(op.gradient_op),
      section="§3.4")
def tile_dim_gradient_datacopy(c: Context, op: Op) -> None:
    """A gradient datacopy has equal input and output tile dims."""
    tiles = tiny_tiles(c, op)
    first = tiles[0] if tiles else None
    if first is not None and first != op.effective_tile_dim:
        c.fail(op, "a gradient datacopy needs equal input and output tile dims", list(op.effective_tile_dim),
               list(first))


@rule("tile_dim.queue", on=Queue, section="§3.4")
def tile_dim_queue(c: Context, q: Queue) -> None:
    """A queue has its producer op's tile_dim."""
    prod = c.ops.get(q.input) if q.fed_by_op else None
    if prod is not None and prod.effective_tile_dim != q.effective_tile_dim:
        c.fail(q, f"a queue must have its producer {prod.name!r}'s tile_dim", list(prod.effective_tile_dim),
               list(q.effective_tile_dim))
