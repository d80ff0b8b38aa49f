"""Buda `fused_op`: a group of Buda ops run as one op (netlist-format.md §1.7), built by the fusion stage.

A fused op's meaning is its sub-op program (`FusedGroup`, the op's `fused` attribute): schedules of sub-ops, each
a registry op reading fused-op inputs (`input<k>`, the op's operand k after its edge TMs), intermediate buffers
(`intermed<k>`) or the previous sub-op's result in the dest register (`dest`), with broadcast / tile_broadcast TMs
of its own, and writing an intermediate, dest or the op's output. The golden evaluation runs the program with the
registry's numpy evaluations (float32: dest and intermediates are not rounded here; the simulator emulates that).
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..arch.tms import apply_tms
from .registry import OpDef, OpError, evaluate, register

REF_KINDS = ("input", "intermed", "dest", "output")


@dataclasses.dataclass(frozen=True)
class Ref:
    """Where a sub-op reads or writes: input<k>, intermed<k>, dest or output."""

    kind: str
    index: int = 0

    def __post_init__(self):
        if self.kind not in REF_KINDS:
            raise OpError(f"fused-op reference kind {self.kind!r}; legal: {', '.join(REF_KINDS)}")

    @property
    def netlist_name(self) -> str:
        return self.kind if self.kind in ("dest", "output") else f"{self.kind}{self.index}"


DEST = Ref("dest")
OUTPUT = Ref("output")


@dataclasses.dataclass(frozen=True)
class SubOp:
    """One scheduled op of a fused op: the op it was (`name`, Buda `op_type`, `attrs` as sorted (key, value)
    pairs), its operands with their TMs, where its result goes, its device shape (1, z, R, C) and the buffers this
    sub-op reads for the last time (`pop_last`)."""

    name: str
    op_type: str
    attrs: tuple
    inputs: tuple
    tms: tuple
    output: Ref
    shape: tuple
    pop_last: tuple = ()

    @property
    def attributes(self) -> dict:
        return dict(self.attrs)


@dataclasses.dataclass(frozen=True)
class FusedGroup:
    """The program of a fused op: `inputs` operands, `intermediates` buffers, schedules of sub-ops."""

    inputs: int
    intermediates: int
    schedules: tuple

    @property
    def sub_ops(self) -> tuple:
        return tuple(s for schedule in self.schedules for s in schedule)

    @property
    def output(self) -> SubOp:
        """The sub-op writing the fused op's output."""
        return next(s for s in self.sub_ops if s.output == OUTPUT)


def run_group(group: FusedGroup, values: list) -> np.ndarray:
    """Run a fused op's program on its operand values (4-D padded arrays, after the op's edge TMs)."""
    if len(values) != group.inputs:
        raise OpError(f"fused op takes {group.inputs} operands, got {len(values)}")
    intermed: dict[int, np.ndarray] = {}
    dest = result = None
    for sub in group.sub_ops:
        args = []
        for ref, tms in zip(sub.inputs, sub.tms):
            if ref.kind == "input":
                value = values[ref.index]
            elif ref.kind == "intermed":
                value = intermed[ref.index]
            else:
                value = dest
            args.append(apply_tms(value, list(tms)))
        y = evaluate(sub.op_type, args, sub.attributes)
        if sub.output.kind == "dest":
            dest = y
        elif sub.output.kind == "intermed":
            intermed[sub.output.index] = y
        else:
            result = y
    return result


def _shape(shapes, attrs):
    return tuple(attrs["fused"].output.shape)


register(OpDef("fused_op", _shape, lambda values, attrs: run_group(attrs["fused"], values), arity=(1, 64),
               buda=True, kind="fused", groups={"streamable"}))
