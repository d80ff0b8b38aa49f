"""Per-op kernel cycle model of the Buda backend (netlist-format.md §5.1-5.4).

`kernel_cycles` returns the cycles one core needs to process one input of an op, from the op's per-core output
blocking. Arithmetic follows the backend: parameters and sums in float32, result truncated to an integer and
clamped to [1, 2**30]. This module reads no netlists and caches its parameter tables, so the compiler's
balancer can call it in inner loops.
"""
from __future__ import annotations

import dataclasses
import functools
from pathlib import Path

import numpy as np
import yaml

from ..dataformat import DataFormat, MathFidelity
from ..errors import UserInputError
from .operands import OpGeometry
from .optypes import family_of

ARCHS = ("grayskull", "wormhole_b0")
MAX_CYCLES = 2 ** 30
MIN_CYCLES = 1
MATMUL_TILE_CYCLES = {"grayskull": 32, "wormhole_b0": 16}  # ideal cycles per 32x32x32 tile MAC and fidelity phase
_PARAMS_DIR = Path(__file__).resolve().parent / "params"

_f32 = np.float32
_DF_WEIGHT = {DataFormat.Float16: 2, DataFormat.Float16_b: 2, DataFormat.Float32: 4}  # binary tile weight scale
_QUANT_OPS = frozenset({"quantization", "dequantization", "requantization"})
# binary ops whose tile cost does not scale with the output format: maximum (backend), the quantisation ops
# (silicon: dequantization to Float32 costs what the table says, not 4x)
_DFW_FREE_BINARY = _QUANT_OPS | {"maximum"}


@dataclasses.dataclass(frozen=True, slots=True)
class SparseNz:
    """What a sparse matmul's encoding holds for one core: non-zero tiles, ublocks and strips (netlist-format.md
    §5.1 `sparse_indices`, `sparse_nz_ublocks`, `sparse_nz_strips`)."""

    tiles: int
    ublocks: int
    strips: int


@functools.lru_cache(maxsize=None)
def _load_yaml(arch: str) -> dict:
    if arch not in ARCHS:
        raise UserInputError(f"no op-cycle parameters for arch {arch!r}; legal: {', '.join(ARCHS)}")
    with open(_PARAMS_DIR / f"{arch}.yaml") as f:
        return yaml.safe_load(f)


@functools.lru_cache(maxsize=None)
def load_params(arch: str) -> dict:
    """The parameter table of an architecture: {op: {attribute_key: {param: float32}}} (cached)."""
    return {op: {key: {p: _f32(v) for p, v in params.items()} for key, params in sets.items()}
            for op, sets in _load_yaml(arch)["ops"].items()}


def _at_or_below(table: dict, key: int) -> dict | list:
    """table[key], else the entry of the next smaller key present (the backend's worst-case fallback)."""
    return table[max(k for k in table if k <= key)]


@functools.lru_cache(maxsize=1024)
def sparse_v2_stage_cycles(arch: str, table: str, urt: int, uct: int, u_kt: int) -> tuple[int, int, int]:
    """(math with tile decode, reload, pack) cycles per tile of sparse matmul V2 for an output ublock and u_kt,
    from the per-(urt, uct, u_kt) table `table` ("lofi" or "hifi2") of the arch's `sparse_v2` parameters."""
    by_rt = _load_yaml(arch)["sparse_v2"][table]
    return tuple(_at_or_below(_at_or_below(_at_or_below(by_rt, urt), uct), u_kt))


@functools.lru_cache(maxsize=4096)
def _param_set(arch: str, op_name: str, active: frozenset) -> dict:
    table = load_params(arch)
    sets = table.get(op_name, table["nop"])
    for key in reversed(list(sets)):  # bottom-up: the last fully matching key wins
        if key == "base":
            continue
        if all(part in active for part in key.split("/")):
            return sets[key]
    return sets["base"]


