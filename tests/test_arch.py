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
    # unknown op types and fused ops use nop parameters with the unary formula (per-ublock cost floored)
    assert cycles("grayskull", "fused_op", out_df="Float16_b", **blk) == int(2 * 4 * max(398, 227.4 + 2 * 67.7))
    assert cycles("wormhole_b0", "some_future_op", out_df="Float16_b", **blk) == int(2 * 4 * max(259, 2 * 148))
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




# ------------------------------------------------------------------------------------------------------------
# op types, operand rules, TM shapes
# ------------------------------------------------------------------------------------------------------------

from pybuda.arch.l1 import InputBuffer, footprint  # noqa: E402
from pybuda.arch.operands import (expected_input, input_buffer_tiles, input_count, input_granule,  # noqa: E402
                                  prologue_tiles_per_core, tiles_read_per_core)
from pybuda.arch.optypes import BINARY_OPS, ELTWISE_SHAPED_OPS, OP_TYPES, family_of  # noqa: E402
from pybuda.arch.perf import OpLoad, Transfer, epoch_timing, program_cycles  # noqa: E402
from pybuda.arch.tms import TMError, edge_shape, shape_after_tms, tm_shape  # noqa: E402
from pybuda.device import get_device  # noqa: E402


def op(op_type, grid=(1, 1), t=1, mblock=(1, 1), ublock=(1, 1), **attrs):
    return OpGeometry(op_type, grid, t, mblock, ublock, Attributes(**attrs))


def test_one_list_of_op_types():
    assert family_of("tilizer") == "tilizer" and "tilizer" in ELTWISE_SHAPED_OPS
    assert {"quantization", "maximum"} <= BINARY_OPS and family_of("no_such_op") is None
    assert not OP_TYPES["ethernet_datacopy"].tensix and OP_TYPES["matmul"].tensix
    from pybuda.netlist import model as nm
    assert nm.NON_TENSIX_OPS == {"ethernet_datacopy"}


def test_tm_shapes_and_errors():
    assert shape_after_tms((1, 4, 6), [("hslice", 3), ("transpose",)]) == (3, 2, 4)
    assert tm_shape((2, 3, 4), ("pad", 1, 2, 0.0)) == (2, 4, 6)
    assert tm_shape((2, 3, 4), ("tile_broadcast", "r")) == (2, 3, 4)
    with pytest.raises(TMError) as e:
        tm_shape((1, 4, 5), ("hslice", 3))
    assert e.value.rule == "tm.divide"
    with pytest.raises(TMError) as e:
        tm_shape((2, 1, 1), ("broadcast", "z", 4))
    assert e.value.rule == "tm.broadcast_z_t"
    with pytest.raises(TMError) as e:
        tm_shape((1, 1, 1), ("vstack", 0))
    assert e.value.rule == "tm.factor"
    # netlist edge: unpad, TMs, pad
    assert edge_shape((1, 4, 8), [("vslice", 2)], unpad=(0, 2), pad=(1, 0)) == (2, 3, 6)


def test_expected_inputs():
    mm = op("matmul", grid=(2, 3), mblock=(2, 1), ublock=(1, 2), m_k=4, u_kt=2, bias=True)
    assert expected_input(mm, 0) == ((1, 4, 8), "shape.matmul_in0")
    assert expected_input(mm, 1) == ((1, 8, 6), "shape.matmul_in1")
    assert expected_input(mm, 2) == ((1, 4, 6), "shape.matmul_bias")
    sparse = op("matmul", t=4, m_k=3, u_kt=1, identity=True, act_t=1)
    assert expected_input(sparse, 1) == ((1, 3, 1), "shape.matmul_in1") and expected_input(sparse, 0) == (None, None)
    assert expected_input(op("reduce", grid=(1, 2), dim="r", m_k=5), 0) == ((1, 5, 2), "shape.reduce")
    assert expected_input(op("tilizer", t=2), 0) == ((2, 1, 1), "shape.eltwise")
    assert expected_input(op("splice"), 0) == (None, None)
    assert input_count(mm) == 3 and input_count(op("add")) == 2 and input_count(op("splice")) is None


