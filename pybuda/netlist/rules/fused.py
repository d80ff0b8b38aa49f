"""Fused-op rules (netlist-format.md §1.7): schedules name the op's inputs, intermediates and dest correctly, and
the graph ops that run a fused op agree with its definition."""
from __future__ import annotations

from ..model import FusedOp, Op
from .registry import Context, positive, rule


def _where(f: FusedOp, s) -> str:
    return f"fused_op {f.id} sub-op {s.name}"


@rule("fused.counts", on=FusedOp, section="§1.7")
def fused_counts(c: Context, f: FusedOp) -> None:
    """inputs and intermediates >= 0."""
    if f.inputs < 0 or f.intermediates < 0:
        c.fail(f, "inputs and intermediates must be >= 0", ">= 0",
               {"inputs": f.inputs, "intermediates": f.intermediates})


@rule("fused.empty_schedule", on=FusedOp, section="§1.7")
def fused_empty_schedule(c: Context, f: FusedOp) -> None:
    """Every schedule has at least one op."""
    for sched in f.schedules:
        if not sched:
            c.fail(f, "a schedule needs at least one op", ">= 1 op", 0)


@rule("fused.input_name", on=FusedOp, section="§1.7")
def fused_input_name(c: Context, f: FusedOp) -> None:
    """A sub-op reads inputN (N < inputs), intermedN (N < intermediates) or dest."""
    for s in f.sub_ops:
        for name in s.inputs:
            if name == "dest":
                continue
            if name.startswith("input"):
                idx = name[5:]
                if not (idx.isdigit() and int(idx) < f.inputs):
                    c.fail(_where(f, s), f"{name!r} is not one of the fused op's {f.inputs} inputs",
                           f"input0..input{f.inputs - 1}", name, line=s.line)
            elif name.startswith("intermed"):
                idx = name[8:]
                if not (idx.isdigit() and int(idx) < f.intermediates):
                    c.fail(_where(f, s), f"{name!r} is not one of the fused op's {f.intermediates} intermediates",
                           f"intermed0..intermed{f.intermediates - 1}", name, line=s.line)
            else:
                c.fail(_where(f, s), f"sub-op input {name!r} must be inputN, intermedN or dest",
                       "inputN, intermedN or dest", name, line=s.line)


@rule("fused.output_name", on=FusedOp, section="§1.7")
def fused_output_name(c: Context, f: FusedOp) -> None:
    """A sub-op writes dest, output or intermedN (N < intermediates)."""
    for s in f.sub_ops:
        out = s.output
        if not (out in ("dest", "output") or (out.startswith("intermed") and out[8:].isdigit()
                                               and int(out[8:]) < f.intermediates)):
            c.fail(_where(f, s), f"sub-op output {out!r} must be dest, output or intermedN",
                   "dest, output or intermedN", out, line=s.line)


def _after_dest_writer(f: FusedOp):
    """(sub-op, what the sub-op before it in its schedule writes, "" for the first)."""
    for sched in f.schedules:
        prev = ""
        for s in sched:
            yield s, prev
            prev = s.output


@rule("fused.dest_read", on=FusedOp, section="§1.7")
def fused_dest_read(c: Context, f: FusedOp) -> None:
    """The sub-op after one that writes dest reads dest."""
    for s, prev in _after_dest_writer(f):
        if prev == "dest" and "dest" not in s.inputs:
            c.fail(_where(f, s), "the previous sub-op writes dest, so this one must read dest",
                   "dest among the inputs", s.inputs, line=s.line)


@rule("fused.dest_first", on=FusedOp, section="§1.7")
def fused_dest_first(c: Context, f: FusedOp) -> None:
    """A sub-op reads dest only right after one that writes it."""
    for s, prev in _after_dest_writer(f):
        if "dest" in s.inputs and prev != "dest":
            c.fail(_where(f, s), "reads dest but the previous sub-op does not write dest" +
                   (" (it is the first of the schedule)" if not prev else ""), "previous output dest", prev or None,
                   line=s.line)


@rule("fused.matmul_output", on=FusedOp, section="§1.7")
def fused_matmul_output(c: Context, f: FusedOp) -> None:
    """A matmul sub-op with m_k > 1 does not write the schedule's output."""
    for s in f.sub_ops:
        if s.output == "output" and s.type == "matmul" and (s.attrs.m_k or 1) > 1:
            c.fail(_where(f, s), "a matmul with m_k > 1 cannot be the schedule's output", "m_k == 1", s.attrs.m_k,
                   line=s.line)


@rule("fused.pop", on=FusedOp, section="§1.7")
def fused_pop(c: Context, f: FusedOp) -> None:
    """pop_last names intermediate buffers."""
    for s in f.sub_ops:
        for p in s.pop_last or ():
            if not p.startswith("intermed"):
                c.fail(_where(f, s), f"pop_last {p!r} must be an intermediate buffer", "intermedN", p, line=s.line)


# --- graph ops running a fused op ----------------------------------------------------------------------------------

def _fused_op(op: Op) -> bool:
    return op.type == "fused_op"


@rule("fused.missing_id", on=Op, when=_fused_op, section="§1.7")
def fused_missing_id(c: Context, op: Op) -> None:
    """A fused_op op's fused_op_id is defined in the fused_ops section."""
    if c.n.fused_op_of(op) is None:
        fid = op.attrs.fused_op_id
        c.fail(op, f"fused_op_id {fid!r} is not in the fused_ops section", "an id of fused_ops", fid)


@rule("fused.input_count", on=Op, when=_fused_op, section="§1.7")
def fused_input_count(c: Context, op: Op) -> None:
    """A fused_op op has as many inputs as its definition."""
    f = c.n.fused_op_of(op)
    if f is not None and f.inputs != len(op.inputs):
        c.fail(op, f"fused op {f.id} has {f.inputs} inputs", f.inputs, len(op.inputs))


@rule("fused.dims", on=Op, when=_fused_op, section="§1.7")
def fused_dims(c: Context, op: Op) -> None:
    """Every sub-op of the op's fused op has mblock and ublock > 0."""
    f = c.n.fused_op_of(op)
    for s in f.sub_ops if f is not None else ():
        if not positive(*s.mblock, *s.ublock):
            c.fail(op, f"sub-op {s.name}: mblock and ublock must be > 0", "> 0",
                   {"mblock": list(s.mblock), "ublock": list(s.ublock)})


@rule("fused.output_dims", on=Op, when=_fused_op, section="§1.7")
def fused_output_dims(c: Context, op: Op) -> None:
    """The sub-op that writes the output has the op's mblock and ublock."""
    f = c.n.fused_op_of(op)
    for s in f.sub_ops if f is not None else ():
        if positive(*s.mblock, *s.ublock) and s.output == "output" and \
                (tuple(s.mblock) != tuple(op.mblock) or tuple(s.ublock) != tuple(op.ublock)):
            c.fail(op, f"sub-op {s.name} writes the output, so its mblock/ublock must equal the op's",
                   {"mblock": list(op.mblock), "ublock": list(op.ublock)},
                   {"mblock": list(s.mblock), "ublock": list(s.ublock)})