def param_set(arch: str, op: OpGeometry, out_df: "DataFormat | str") -> dict:
    """The {param: value} set the model uses for an op (after the sparse/reduce_z renames and key matching)."""
    return _param_set(arch, _params_op_name(op), _active_keys(op, DataFormat.parse(out_df)))


def _params_op_name(op: OpGeometry) -> str:
    if op.identity:
        return "matmul_sparse"
    if op.type == "reduce" and op.attrs.dim == "z":
        return "reduce_z"
    return op.type


def _active_keys(op: OpGeometry, df: DataFormat) -> frozenset:
    a = op.attrs
    active = set()
    if df.is_bfp:
        active.add("df_bfp")
    if df is DataFormat.Int8 or df is DataFormat.UInt8:
        active.add("df_int8")
    if df is DataFormat.Int32 or (op.type == "matmul" and (a.requant or a.dequant)):
        active.add("df_int32")
    if a.approximate_mode:
        active.add("approx")
    if a.vector in ("r", "c"):
        active.add(f"vector_{a.vector}")
    if a.l1_acc and op.m_k > 1:  # silicon: with one k block nothing accumulates in L1 (plain matmul cost)
        active.add("l1_acc_en")
    if op.type == "reduce" and a.dim == "c":
        active.add("dim_c")
    return frozenset(active)


def _finish(cycles: np.floating) -> int:
    value = int(cycles) if np.isfinite(cycles) else MAX_CYCLES
    return max(MIN_CYCLES, min(MAX_CYCLES, value))


def kernel_cycles(arch: str, op: OpGeometry, out_df: "DataFormat | str", math_fidelity: "MathFidelity | str",
                  nz: SparseNz | None = None, in_df: "DataFormat | str | None" = None) -> int:
    """Cycles for one core to process one input of an op (netlist-format.md §5.3).

    The op's per-core output blocking (t, mblock, ublock), its inner-dimension split (m_k, u_kt: matmul,
    depthwise) and its attributes select the formula and parameter variant: approximate_mode, vector, l1_acc,
    dim and z (reduce), identity (sparse matmul: non-zero tiles per core from `indices_len`, else the dense upper
    bound t*m_k*mblock_m*ublock_rt*u_kt; with `sparse_nz_ublocks` and `sparse_nz_strips` set too, the
    encoding's counts as `nz`), accumulate and z (matmul: t*z products per input), requant/dequant.
    Op types without a formula of their own (unary, reduce, embedding, topk, tilizer, unknown) use the unary
    formula, with `nop` parameters when the table has none, as the backend does; so does a fused_op given alone
    (its sub-ops cost more: `fused_op_cycles`). `nz`: a sparse matmul's
    encoding counts (selects the wormhole_b0 V2 formula where it applies). `in_df`: the format of input 0; the
    (de|re)quantization tables are keyed by it (int8 or int32 integer operand), other ops by the output format.
    """
    df = DataFormat.parse(out_df)
    fidelity = MathFidelity.parse(math_fidelity)
    a = op.attrs
    mm, mn = int(op.mblock[0]), int(op.mblock[1])
    urt, uct = int(op.ublock[0]), int(op.ublock[1])
    t, m_k, u_kt = int(op.t), op.m_k, op.u_kt
    if min(t, mm, mn, urt, uct, m_k, u_kt) <= 0:
        raise UserInputError(f"{op.type}: t, mblock, ublock, m_k, u_kt must be positive "
                             f"(t={t}, mblock={[mm, mn]}, ublock={[urt, uct]}, m_k={m_k}, u_kt={u_kt})")
    params = param_set(arch, op, DataFormat.parse(in_df) if in_df is not None and op.type in _QUANT_OPS else df)
    phases = fidelity.phases
    n_ublocks = mm * mn
    n_tiles = n_ublocks * urt * uct
    family = family_of(op.type)

    if op.type == "matmul":
        if a.accumulate:
            t *= a.z or 1
        if op.identity:
            if nz is None and a.indices_len and a.sparse_nz_ublocks and a.sparse_nz_strips:
                nz = SparseNz(a.indices_len, a.sparse_nz_ublocks, a.sparse_nz_strips)
            if nz and _sparse_v2_table(arch, df, fidelity):
                return _finish(_sparse_matmul_v2(params, mm, mn, urt, uct, nz, phases))
            nz_tiles = nz.tiles if nz else a.indices_len or t * m_k * mm * urt * u_kt
            return _finish(_sparse_matmul_v1(params, t, mm, mn, urt, uct, m_k, nz_tiles, phases))
        if arch == "grayskull":
            return _finish(_dense_matmul_v1(params, t, mm, mn, urt, uct, m_k, u_kt, phases))
        return _finish(_dense_matmul_v2(params, t, mm, mn, urt, uct, m_k, u_kt, phases))
    if op.type == "depthwise":
        return _finish(_dense_matmul_v2(params, t, mm, mn, urt, uct, m_k, 1, phases))
    if family == "binary":
        dfw = 1 if op.type in _DFW_FREE_BINARY else _DF_WEIGHT.get(df, 1)
        cycles = _f32(t) * (_f32(n_ublocks) * params["ublock_weight"]
                            + _f32(n_tiles) * params["tile_weight"] * _f32(dfw))
        return _finish(cycles)
    if op.type == "reduce" and a.dim == "z":
        return _finish(_reduce_z(params, t, a.z or 1, n_ublocks, n_tiles))
    t_weight = params.get("t_weight", _f32(0))
    return _finish(_f32(t) * (_f32(n_ublocks) * _ublock_cycles(params, urt * uct) + t_weight))


