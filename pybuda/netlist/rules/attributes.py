"""Rules on op attributes (netlist-format.md §3.1, §3.4)."""
from __future__ import annotations

from ...arch.optypes import OWN_ORDER_OPS
from ...arch.tilemap import stream_repeats
from ...dataformat import DataFormat as DF
from ..model import Op
from .connections import edge_pads
from .registry import Context, Edge, positive, rule, sized

_RAW = {DF.RawUInt8, DF.RawUInt16, DF.RawUInt32}


def _of_type(*types: str):
    """`when`: sized ops of these types."""
    return lambda op: op.type in types and sized(op)


@rule("attr.matmul_mk", on=Op, when=_of_type("matmul"), section="§3.1")
def attr_matmul_mk(c: Context, op: Op) -> None:
    """Matmul has attributes m_k > 0 and u_kt > 0."""
    a = op.attrs
    if not (isinstance(a.m_k, int) and a.m_k > 0 and isinstance(a.u_kt, int) and a.u_kt > 0):
        c.fail(op, "matmul needs attributes m_k > 0 and u_kt > 0", "m_k > 0, u_kt > 0", {"m_k": a.m_k, "u_kt": a.u_kt})


@rule("attr.accumulate_identity", on=Op, when=_of_type("matmul"), section="§3.1")
def attr_accumulate_identity(c: Context, op: Op) -> None:
    """A matmul is not both accumulate and identity."""
    if op.attrs.accumulate and op.attrs.identity:
        c.fail(op, "accumulate and identity cannot both be set", "one of them", "both")


@rule("attr.reduce", on=Op, when=_of_type("reduce"), section="§3.1")
def attr_reduce(c: Context, op: Op) -> None:
    """Reduce has attributes dim and type; an r/c reduce has m_k and u_kt > 0."""
    a = op.attrs
    if a.dim is None or a.type is None:
        c.fail(op, "reduce needs attributes dim and type", "dim and type", {"dim": a.dim, "type": a.type})
    if a.dim in ("r", "c") and not positive(a.m_k or 1, a.u_kt or 1):
        c.fail(op, "reduce m_k and u_kt must be > 0", "> 0", {"m_k": a.m_k, "u_kt": a.u_kt})


@rule("attr.z", on=Op, when=sized, section="§3.1")
def attr_z(c: Context, op: Op) -> None:
    """Attribute z only on reduce dim z (> 0) and on accumulating matmuls."""
    a = op.attrs
    if op.type == "reduce" and a.dim == "z" and not positive(a.z if a.z is not None else 1):
        c.fail(op, "reduce z must be > 0", "> 0", a.z)
    if a.z is not None:
        if op.type == "reduce" and a.dim != "z":
            c.fail(op, "attribute z is only valid for reduce dim: z", "dim: z", a.dim)
        elif op.type == "matmul" and not a.accumulate:
            c.fail(op, "attribute z is only valid for matmul with accumulate", "accumulate: true", None)


@rule("attr.splice", on=Op, when=_of_type("splice"), section="§3.1")
def attr_splice(c: Context, op: Op) -> None:
    """Splice has an inputN: [index >= 0, length > 0, stride > 0] attribute for every input."""
    infos = op.attrs.splice or {}
    n_in = len(op.inputs)
    if sorted(infos) != list(range(n_in)):
        c.fail(op, "splice needs an inputN: [index, length, stride] attribute for every input",
               [f"input{i}" for i in range(n_in)], [f"input{i}" for i in sorted(infos)])
    for i, (index, length, stride) in sorted(infos.items()):
        if index < 0 or length <= 0 or stride <= 0:
            c.fail(op, f"splice input{i}: index must be >= 0, length and stride > 0",
                   "index >= 0, length > 0, stride > 0", [index, length, stride])


