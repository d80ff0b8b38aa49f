"""Silicon op sweeps (shared/reference/silicon/op-sweeps/<arch>/*.csv) as inputs of the kernel cycle model.

Each CSV row becomes a `SweepRow`: the op as one core runs it (an `OpGeometry`), its output format and fidelity,
the sparse non-zero counts (sparse matmul) and the measured cycles per input. Three layouts exist (README of the
sweeps): eltwise/SFPU/nop/quantisation with per-operand columns and a `total-runtime` over several inputs; the
compact layout `input0_df, math_fidelity, t, mblock_m, ...` (dense matmul, reduce, splice, some unary files); and
the sparse matmul layout with `nz_strips, nz_ublocks, nz_tiles`. The op type and its attributes come from the
file name and the `Unary-Type` / `Binary-Type` / `quant_type` columns.
"""
from __future__ import annotations

import csv
import dataclasses
import re
from pathlib import Path

from ..errors import UserInputError
from .cycles import SparseNz, kernel_cycles
from .operands import OpGeometry

_NAME = re.compile(r"^(?:whb0-)?(?P<op>.+?)-(?:op-)?performance\.csv$")
_FORMAT_SUFFIXES = ("int8", "int32", "bfp8", "fp16")


@dataclasses.dataclass(frozen=True, slots=True)
class Attributes:
    """The `OpAttributes` a sweep row sets (pybuda.arch may not import the netlist model); None = not set."""

    m_k: int | None = None
    u_kt: int | None = None
    identity: bool | None = None
    accumulate: bool | None = None
    z: int | None = None
    dim: str | None = None
    bias: bool | None = None
    act_t: int | None = None
    min_buffer_input: int | None = None
    indices_len: int | None = None
    sparse_nz_ublocks: int | None = None
    sparse_nz_strips: int | None = None
    vector: str | None = None
    approximate_mode: bool | None = None
    l1_acc: bool | None = None
    requant: bool | None = None
    dequant: bool | None = None

    def kernel_broadcast_tiles(self, index: int) -> int:
        return 0


@dataclasses.dataclass(frozen=True, slots=True)
class SweepRow:
    """One measured op: what the cycle model needs and the cycles silicon took per input."""

    arch: str
    op: OpGeometry
    out_df: str
    math_fidelity: str
    measured: float
    in_df: str
    nz: SparseNz | None = None


def estimate(row: SweepRow) -> int:
    """The model's kernel cycles for one sweep row."""
    return kernel_cycles(row.arch, row.op, row.out_df, row.math_fidelity, nz=row.nz, in_df=row.in_df)


def rel_error(row: SweepRow) -> float:
    """|estimate - measured| / measured."""
    return abs(estimate(row) - row.measured) / row.measured


def file_errors(root: Path) -> dict[str, list[tuple[float, SweepRow]]]:
    """{'arch/file.csv': [(relative error, row), ...]} for every sweep file under root."""
    return {f"{p.parent.name}/{p.name}": [(rel_error(r), r) for r in read_sweep(p)] for p in sweep_files(root)}


def sweep_files(root: Path) -> list[Path]:
    """Every sweep CSV under root (one folder per arch), sorted by arch then name."""
    return sorted(root.glob("*/*.csv"))


def file_op(path: Path) -> tuple[str, frozenset]:
    """(op type, flags) from a sweep file name: flags are 'approx', 'l1-acc' and the reduce dim ('r'/'c'/'z')."""
    m = _NAME.match(path.name)
    if not m:
        raise UserInputError(f"not a sweep file name: {path.name}")
    words = m["op"].split("-")
    flags = set()
    while words[-1] in _FORMAT_SUFFIXES or words[-1] == "approx":
        if words[-1] == "approx":
            flags.add("approx")
        words.pop()
    if words[:2] == ["matmul", "l1"]:
        return "matmul", frozenset(flags | {"l1-acc"})
    if words[0] == "reduce":
        return "reduce", frozenset(flags | {words[1]})
    if words == ["matmul", "sparse"]:
        return "matmul", frozenset(flags | {"sparse"})
    return "_".join(words), frozenset(flags)


def read_sweep(path: Path) -> list[SweepRow]:
    """The rows of one sweep CSV (arch = the name of its folder)."""
    arch = path.parent.name
    op_type, flags = file_op(path)
    with open(path, newline="") as f:
        return [_row(arch, op_type, flags, r) for r in csv.DictReader(f)]


def _row(arch: str, op_type: str, flags: frozenset, r: dict) -> SweepRow:
    if "total-runtime" in r:
        return _per_operand_row(arch, op_type, flags, r)
    if "nz_tiles" in r:
        return _sparse_row(arch, r)
    return _compact_row(arch, op_type, flags, r)


def _attrs(op_type: str, flags: frozenset, **kw) -> Attributes:
    if "approx" in flags:
        kw["approximate_mode"] = True
    if "l1-acc" in flags:
        kw["l1_acc"] = True
    if op_type == "reduce":
        kw["dim"] = next(d for d in ("r", "c", "z") if d in flags)
    return Attributes(**kw)


def _per_operand_row(arch: str, op_type: str, flags: frozenset, r: dict) -> SweepRow:
    op_type = r.get("Unary-Type") or r.get("Binary-Type") or r.get("quant_type") or op_type
    kw = {}
    if "mblock_k" in r:
        kw.update(m_k=int(r["mblock_k"]), u_kt=int(r["ublock_kt"]), l1_acc=r["l1_acc"] == "True" or None)
    vector = (r.get("Vector-Mode") or "rc").lower()
    if vector in ("r", "c"):
        kw["vector"] = vector
    geom = OpGeometry(op_type, (1, 1), int(r["output_t"]), (int(r["output_mb_r"]), int(r["output_mb_c"])),
                      (int(r["output_ub_r"]), int(r["output_ub_c"])), _attrs(op_type, flags, **kw))
    inputs = int(r["last-input-idx-recorded"]) - int(r["first-input-idx-recorded"]) + 1
    return SweepRow(arch, geom, r["output_df"], r["math_fidelity"], float(r["total-runtime"]) / inputs,
                    r["input0_df"])


def _compact_row(arch: str, op_type: str, flags: frozenset, r: dict) -> SweepRow:
    kw = {}
    if "m_k" in r:
        kw.update(m_k=int(r["m_k"]), u_kt=int(r["u_kt"]))
    if "z" in r:
        kw["z"] = int(r["z"])
    geom = OpGeometry(op_type, (1, 1), int(r["t"]), (int(r["mblock_m"]), int(r["mblock_n"])),
                      (int(r["ublock_rt"]), int(r["ublock_ct"])), _attrs(op_type, flags, **kw))
    in_df = r.get("input0_df") or r["input0"]
    return SweepRow(arch, geom, r.get("output_df") or in_df, r["math_fidelity"], float(r["runtime"]), in_df)


def _sparse_row(arch: str, r: dict) -> SweepRow:
    attrs = Attributes(identity=True, m_k=int(r["mblock_k"]), u_kt=int(r["ublock_kt"]),
                       indices_len=int(r["nz_tiles"]))
    geom = OpGeometry("matmul", (1, 1), int(r["output_t"]), (int(r["output_mb_r"]), int(r["output_mb_c"])),
                      (int(r["output_ub_r"]), int(r["output_ub_c"])), attrs)
    nz = SparseNz(int(r["nz_tiles"]), int(r["nz_ublocks"]), int(r["nz_strips"]))
    return SweepRow(arch, geom, r["output_df"], r["math_fidelity"], float(r["runtime"]), r["input1_df"], nz)