@dataclasses.dataclass(frozen=True, slots=True)
class FusedStep:
    """One sub-op of a fused op as a core runs it: its geometry (the fused op's grid and t, the sub-op's type,
    mblock, ublock and attributes) and whether it reads its operand from / leaves its result in dest."""

    op: OpGeometry
    reads_dest: bool = False
    writes_dest: bool = False


DEST_FLOOR = _f32(0.2)   # a sub-op keeping both sides in dest still does its math: at least this share of its cost


def fused_op_cycles(arch: str, steps: "tuple[FusedStep, ...]", out_df: "DataFormat | str",
                    math_fidelity: "MathFidelity | str") -> int:
    """Cycles for one core to run one input of a fused op, from its parts: each sub-op through the calibrated
    kernel model on its own blocking (its unpack, math and pack; one that writes an intermediate buffer packs it
    to L1 and the reader unpacks it, as two ops would); a sub-op that reads its operand from dest skips that
    unpack, one that leaves its result in dest skips the pack, each worth half a datacopy (nop) of its tiles, the
    calibrated cost of moving them through unpack and pack, down to `DEST_FLOOR` of the sub-op's cost. A fused
    op of one sub-op costs what that op costs (the backend itself costs a fused op as one nop, which misses every
    sub-op after the first)."""
    total = _f32(0)
    for step in steps:
        cycles = _f32(kernel_cycles(arch, step.op, out_df, math_fidelity))
        skipped = int(step.reads_dest) + int(step.writes_dest)
        if skipped:
            move = _f32(kernel_cycles(arch, dataclasses.replace(step.op, type="nop"), out_df, math_fidelity))
            cycles = max(cycles * DEST_FLOOR, cycles - _f32(skipped) * move / _f32(2))
        total = total + cycles
    return _finish(total)


def _ublock_cycles(p: dict, ublock_tiles: int) -> np.floating:
    """Unary/nary cost of one ublock: ublock_weight + tiles*tile_weight, at least `ublock_floor` (0 unless the
    table sets it: a ublock's fixed unpack/pack overhead overlaps its tile work, so the slower of the two counts).
    The unary/nary formula is t*(U*this + t_weight); t_weight (fixed cycles per t slice) is 0 unless set."""
    return max(p.get("ublock_floor", _f32(0)), p["ublock_weight"] + _f32(ublock_tiles) * p["tile_weight"])