@rule("op.embedding", on=Op, when=_of_type("embedding"), section="§3.4")
def op_embedding(c: Context, op: Op) -> None:
    """Embedding: num_indices % 32 == 0, ublock_rt == 1 and num_indices/32 == mblock_m."""
    ni = op.attrs.num_indices or 0
    if ni % 32 or op.ublock[0] != 1 or ni // 32 != op.mblock[0]:
        c.fail(op, "embedding needs num_indices % 32 == 0, ublock_rt == 1 and num_indices/32 == mblock_m",
               {"num_indices": f"{32 * op.mblock[0]}", "ublock_rt": 1},
               {"num_indices": op.attrs.num_indices, "ublock_rt": op.ublock[0]})


@rule("op.depthwise", on=Op, when=_of_type("depthwise"), section="§3.4")
def op_depthwise(c: Context, op: Op) -> None:
    """Depthwise: u_kt == 1 and m_k > 0."""
    a = op.attrs
    if a.u_kt != 1 or not (isinstance(a.m_k, int) and a.m_k > 0):
        c.fail(op, "depthwise needs u_kt == 1 and m_k > 0", {"u_kt": 1, "m_k": "> 0"}, {"u_kt": a.u_kt, "m_k": a.m_k})


@rule("attr.p", on=Op, when=sized, section="§3.1")
def attr_p(c: Context, op: Op) -> None:
    """Dropout probability p in [0, 1]."""
    p = op.attrs.p
    if p is not None and not 0.0 <= p <= 1.0:
        c.fail(op, "dropout probability must be in [0, 1]", "[0, 1]", p)


@rule("attr.relu_threshold", on=Op, when=sized, section="§3.1")
def attr_relu_threshold(c: Context, op: Op) -> None:
    """relu_threshold >= 0."""
    t = op.attrs.relu_threshold
    if t is not None and t < 0:
        c.fail(op, "relu_threshold must be >= 0", ">= 0", t)


@rule("attr.min_buffer_input", on=Op, when=sized, section="§3.1")
def attr_min_buffer_input(c: Context, op: Op) -> None:
    """min_buffer_input is 0 or 1 (0 on buffer and depthwise ops)."""
    m = op.attrs.min_buffer_input
    if m is not None and (m not in (0, 1) or (m == 1 and op.type in ("buffer", "depthwise"))):
        c.fail(op, "min_buffer_input must be 0 or 1 (0 for buffer/depthwise)",
               "0" if op.type in ("buffer", "depthwise") else "0 or 1", m)


@rule("attr.num_nz_strips", on=Op, when=sized, section="§3.1")
def attr_num_nz_strips(c: Context, op: Op) -> None:
    """num_nz_strips has one entry per core."""
    strips = op.attrs.num_nz_strips
    if strips is not None and len(strips) != op.cores:
        c.fail(op, "num_nz_strips needs one entry per core", op.cores, len(strips))


@rule("attr.kernel_broadcast", on=Op, when=sized, section="§3.4")
def attr_kernel_broadcast(c: Context, op: Op) -> None:
    """kernel_broadcast, kernel_broadcast_per_t and single_tile name inputs of the op, each with a broadcast TM."""
    a = op.attrs
    n_in = len(op.inputs)
    for name in ("kernel_broadcast", "kernel_broadcast_per_t"):
        for i in sorted(getattr(a, name) or {}):
            if i >= n_in:
                c.fail(op, f"{name} names input {i} but the op has {n_in} inputs", f"< {n_in}", i)
    for i in a.single_tile or ():
        if not 0 <= i < n_in:
            c.fail(op, f"single_tile names input {i} but the op has {n_in} inputs", f"0..{n_in - 1}", i)
    kb_inputs = set(a.kernel_broadcast or {}) | set(a.kernel_broadcast_per_t or {}) | set(a.single_tile or [])
    for i in sorted(kb_inputs):
        if i < n_in and ((a.kernel_broadcast or {}).get(i, 1) > 0 and (a.kernel_broadcast_per_t or {}).get(i, 1) > 0):
            if not any(tm[0] == "broadcast" for tm in op.tms(i)):
                c.fail(op, f"kernel broadcast on input {i} needs a broadcast TM on that input", "a broadcast TM",
                       [list(t) for t in op.tms(i)])