def test_tiles_read_and_buffers():
    mm = op("matmul", grid=(2, 4), m_k=4)
    assert tiles_read_per_core(mm, 0, (1, 8, 4)) == 16       # a row strip: all of K for its rows
    assert tiles_read_per_core(mm, 1, (1, 4, 8)) == 8        # a column strip
    assert tiles_read_per_core(op("add", grid=(2, 4)), 0, (1, 8, 8)) == 8
    # input buffers: two granules, ~32 KB latency hiding in power-of-two tiles, whole double granules
    assert input_buffer_tiles(2, 2080) == 16 and input_buffer_tiles(2, 2080, latency_hiding=False) == 4
    assert input_buffer_tiles(3, 2080, latency_hiding=False, min_tiles=10) == 12
    assert input_granule(op("matmul", mblock=(4, 2), ublock=(2, 3), u_kt=5, min_buffer_input=0), 0) == 10
    assert input_granule(op("matmul", mblock=(4, 2), ublock=(2, 3), u_kt=5), 1) == 30
    # a prologued queue split over the op's grid by the largest factors that divide it
    assert prologue_tiles_per_core(op("matmul", grid=(4, 6)), 1, (1, 6, 9)) == 1 * 2 * 3
    assert prologue_tiles_per_core(op("matmul", grid=(4, 1), identity=True), 0, (1, 4, 7)) == 7


def test_l1_footprint():
    mm = op("matmul", mblock=(2, 2), ublock=(2, 2), m_k=2, u_kt=2, min_buffer_input=0)
    parts = footprint(mm, [InputBuffer(1120), InputBuffer(1120, in_place_tiles=8)], out_tile_bytes=2080,
                      intermed_tile_bytes=4128, intermed_separate=True, latency_hiding=False)
    assert parts["output"] == 2 * 16 * 2080 and parts["intermediate"] == 16 * 4128
    assert parts["inputs"] == 2 * (2 * 2) * 1120 and parts["prologue"] == 8 * 1120
    with_min = footprint(mm, [InputBuffer(1120, min_size_tiles=20), InputBuffer(1120)], out_tile_bytes=2080,
                         intermed_tile_bytes=2080, intermed_separate=False, latency_hiding=False)
    assert with_min["input_buf_min_size"] == (24 - 8) * 1120   # 20 rounded up to whole double granules and with_min["intermediate"] == 0


# ------------------------------------------------------------------------------------------------------------
# epoch and program cost
# ------------------------------------------------------------------------------------------------------------

def test_dram_readers_contend_in_their_channels_not_per_core():
    e150 = get_device("e150")
    readers = [OpLoad(f"op{i}", 8, 100, (Transfer(1000.0, "dram", channels=(i,)),)) for i in range(4)]
    # four ops on four channels: each channel serves one op's 8 cores, each core at its own limit
    alone = epoch_timing(e150, readers, 1).ops[0]
    assert alone.terms["dram_in"] == pytest.approx(1000 / (e150.dram_bw_bytes_per_cycle / 2))
    assert alone.terms["dram_channel"] == pytest.approx(8 * 1000 / e150.dram_channel_bw_bytes_per_cycle)
    # the same four ops on one channel share it
    shared = [OpLoad(f"op{i}", 8, 100, (Transfer(1000.0, "dram", channels=(0,)),)) for i in range(4)]
    assert epoch_timing(e150, shared, 1).ops[0].terms["dram_channel"] == pytest.approx(4 * alone.terms["dram_channel"])
    # prologue reads contend in their channels too, once per epoch
    prologue = [OpLoad(f"op{i}", 8, 100, (Transfer(1000.0, "dram", once=True, channels=(0,)),)) for i in range(4)]
    epoch = epoch_timing(e150, prologue, 1)
    assert epoch.prologue_cycles == pytest.approx(4 * 8 * 1000 / e150.dram_channel_bw_bytes_per_cycle)