def _reduce_z(p: dict, t, z, n_ublocks, n_tiles) -> np.floating:
    """reduce over z: t*(U*ublock_weight + T*tile_weight + z*(T*z_tile_weight + z_weight)). With ublock_weight =
    tile_weight = 0 this is the backend's t*z*(T*tile_weight + z_weight) (grayskull table); the wormhole_b0 table
    is fitted to silicon (first z slice a copy, the others accumulate)."""
    return _f32(t) * (_f32(n_ublocks) * p["ublock_weight"] + _f32(n_tiles) * p["tile_weight"]
                      + _f32(z) * (_f32(n_tiles) * p["z_tile_weight"] + p["z_weight"]))


def ideal_math_cycles(arch: str, op: OpGeometry, math_fidelity: "MathFidelity | str") -> int:
    """Cycles a dense matmul core would take at full math throughput for one input (tile MACs x fidelity
    phases x the ideal cycles per 32x32x32 tile MAC): the denominator of math utilization."""
    z = (op.attrs.z or 1) if op.attrs.accumulate else 1
    tile_macs = op.t * z * op.mblock_tiles * op.k_tiles
    return tile_macs * MathFidelity.parse(math_fidelity).phases * MATMUL_TILE_CYCLES[arch]


def _dense_matmul_v1(p: dict, t, mm, mn, urt, uct, m_k, u_kt, phases) -> np.floating:
    """Grayskull dense matmul: t*((m_k-1)*m_k_weight + m_k*U*ublock_weight + m_k*U*u_kt*urt*uct*tile_weight*F)."""
    n_ublocks = mm * mn
    mblock_exec = m_k * n_ublocks
    ublock_exec = mblock_exec * u_kt * urt * uct
    return _f32(t) * (_f32(m_k - 1) * p["m_k_weight"] + _f32(mblock_exec) * p["ublock_weight"]
                      + _f32(ublock_exec) * p["tile_weight"] * _f32(phases))


def _dense_matmul_v2(p: dict, t, mm, mn, urt, uct, m_k, u_kt, phases) -> np.floating:
    """Wormhole_b0 dense matmul (and depthwise): t*(math + dest spill + unpack)."""
    n_ublocks = m_k * mm * mn
    math_tiles = n_ublocks * u_kt * urt * uct * phases
    spill_tiles = (m_k - 1) * mm * mn * urt * uct
    unpack_tiles = u_kt * urt * (1 + uct) * n_ublocks
    return _f32(t) * (_f32(math_tiles) * p["math_tiles_weight"] + _f32(spill_tiles) * p["math_dest_spill_weight"]
                      + _f32(n_ublocks) * p["unpack_ublocks_weight"] + _f32(unpack_tiles) * p["unpack_tiles_weight"])


def _sparse_matmul_v1(p: dict, t, mm, mn, urt, uct, m_k, nz_tiles, phases) -> np.floating:
    """Sparse (identity) matmul V1: math + reload + pack + encode/decode cycles."""
    strips = t * m_k
    sparse_ublocks = strips * mm
    nz_ublocks = nz_tiles // (t * urt * uct)
    sparse_ublocks = max(sparse_ublocks, nz_ublocks)
    math = _f32(nz_tiles * mn * uct) * p["tile_weight"] * _f32(phases)
    per_ublock_reload = p["reload_config"] + p["reload"] * _f32(uct * urt)
    reload = (_f32(sparse_ublocks) * p["reload_wait_pop"] + _f32(nz_ublocks) * per_ublock_reload) * _f32(mn)
    if m_k > 1:
        reload = reload + _f32(mm * t) * per_ublock_reload * _f32(mn)
    pack = (p["pack_wait_push"] * _f32((sparse_ublocks - nz_ublocks) * mn)
            + p["pack"] * _f32(2 * t * mn * mm * uct * urt))
    decode = (_f32(nz_tiles) * p["nz_tile_decode"] * _f32(2 + mn) + _f32(sparse_ublocks) * p["ublock_decode"]
              + _f32(nz_ublocks) * p["nz_ublock_decode"])
    return math + reload + pack + decode