@rule("attr.kernel_broadcast_period", on=Edge, when=lambda e: e.op.attrs.kernel_broadcast_tiles(e.index) > 0 and
      (e.op.type in OWN_ORDER_OPS or e.op.type == "fused_op") and sized(e.producer), section="§2.6")
def attr_kernel_broadcast_period(c: Context, e: Edge) -> None:
    """An eltwise (or fused) op's kernel-broadcast input repeats the same producer tiles every kb tiles of each
    core's input stream, all t slices included (the kernel reuses the first kb; the backend refuses a stream
    that does not repeat). Not checked where the edge's shape is not the op's (a fused sub-op broadcasts)."""
    op, kb = e.op, e.op.attrs.kernel_broadcast_tiles(e.index)
    repeats = stream_repeats(tuple(e.producer.shape), tuple(tuple(tm) for tm in e.tms), *edge_pads(op, e.index),
                             tuple(op.grid_size), op.t, tuple(op.mblock), tuple(op.ublock), kb, op.ublock_order or "r")
    if repeats is False:
        c.fail(op, f"kernel broadcast of {kb} tiles on input {e.index}: a core's input stream does not repeat every "
               f"{kb} tiles", "a period of the post-TM stream", kb)


@rule("op.identity_matmul", on=Op, when=lambda op: op.type == "matmul" and bool(op.attrs.identity) and sized(op),
      section="§3.4")
def op_identity_matmul(c: Context, op: Op) -> None:
    """An identity (sparse) matmul has >= 3 inputs, its encodings (input 2) in RawUInt8/16/32 with broadcast TMs
    only."""
    n_in = len(op.inputs)
    if n_in < 3 or (len(op.in_df) > 2 and op.in_df[2] not in _RAW):
        c.fail(op, "an identity matmul needs >= 3 inputs with input 2 (encodings) in RawUInt8/16/32",
               ">= 3 inputs, in_df[2] RawUInt*",
               {"inputs": n_in, "in_df[2]": op.in_df[2].value if len(op.in_df) > 2 else None})
    tms2 = op.tms(2)
    if tms2 and tms2[0][0] != "broadcast":
        c.fail(op, "identity matmul encodings (input 2) support only broadcast TMs", "broadcast", tms2[0][0])


@rule("op.tilizer", on=Op, when=_of_type("tilizer"), section="§3.4")
def op_tilizer(c: Context, op: Op) -> None:
    """A tilizer op has no TMs on its input."""
    if any(op.input_tms.values()):
        c.fail(op, "a tilizer op may not have TMs on its input", "no TMs", "TMs")


@rule("arch.l1_acc", on=Op, when=sized, section="§3.4")
def arch_l1_acc(c: Context, op: Op) -> None:
    """L1 accumulation only on wormhole_b0."""
    if op.attrs.l1_acc and c.arch not in ("wormhole_b0", "blackhole"):
        c.fail(op, "L1 accumulation is only available on wormhole_b0", "wormhole_b0", c.arch)


@rule("arch.stoch_rnd", on=Op, when=sized, section="§3.4")
def arch_stoch_rnd(c: Context, op: Op) -> None:
    """Stochastic rounding only on wormhole_b0."""
    a = op.attrs
    if (a.stoch_rnd_mode not in (None, "none") or bool(a.srnd_fpu_en)) and c.arch != "wormhole_b0":
        c.fail(op, "stochastic rounding is only available on wormhole_b0", "wormhole_b0", c.arch)


@rule("arch.sfpu_thread", on=Op, when=sized, section="§3.4")
def arch_sfpu_thread(c: Context, op: Op) -> None:
    """Grayskull runs SFPU on the math thread only."""
    thread = op.attrs.sfpu_execution_thread
    if c.gs and thread not in (None, "math"):
        c.fail(op, "grayskull runs SFPU only on the math thread", "math", thread)
