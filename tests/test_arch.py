"""The one backend model (pybuda.arch): kernel cycles, operand rules, TM shapes, L1 footprint, epoch cost."""
import pytest

from pybuda.arch.cycles import kernel_cycles
from pybuda.arch.operands import OpGeometry
from pybuda.netlist.model import Attributes


def cycles(arch, op_type, *, t, mblock, ublock, out_df, math_fidelity, m_k=1, u_kt=1, attributes=None):
    attrs = Attributes(m_k=m_k, u_kt=u_kt, **(attributes or {}))
    return kernel_cycles(arch, OpGeometry(op_type, (1, 1), t, tuple(mblock), tuple(ublock), attrs), out_df,
                         math_fidelity)


# ------------------------------------------------------------------------------------------------------------
# op cycle model (netlist-format.md §5.5 worked examples and formula variants)
# ------------------------------------------------------------------------------------------------------------

def test_worked_example_multiply():
    kw = dict(t=1, mblock=[2, 2], ublock=[2, 4], out_df="Float16_b", math_fidelity="LoFi")
    assert cycles("grayskull", "multiply", **kw) == 4554
    assert cycles("wormhole_b0", "multiply", **kw) == 4382


def test_worked_example_ff_matmul():
    kw = dict(t=1, mblock=[2, 16], ublock=[1, 1], math_fidelity="HiFi3", m_k=32, u_kt=1)
    assert cycles("grayskull", "matmul", out_df="Float16_b", **kw) == 208887
    assert cycles("wormhole_b0", "matmul", out_df="Float16", **kw) == 197244


def test_cycle_formula_variants():
    blk = dict(t=2, mblock=[2, 2], ublock=[1, 2], math_fidelity="HiFi2")  # U=4, T=8
    # binary data-format weight: Float32 x4, Bfp8 x1; maximum never scaled
    assert cycles("grayskull", "add", out_df="Float32", **blk) == int(2 * (4 * 293.96263856 + 8 * 50.43405251 * 4))
    assert cycles("grayskull", "add", out_df="Bfp8_b", **blk) == int(2 * (4 * 293.96263856 + 8 * 50.43405251))
    assert cycles("grayskull", "maximum", out_df="Float16_b", **blk) == int(2 * (4 * 30.74320292 + 8 * 260.32786291))
    # approx and vector variants of SFPU ops
    assert cycles("wormhole_b0", "exp", out_df="Float16_b", **blk) == int(2 * (4 * 9 + 8 * 1771))
    assert cycles("wormhole_b0", "exp", out_df="Float16_b", attributes={"approximate_mode": True},
                         **blk) == int(2 * (4 * 10.21444666 + 8 * 812.81243288))
    assert cycles("wormhole_b0", "exp", out_df="Float16_b", attributes={"approximate_mode": True, "vector": "c"},
                         **blk) == int(2 * (4 * 10.34437245 + 8 * 426.86754794))
    # unknown op types and fused ops use nop parameters with the unary formula
    nop = int(2 * (4 * 305 + 8 * 56))
    assert cycles("grayskull", "fused_op", out_df="Float16_b", **blk) == nop
    assert cycles("wormhole_b0", "some_future_op", out_df="Float16_b", **blk) == nop
    # reduce: dim c variant and reduce_z with z_weight
    assert cycles("grayskull", "reduce", out_df="Float16_b", attributes={"dim": "c"}, **blk) == int(2 * 8 * 91)
    assert cycles("grayskull", "reduce", out_df="Float16_b", attributes={"dim": "r"}, **blk) == int(2 * (4 * 76 + 8 * 59))
    assert cycles("grayskull", "reduce", out_df="Float16_b", attributes={"dim": "z", "z": 4},
                         **blk) == int(2 * 4 * (8 * 287 + 268))
    # wormhole matmul with a Bfp output uses the df_bfp weights
    mm = dict(t=1, mblock=[2, 4], ublock=[2, 2], math_fidelity="HiFi2", m_k=3, u_kt=2)
    nu = 3 * 2 * 4
    expect = (nu * 2 * 2 * 2 * 2 * 14.16279724 + 2 * 2 * 4 * 2 * 2 * 22.11293136 + nu * 192.76487862
              + nu * 2 * 2 * 3 * 3.97228042)
    assert cycles("wormhole_b0", "matmul", out_df="Bfp8_b", **mm) == int(expect)
    # depthwise uses the V2 formula on both archs
    assert cycles("grayskull", "depthwise", out_df="Float16_b", **mm) == int(nu * 2 * 2 * 2 * 79)


def test_sparse_matmul_v1():
    p = dict(tile_weight=36, reload=20, reload_config=20, reload_wait_pop=20, pack_wait_push=25, pack=25,
             ublock_decode=8, nz_ublock_decode=8, nz_tile_decode=12)
    t, mm, mn, urt, uct, mk, nzt = 1, 2, 2, 1, 1, 4, 6
    su, nzu = max(t * mk * mm, nzt // (t * urt * uct)), nzt // (t * urt * uct)
    math_ = nzt * mn * uct * p["tile_weight"] * 1
    reload = (su * p["reload_wait_pop"] + nzu * (p["reload_config"] + p["reload"] * uct * urt)) * mn
    reload += mm * t * (p["reload_config"] + p["reload"] * uct * urt) * mn
    pack = p["pack_wait_push"] * (su - nzu) * mn + p["pack"] * 2 * t * mn * mm * uct * urt
    dec = nzt * p["nz_tile_decode"] * (2 + mn) + su * p["ublock_decode"] + nzu * p["nz_ublock_decode"]
    got = cycles("grayskull", "matmul", t=t, mblock=[mm, mn], ublock=[urt, uct], out_df="Float16_b",
                        math_fidelity="LoFi", m_k=mk, attributes={"identity": True, "indices_len": nzt})
    assert got == int(math_ + reload + pack + dec)