_SPARSE_V2_FIDELITY_WEIGHT = {1: _f32(1.0), 2: _f32(1.0), 3: _f32(1.2), 4: _f32(1.7)}  # by fidelity phases


def _sparse_v2_table(arch: str, df: DataFormat, fidelity: MathFidelity) -> str | None:
    """The V2 stage table a sparse matmul uses, or None when V2 does not apply (grayskull; formats and
    fidelities other than Bfp8 + LoFi or Float16 + HiFi2..4)."""
    if arch != "wormhole_b0":
        return None
    if fidelity.phases == 1 and df in (DataFormat.Bfp8, DataFormat.Bfp8_b):
        return "lofi"
    if fidelity.phases > 1 and df in (DataFormat.Float16, DataFormat.Float16_b):
        return "hifi2"
    return None


def _sparse_matmul_v2(p: dict, mm, mn, urt, uct, nz: SparseNz, phases: int) -> np.floating:
    """Sparse (identity) matmul V2 as measured on wormhole_b0 silicon (docs/simulator.md "Op-level calibration").

    Per column block (mblock_n), every ublock row of every non-zero strip costs v2_sparse_ublock_weight plus
    v2_sparse_ublock_tile_weight per tile of the output ublock; every non-zero tile costs v2_nz_tile_weight once,
    v2_nz_tile_mn_weight per column block and, per tile MAC, v2_mac_weight plus v2_hifi_phase_weight for each
    fidelity phase beyond the second. Silicon shows no dependence on u_kt, m_k, or LoFi vs HiFi2, which the
    backend's per-(urt, uct, u_kt) tables assume (`backend_sparse_matmul_v2`).
    """
    sparse_ublocks = _f32(nz.strips * mm * mn)
    per_mac = p["v2_mac_weight"] + _f32(max(0, phases - 2)) * p["v2_hifi_phase_weight"]
    return (sparse_ublocks * (p["v2_sparse_ublock_weight"] + _f32(urt * uct) * p["v2_sparse_ublock_tile_weight"])
            + _f32(nz.tiles) * (p["v2_nz_tile_weight"] + _f32(mn) * p["v2_nz_tile_mn_weight"])
            + _f32(nz.tiles * mn * uct) * per_mac)


def backend_sparse_matmul_v2(arch: str, op: OpGeometry, out_df: "DataFormat | str",
                             math_fidelity: "MathFidelity | str", nz: SparseNz) -> int | None:
    """The backend's sparse matmul V2 (netlist-format.md §5.3): decode + math with tile decode + reload + pack,
    with per-(urt, uct, u_kt) stage cycles; None where V2 does not apply. Kept as the reference the silicon fit
    is measured against (benchmarks/silicon_ops.py); `kernel_cycles` uses `_sparse_matmul_v2`."""
    df, fidelity = DataFormat.parse(out_df), MathFidelity.parse(math_fidelity)
    table = _sparse_v2_table(arch, df, fidelity)
    if table is None:
        return None
    p = param_set(arch, op, df)
    (mm, mn), (urt, uct) = op.mblock, op.ublock
    math_w, reload_w, pack_w = sparse_v2_stage_cycles(arch, table, urt, uct, op.u_kt)
    decode = (nz.strips * mm * int(p["v2_ublock_decode"]) + nz.ublocks * int(p["v2_nz_ublock_decode"])
              + nz.strips * int(p["v2_nz_strip_decode"]))
    math = int(_f32(nz.tiles * mn * uct * math_w) * _SPARSE_V2_FIDELITY_WEIGHT[fidelity.phases])
    reload = nz.ublocks * mn * uct * urt * reload_w if op.m_k > 1 else 0
    pack = op.t * mn * mm * uct * urt * pack_w
    return _finish(_f32(decode + math + reload + pack))