def test_host_writers_share_the_pcie_link():
    """Every host writer of an epoch is paced by all the epoch's host bytes over PCIe, not by a per-core share:
    a 2-core op writing twice the bytes per core of a 1-core op waits no longer than the link needs for both."""
    e150 = get_device("e150")
    big = OpLoad("big", 2, 10, (), (Transfer(4800.0, "pcie"),))
    small = OpLoad("small", 1, 10, (), (Transfer(2400.0, "pcie"),))
    epoch = epoch_timing(e150, [big, small], 1)
    total = (2 * 4800 + 2400) / e150.pcie_bw_bytes_per_cycle
    assert [o.terms["pcie_out"] for o in epoch.ops] == [pytest.approx(total)] * 2
    assert epoch.pipeline_cycles == pytest.approx(total)
    # once per epoch (an epilogue write to the host) the same link paces the epoch's epilogue
    once = OpLoad("once", 1, 10, (), (Transfer(2400.0, "pcie", once=True),))
    assert epoch_timing(e150, [once, big], 1).epilogue_cycles == pytest.approx(2400 / e150.pcie_bw_bytes_per_cycle)


def test_a_weight_broadcast_over_t_and_kept_raw_is_loaded_once_not_once_per_t():
    """A matmul at t = 98 reading an 18 x 2-tile weight through a z broadcast: the post-TM tiles (98 copies) do
    not fit its input buffer, so the backend keeps the queue raw and re-streams it from L1 every input (§2.6): the
    prologue loads the 36 raw tiles, not what the core reads per input; a weight that fits transformed loads
    what the core reads."""
    from pybuda.arch.movement import MovingInput, QueueLayout, prologue_bytes
    streamed = op("matmul", t=98, ublock=(1, 2), u_kt=18, m_k=1)
    weight = MovingInput("w", (("broadcast", "z", 98),), QueueLayout("w", (1, 18, 2), (1, 1)), tile_bytes=2080,
                         prologue=True)
    assert prologue_bytes(streamed, 1, weight, 98 * 36 * 2080) == 36 * 2080
    small = MovingInput("w", (), QueueLayout("w", (1, 2, 2), (1, 1)), tile_bytes=2080, prologue=True)
    assert prologue_bytes(op("matmul", ublock=(1, 2), u_kt=2, m_k=1), 1, small, 4 * 2080) == 4 * 2080


def test_epoch_cost_is_fill_pipeline_prologue_epilogue():
    e150 = get_device("e150")
    a = OpLoad("a", 1, 100, (Transfer(4000.0, "dram", once=True),))
    b = OpLoad("b", 1, 300, (), (Transfer(2400.0, "pcie"),), preds=("a",))
    c = OpLoad("c", 1, 50, preds=("a",))
    epoch = epoch_timing(e150, [a, b, c], input_count=4)
    by_name = {o.name: o for o in epoch.ops}
    assert by_name["b"].limiter == "kernel" and by_name["b"].terms["pcie_out"] == 100
    assert epoch.fill_cycles == 100 + 300 and epoch.pipeline_cycles == 300
    assert epoch.prologue_cycles == 4000 / (e150.dram_bw_bytes_per_cycle / 2)
    assert epoch.epoch_cycles == 400 + 3 * 300 + epoch.prologue_cycles
    assert by_name["a"].prologue_bytes == 4000
    # a dependency cycle falls back to the slowest op
    loop = epoch_timing(e150, [OpLoad("x", 1, 10, preds=("y",)), OpLoad("y", 1, 20, preds=("x",))], 1)
    assert loop.fill_cycles == 20
    assert program_cycles(e150, [(100.5, 2), (10.0, 1)], switches=1) == 211 + e150.epoch_switch_cycles


def test_inner_dim():
    from pybuda.arch.operands import inner_dim
    assert inner_dim("matmul") == (0, 2) and inner_dim("matmul", identity=True) == (1, 1)
    assert inner_dim("reduce", dim="r") == (0, 1) and inner_dim("reduce", dim="c") == (0, 2)
    assert inner_dim("reduce", dim="z") is None and inner_dim("add") is None
