"""Tests of pybuda.backend_sim: data formats, fidelity, op cycle model, numeric execution and timing."""
from __future__ import annotations

import csv
import functools
import glob
import math
import os

import ml_dtypes
import numpy as np
import pytest

from pybuda.arch.operands import output_granules
from pybuda.backend_sim import PerfReport, Simulator, SimulatorError, estimate, fidelity_product, quantize
from pybuda.backend_sim.timing import LIMITERS
from pybuda.backend_sim.formats import truncate_mantissa
from pybuda.dataformat import DataFormat
from pybuda.netlist import check, load as load_netlist

from corpus import REAL  # noqa: E402
MUL_NETLIST = REAL + "op_tests__netlists__bh_test_plan_netlists__hlk_functional_tests__netlist_binary_fp16_mul_op.yaml"
FF_NETLIST = REAL + "graph_tests__netlists__pybuda_pregenerated__feedforward__grayskull__ff_1_128_1024_netlist.yaml"
MODULE_NETLIST = REAL + "graph_tests__netlists__netlist_module_direct_1x1.yaml"


def bf16(x):
    return np.asarray(x, dtype=np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)


@functools.lru_cache(maxsize=None)
def corpus(path: str):
    return load_netlist(path)


# ------------------------------------------------------------------------------------------------------------
# data formats
# ------------------------------------------------------------------------------------------------------------

def test_float32_identity_and_copy():
    x = np.array([1.1, -2.5e-30, 3e38], dtype=np.float32)
    y = quantize(x, "Float32")
    assert y.dtype == np.float32 and np.array_equal(x, y) and y is not x


def test_bfloat16_round_to_nearest_even():
    cases = {
        1 + 2 ** -8: 1.0,                      # tie, 1.0 is even -> down
        1 + 3 * 2 ** -8: 1 + 2 ** -6,          # tie, 1+2^-7 is odd -> up
        1 + 2 ** -7 + 2 ** -9: 1 + 2 ** -7,    # below half -> down
        1 + 2 ** -8 + 2 ** -20: 1 + 2 ** -7,   # above half -> up
        -(1 + 3 * 2 ** -8): -(1 + 2 ** -6),
        (1 + 2 ** -7 + 2 ** -8) * 2.0 ** 100: (1 + 2 ** -6) * 2.0 ** 100,  # tie at a large exponent
    }
    x = np.array(list(cases), dtype=np.float32)
    assert np.array_equal(quantize(x, DataFormat.Float16_b), np.array(list(cases.values()), dtype=np.float32))


def test_bfloat16_matches_bit_level_rne():
    rng = np.random.default_rng(1)
    x = (rng.standard_normal(10000) * 10.0 ** rng.integers(-20, 20, 10000)).astype(np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) << 16  # independent RNE on the bit pattern
    expected = rounded.astype(np.uint32).view(np.float32)
    assert np.array_equal(quantize(x, "Float16_b"), expected)


def test_float16_rounding_and_saturation():
    x = np.array([1 + 2 ** -11, 1 + 3 * 2 ** -11, 65519.0, 65520.0, -70000.0, 2.0 ** -25, 3 * 2.0 ** -25],
                 dtype=np.float32)
    y = quantize(x, "Float16")
    assert list(y[:3]) == [1.0, 1 + 2 ** -9, 65504.0]
    assert y[3] == np.inf and y[4] == -np.inf  # overflow follows numpy's IEEE cast
    assert y[5] == 0.0 and y[6] == 2.0 ** -23  # subnormal ties to even


def test_bfp8_shared_exponent_per_16_values():
    row = np.zeros(32, dtype=np.float32)
    row[0], row[1], row[2] = 8.0, 0.01, 0.3      # block 0: exponent 3, step 2^-3
    row[16], row[17] = 0.5, 0.01                 # block 1: exponent -1, step 2^-7
    y = quantize(row[None], "Bfp8_b")[0]
    assert y[0] == 8.0 and y[1] == 0.0 and y[2] == 0.25
    assert y[16] == 0.5 and y[17] == 2 ** -7
    # the same 0.01 in its own block keeps its precision: exponent -7, step 2^-13
    alone = np.zeros((1, 16), np.float32)
    alone[0, 0] = 0.01
    assert abs(quantize(alone, "Bfp8_b")[0, 0] - 0.01) <= 2 ** -14


@pytest.mark.parametrize("df, bits", [("Bfp8_b", 7), ("Bfp4_b", 3), ("Bfp2_b", 1), ("Bfp8", 7), ("Bfp4", 3)])
def test_bfp_error_bound(df, bits):
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((4, 64, 96)) * rng.uniform(0.01, 10, (4, 64, 1))).astype(np.float32)
    y = quantize(x, df)
    blocks_x = x.reshape(-1, 16).astype(np.float64)
    blocks_y = y.reshape(-1, 16).astype(np.float64)
    shared = np.floor(np.log2(np.abs(blocks_x).max(axis=1, keepdims=True)))
    step = 2.0 ** (shared - (bits - 1))
    kmax = 2 ** bits - 1
    err = np.abs(blocks_y - blocks_x)
    clipped = np.abs(blocks_x) > kmax * step  # values rounding past the largest magnitude saturate
    assert np.all(err[~clipped] <= step.repeat(16, axis=1)[~clipped] / 2 + 1e-12)
    assert np.all(np.abs(blocks_y[clipped]) == (kmax * step).repeat(16, axis=1)[clipped])
    # every value is an integer multiple of its block's step
    k = blocks_y / step
    assert np.array_equal(k, np.round(k))


def test_bfp2_values_are_zero_or_block_power_of_two():
    x = np.array([[1.5, 0.7, -0.2, 0.26] + [0.0] * 12], dtype=np.float32)
    assert list(quantize(x, "Bfp2_b")[0, :4]) == [1.0, 1.0, -0.0, 0.0]


def test_bfp_a_format_exponent_range():
    tiny = np.full((1, 16), 2.0 ** -30, dtype=np.float32)
    assert np.all(quantize(tiny, "Bfp8") == 0.0)          # 5-bit shared exponent cannot reach 2^-30
    assert np.all(quantize(tiny, "Bfp8_b") == 2.0 ** -30)  # 8-bit one can
    big = np.full((1, 16), 1.0e6, dtype=np.float32)
    assert np.all(quantize(big, "Bfp8") == 127 * 2.0 ** (16 - 6))  # saturates at the largest A exponent
    assert np.all(quantize(big, "Bfp8_b") == 1.0e6 // 2 ** 13 * 2 ** 13)


def test_integer_and_fp8_formats():
    x = np.array([2.5, 3.5, -200.0, 126.6], dtype=np.float32)
    assert list(quantize(x, "Int8")) == [2.0, 4.0, -127.0, 127.0]
    assert list(quantize(np.array([1e10, -3.5]), "Int32")) == [2147483647.0, -4.0]
    assert list(quantize(np.array([300.0, 1000.0]), "Lf8")) == [320.0, 1024.0]  # e5m2: 2 mantissa bits
    assert quantize(np.array([300.0]), "Fp8_e4m3")[0] == 288.0  # e4m3: 3 mantissa bits


# ------------------------------------------------------------------------------------------------------------
# math fidelity
# ------------------------------------------------------------------------------------------------------------

def test_fidelity_phases_on_known_values():
    a = np.array([1 + 2 ** -7 + 2 ** -3], np.float32)  # srcA: hi slice keeps 4 fraction bits
    b = np.array([1 + 2 ** -7], np.float32)            # srcB: hi slice keeps 6 fraction bits
    assert fidelity_product(a, b, "LoFi")[0] == 1.125 * 1.0
    assert fidelity_product(a, b, "HiFi2")[0] == float(a[0]) * 1.0
    assert fidelity_product(a, b, "HiFi3")[0] == float(a[0]) * 1.0 + 1.125 * 2 ** -7
    assert fidelity_product(a, b, "HiFi4")[0] == float(a[0]) * float(b[0])


def test_fidelity_hifi4_exact_for_bf16_and_lofi_coarser():
    rng = np.random.default_rng(3)
    a = bf16(rng.uniform(-4, 4, 20000)).astype(np.float32)
    b = bf16(rng.uniform(-4, 4, 20000)).astype(np.float32)
    exact = a.astype(np.float64) * b.astype(np.float64)
    assert np.array_equal(fidelity_product(a, b, "HiFi4").astype(np.float64), exact)
    errs = [np.mean(np.abs(fidelity_product(a, b, f) - exact) / np.abs(exact)) for f in ("LoFi", "HiFi2", "HiFi3")]
    assert errs[0] > errs[1] > errs[2] > 0
    lofi_rel = np.abs(fidelity_product(a, b, "LoFi") - exact) / np.abs(exact)
    assert lofi_rel.max() <= 2 ** -4 + 2 ** -6 and lofi_rel.mean() > 1e-3  # truncated 4 x 6 fraction bits


def test_truncate_mantissa():
    x = np.array([1 + 2 ** -3 + 2 ** -10, -(1 + 2 ** -11)], np.float32)
    assert list(truncate_mantissa(x, 10)) == [1 + 2 ** -3 + 2 ** -10, -1.0]
    assert list(truncate_mantissa(x, 3)) == [1 + 2 ** -3, -1.0]


# ------------------------------------------------------------------------------------------------------------
# hand-built netlists
# ------------------------------------------------------------------------------------------------------------

MUL_YAML = """
devices: {arch: grayskull}
queues:
  in0: {input: HOST, type: queue, entries: 2, grid_size: [1, 2], t: 2, mblock: [1, 2], ublock: [2, 1], df: Float16_b, target_device: 0, loc: dram, dram: [[0, 0x1000], [1, 0x1000]]}
  in1: {input: HOST, type: queue, entries: 2, grid_size: [1, 2], t: 2, mblock: [1, 2], ublock: [2, 1], df: Float16_b, target_device: 0, loc: dram, dram: [[2, 0x1000], [3, 0x1000]]}
  out: {input: mul, type: queue, entries: 2, grid_size: [1, 1], t: 2, mblock: [2, 4], ublock: [1, 1], df: Float16_b, target_device: 0, loc: host, host: [0x0]}
graphs:
  g:
    target_device: 0
    input_count: 2
    mul: {type: multiply, grid_loc: [0, 0], grid_size: [1, 2], inputs: [in0, in1], in_df: [Float16_b, Float16_b],
          out_df: Float16_b, intermed_df: Float16_b, acc_df: Float16_b, math_fidelity: HiFi4,
          t: 2, mblock: [1, 2], ublock: [2, 1], buf_size_mb: 2, ublock_order: r}
programs:
  - main:
    - var: {$c_two: 2}
    - staticvar: {$lptr: 0, $gptr: 0}
    - execute: {graph_name: g, queue_settings: {
        in0: {prologue: false, epilogue: false, zero: false, rd_ptr_local: $lptr, rd_ptr_global: $gptr},
        in1: {prologue: false, epilogue: false, zero: false, rd_ptr_local: $lptr, rd_ptr_global: $gptr}}}
    - varinst: [$lptr, incwrap, $c_two, 4]
    - varinst: [$gptr, incwrap, $c_two, 4]
"""


def test_multiply_netlist_exact_and_pointers_across_runs():
    sim = Simulator(MUL_YAML)
    assert sim.queue_shape("in0") == (2, 64, 128)
    rng = np.random.default_rng(4)
    a = rng.uniform(-2, 2, (4, 2, 64, 128))
    b = rng.uniform(-2, 2, (4, 2, 64, 128))
    sim.push("in0", a)  # 4 entries into a 2-entry queue: 2 wait until the program pops
    sim.push("in1", b)
    sim.run()
    sim.run()  # staticvar pointers persist, so the second run reads entries 2 and 3
    assert sim.executed == ["g", "g"]
    for i in range(4):
        out = sim.pop("out")
        expected = bf16(bf16(a[i]) * bf16(b[i]))  # HiFi4 on bf16 is exact, then rounded to bf16 once
        assert out.shape == (2, 64, 128) and np.array_equal(out, expected.astype(np.float32))
    with pytest.raises(SimulatorError, match="empty"):
        sim.pop("out")


def test_multiply_lofi_fidelity_in_netlist():
    sim = Simulator(MUL_YAML.replace("HiFi4", "LoFi"))
    rng = np.random.default_rng(5)
    a, b = rng.uniform(0.5, 2, (2, 2, 2, 64, 128))
    sim.push("in0", a)
    sim.push("in1", b)
    sim.run()
    exact = bf16(a) * bf16(b)
    got = np.stack([sim.pop("out"), sim.pop("out")])
    rel = np.abs(got - exact) / exact
    assert rel.max() < 2 ** -4 + 2 ** -6 + 2 ** -8 and rel.mean() > 1e-3


MATMUL_YAML = """
devices: {arch: wormhole_b0}
queues:
  act:  {input: HOST, type: queue, entries: 1, grid_size: [1, 1], t: 2, mblock: [2, 4], ublock: [1, 1], df: Float16_b, target_device: 0, loc: dram, dram: [[0, 0x0]]}
  w:    {input: HOST, type: ram, entries: 1, grid_size: [1, 2], t: 2, mblock: [4, 1], ublock: [1, 1], df: Float16_b, target_device: 0, loc: dram, dram: [[1, 0x0], [2, 0x0]]}
  bias: {input: HOST, type: ram, entries: 1, grid_size: [1, 1], t: 2, mblock: [2, 2], ublock: [1, 1], df: Float16_b, target_device: 0, loc: dram, dram: [[3, 0x0]]}
  out:  {input: mm, type: queue, entries: 1, grid_size: [1, 1], t: 2, mblock: [2, 2], ublock: [1, 1], df: Float32, target_device: 0, loc: host, host: [0x0]}
graphs:
  g:
    target_device: 0
    input_count: 1
    mm: {type: matmul, grid_loc: [0, 0], grid_size: [2, 2], inputs: [act, w, bias], in_df: [Float16_b, Float16_b, Float16_b],
         out_df: Float32, intermed_df: INTERMED, acc_df: ACC, math_fidelity: HiFi4,
         t: 2, mblock: [1, 1], ublock: [1, 1], buf_size_mb: 2, ublock_order: r, attributes: {m_k: 2, u_kt: 2, bias: true}}
programs:
  - main:
    - var: {$c_zero: 0, $c_one: 1}
    - execute: {graph_name: g, queue_settings: {
        act: {prologue: false, epilogue: false, zero: false, rd_ptr_local: $c_zero, rd_ptr_global: $c_zero},
        w: {prologue: true, epilogue: false, zero: false, rd_ptr_global: $c_zero, wr_ptr_global: $c_zero},
        bias: {prologue: true, epilogue: false, zero: false, rd_ptr_global: $c_zero, wr_ptr_global: $c_zero}}}
    - varinst: [$c_zero, add, $c_zero, $c_zero]
"""


def _run_matmul(intermed: str, acc: str, seed: int = 6):
    sim = Simulator(MATMUL_YAML.replace("INTERMED", intermed).replace("ACC", acc))
    rng = np.random.default_rng(seed)
    a = rng.uniform(-1, 1, sim.queue_shape("act"))
    w = rng.uniform(-1, 1, sim.queue_shape("w"))
    bias = rng.uniform(-1, 1, sim.queue_shape("bias"))
    sim.push("act", a)
    sim.push("w", w)
    sim.push("bias", bias)
    sim.run()
    return sim.pop("out").astype(np.float64), bf16(a), bf16(w), bf16(bias)


def _bias_rows(bias):
    """Row 0 of every bias tile broadcast to the tile's 32 rows (the matmul kernel's row-broadcast bias add)."""
    t, r, c = bias.shape
    return np.broadcast_to(bias.reshape(t, r // 32, 32, c)[:, :, :1, :], (t, r // 32, 32, c)).reshape(t, r, c)


def test_matmul_mk_bias_float32_accumulation():
    out, a, w, bias = _run_matmul("Float32", "Float32")
    assert out.shape == (2, 64, 64) and a.shape == (2, 64, 128) and w.shape == (2, 128, 64)
    # Float32 dest and spills; the packed result is re-read through srcA (10 fraction bits) for the bias add,
    # and only row 0 of each bias tile counts (rows 1..31 of the random bias are ignored)
    mm = a @ w
    expected = mm + _bias_rows(bias)
    assert np.all(np.abs(out - expected) <= 2 ** -10 * np.abs(mm) + 1e-6)
    assert np.max(np.abs(out - (mm + bias))) > 0.1


def test_matmul_spills_round_partials_to_intermed_df():
    out, a, w, bias = _run_matmul("Float16_b", "Float16_b")
    # model: partial of K-step 0 rounded to dest (acc_df) and spilled (intermed_df), K-step 1 added, bias added
    p0 = bf16(bf16(a[:, :, :64] @ w[:, :64, :]))
    p1 = bf16(p0 + a[:, :, 64:] @ w[:, 64:, :])
    expected = bf16(p1 + _bias_rows(bias))
    assert np.max(np.abs(out - expected) / np.maximum(np.abs(expected), 1e-3)) <= 2 ** -7
    exact = a @ w + _bias_rows(bias)
    # (the Float32 run also loses a little: its packed result is re-read through srcA for the bias add)
    assert np.abs(out - exact).mean() > 4 * np.abs(_run_matmul("Float32", "Float32")[0] - exact).mean()


E2E_YAML = """
devices: {arch: [blackhole, wormhole_b0]}
queues:
  x:   {input: HOST, type: queue, entries: 4, grid_size: [1, 1], t: 1, mblock: [1, 1], ublock: [1, 2], df: Float32, target_device: 0, loc: dram, dram: [[0, 0x0]]}
  y:   {input: HOST, type: queue, entries: 4, grid_size: [1, 1], t: 1, mblock: [1, 1], ublock: [1, 2], df: Float16_b, target_device: 0, loc: dram, dram: [[1, 0x0]]}
  e2e: {input: ex, type: queue, entries: 2, grid_size: [1, 1], t: 1, mblock: [1, 2], ublock: [1, 1], df: Float16_b, target_device: 0, loc: dram, dram: [[2, 0x0]]}
  out: {input: sum, type: queue, entries: 2, grid_size: [1, 1], t: 1, mblock: [1, 1], ublock: [1, 2], df: Float32, target_device: 0, loc: host, host: [0x0]}
graphs:
  g0:
    target_device: 0
    input_count: 2
    ex: {type: exp, grid_loc: [0, 0], grid_size: [1, 1], inputs: [x], in_df: [Float32], out_df: Float16_b, intermed_df: Float16_b,
         acc_df: Float32, math_fidelity: HiFi4, t: 1, mblock: [1, 1], ublock: [1, 2], buf_size_mb: 2, ublock_order: r}
  g1:
    target_device: 0
    input_count: 2
    sum: {type: add, grid_loc: [0, 0], grid_size: [1, 1], inputs: [e2e, y], in_df: [Float16_b, Float16_b], out_df: Float32,
          intermed_df: Float32, acc_df: Float32, math_fidelity: HiFi4, t: 1, mblock: [1, 2], ublock: [1, 1], buf_size_mb: 2, ublock_order: r}
programs:
  - run:
    - param: [$p_loop_count]
    - var: {$c_mb: 2}
    - staticvar: {$gx: 0, $lx: 0, $gy: 0, $ly: 0, $ge: 0, $le: 0}
    - loop: $p_loop_count
    -   allocate_queue: [e2e]
    -   execute: {graph_name: g0, queue_settings: {x: {prologue: false, epilogue: false, zero: false, rd_ptr_local: $lx, rd_ptr_global: $gx}}}
    -   varinst: [$gx, incwrap, $c_mb, 8]
    -   varinst: [$lx, incwrap, $c_mb, 8]
    -   execute: {graph_name: g1, queue_settings: {
          e2e: {prologue: false, epilogue: false, zero: false, rd_ptr_local: $le, rd_ptr_global: $ge},
          y: {prologue: false, epilogue: false, zero: false, rd_ptr_local: $ly, rd_ptr_global: $gy}}}
    -   deallocate_queue: [e2e]
    -   varinst: [$ge, incwrap, $c_mb, 4]
    -   varinst: [$le, incwrap, $c_mb, 4]
    -   varinst: [$gy, incwrap, $c_mb, 8]
    -   varinst: [$ly, incwrap, $c_mb, 8]
    - endloop
"""


def test_two_graph_program_with_e2e_queue_and_loop():
    sim = Simulator(E2E_YAML)
    assert sim.arch == "wormhole_b0"  # first supported arch of the list
    rng = np.random.default_rng(7)
    x = rng.uniform(-2, 2, (6, 1, 32, 64))
    y = rng.uniform(-2, 2, (6, 1, 32, 64))
    sim.push("x", x)
    sim.push("y", y)
    sim.run(p_loop_count=3)
    assert sim.executed == ["g0", "g1"] * 3
    assert sim.occupancy("out") == 6  # host drained the 2-entry output queue while the program ran
    for i in range(6):
        expected = bf16(np.exp(x[i].astype(np.float32).astype(np.float64)).astype(np.float32)) + bf16(y[i])
        assert np.max(np.abs(sim.pop("out") - expected)) < 1e-6
    with pytest.raises(SimulatorError, match=r"reads queue 'x' at pointer"):
        sim.run(p_loop_count=1)  # no more inputs pushed


def test_deallocated_queue_drops_its_contents_and_cannot_be_read():
    """deallocate_queue frees the queue's DRAM: its entries are dropped (the simulator's memory stays bounded by
    the live queues), and a graph that reads it before the next allocate_queue is an error, not stale data."""
    rng = np.random.default_rng(7)
    sim = Simulator(E2E_YAML)
    sim.push("x", rng.uniform(-2, 2, (2, 1, 32, 64)))
    sim.push("y", rng.uniform(-2, 2, (2, 1, 32, 64)))
    sim.run(p_loop_count=1)
    assert sim._queues["e2e"].slots == [None, None]
    early = E2E_YAML.replace("    -   deallocate_queue: [e2e]\n", "").replace(
        "    -   execute: {graph_name: g1,", "    -   deallocate_queue: [e2e]\n    -   execute: {graph_name: g1,")
    sim = Simulator(early)
    sim.push("x", rng.uniform(-2, 2, (2, 1, 32, 64)))
    sim.push("y", rng.uniform(-2, 2, (2, 1, 32, 64)))
    with pytest.raises(SimulatorError, match=r"op 'sum' \(graph 'g1'\) reads queue 'e2e' after deallocate_queue"):
        sim.run(p_loop_count=1)


def test_missing_param_is_an_error():
    with pytest.raises(SimulatorError, match=r"p_loop_count"):
        Simulator(E2E_YAML).run()


UNARY_YAML_HEAD = """
devices: {arch: grayskull}
queues:
  x: {input: HOST, type: queue, entries: 1, grid_size: [1, 1], t: 2, mblock: [2, 2], ublock: [1, 1], df: Float32, target_device: 0, loc: dram, dram: [[0, 0x0]]}
"""


def _unary_netlist(ops: dict[str, str]) -> str:
    queues = "".join(f"  out_{n}: {{input: {n}, type: queue, entries: 1, grid_size: [1, 1], t: 2, mblock: [2, 2], "
                     f"ublock: [1, 1], df: Float32, target_device: 0, loc: host, host: [0x0]}}\n" for n in ops)
    body = "".join(f"    {n}: {{type: {spec}, grid_loc: [0, {k}], grid_size: [1, 1], inputs: [x], in_df: [Float32], "
                   f"out_df: Float32, intermed_df: Float32, acc_df: Float32, math_fidelity: HiFi4, t: 2, "
                   f"mblock: [2, 2], ublock: [1, 1], buf_size_mb: 2, ublock_order: r}}\n"
                   for k, (n, spec) in enumerate(ops.items()))
    return (UNARY_YAML_HEAD + queues + "graphs:\n  g:\n    target_device: 0\n    input_count: 1\n" + body +
            "programs:\n  - p:\n    - var: {$z: 0}\n    - execute: {graph_name: g, queue_settings: {x: "
            "{prologue: false, epilogue: false, zero: false, rd_ptr_local: $z, rd_ptr_global: $z}}}\n")


def test_sfpu_ops_match_numpy():
    from math import erf
    derf = np.vectorize(erf)
    refs = {
        "exp": ("exp", np.exp), "log": ("log", np.log), "sqrt": ("sqrt", np.sqrt),
        "recip": ("reciprocal", lambda v: 1 / v), "sigm": ("sigmoid", lambda v: 1 / (1 + np.exp(-v))),
        "tanh": ("tanh", np.tanh), "sq": ("square", np.square), "ab": ("abs", np.abs), "sin": ("sine", np.sin),
        "cos": ("cosine", np.cos), "drop": ("dropout, attributes: {p: 0.1, seed: 3}", lambda v: v),
        "pw": ("power, attributes: {exp: 3}", lambda v: v ** 3),
        "lr": ("lrelu, attributes: {slope: 0.25}", lambda v: np.where(v > 0, v, 0.25 * v)),
        "gelu": ("gelu", lambda v: 0.5 * v * (1 + derf(v / np.sqrt(2)))),
        "gelua": ("gelu, attributes: {approximate_mode: true}",
                  lambda v: 0.5 * v * (1 + np.tanh(np.sqrt(2 / np.pi) * (v + 0.044715 * v ** 3)))),
        "gd": ("gelu_derivative", lambda v: 0.5 * (1 + derf(v / np.sqrt(2))) + v * np.exp(-v * v / 2) / np.sqrt(2 * np.pi)),
        "nop": ("nop", lambda v: v), "dc": ("datacopy", lambda v: v),
    }
    sim = Simulator(_unary_netlist({n: spec for n, (spec, _) in refs.items()}))
    rng = np.random.default_rng(8)
    shape = sim.queue_shape("x")
    sign = np.where(np.arange(shape[-1]) % 2, 1.0, -1.0)  # odd columns positive (for log and sqrt)
    x = (rng.uniform(0.1, 3.0, shape) * sign).astype(np.float32)
    sim.push("x", x)
    sim.run()
    for name, (_, fn) in refs.items():
        got = sim.pop(f"out_{name}").astype(np.float64)
        arg = x.astype(np.float64)
        if name in ("log", "sqrt"):
            got, arg = got[..., 1::2], arg[..., 1::2]
        want = fn(arg)
        assert np.allclose(got, want, rtol=2e-6, atol=1e-6), name


def test_packer_relu_modes():
    sim = Simulator(_unary_netlist({
        "rmin": "nop, attributes: {relu_en: true, relu_threshold: 0.5, relu_mode: min}",
        "rmax": "nop, attributes: {relu_en: true, relu_threshold: 0.5, relu_mode: max}",
        "rdef": "nop, attributes: {relu_en: true}",
    }))
    x = np.random.default_rng(9).uniform(-1, 1, sim.queue_shape("x")).astype(np.float32)
    sim.push("x", x)
    sim.run()
    assert np.array_equal(sim.pop("out_rmin"), np.where(x > 0.5, x, 0))
    assert np.array_equal(sim.pop("out_rmax"), np.clip(x, 0, 0.5))
    assert np.array_equal(sim.pop("out_rdef"), np.maximum(x, 0))


TM_YAML = """
devices: {arch: grayskull}
queues:
  a:   {input: HOST, type: queue, entries: 1, grid_size: [1, 1], t: 1, mblock: [2, 4], ublock: [1, 1], df: Float32, target_device: 0, loc: dram, dram: [[0, 0x0]]}
  one: {input: HOST, type: queue, entries: 1, grid_size: [1, 1], t: 1, mblock: [1, 1], ublock: [1, 1], df: Float32, target_device: 0, loc: dram, dram: [[0, 0x0]]}
  o_tr: {input: tr, type: queue, entries: 1, grid_size: [1, 1], t: 1, mblock: [4, 2], ublock: [1, 1], df: Float32, target_device: 0, loc: host, host: [0x0]}
  o_hs: {input: hs, type: queue, entries: 1, grid_size: [1, 1], t: 2, mblock: [2, 2], ublock: [1, 1], df: Float32, target_device: 0, loc: host, host: [0x0]}
  o_vh: {input: vh, type: queue, entries: 1, grid_size: [1, 1], t: 1, mblock: [1, 8], ublock: [1, 1], df: Float32, target_device: 0, loc: host, host: [0x0]}
  o_bc: {input: bc, type: queue, entries: 1, grid_size: [1, 1], t: 2, mblock: [2, 3], ublock: [1, 1], df: Float32, target_device: 0, loc: host, host: [0x0]}
  o_pd: {input: pd, type: queue, entries: 1, grid_size: [1, 1], t: 1, mblock: [2, 5], ublock: [1, 1], df: Float32, target_device: 0, loc: host, host: [0x0]}
graphs:
  g:
    target_device: 0
    input_count: 1
    tr: {type: nop, grid_loc: [0, 0], grid_size: [2, 1], inputs: [a], in_df: [Float32], out_df: Float32, intermed_df: Float32, acc_df: Float32,
         math_fidelity: HiFi4, t: 1, mblock: [2, 2], ublock: [1, 1], buf_size_mb: 2, ublock_order: r, input_0_tms: [transpose]}
    hs: {type: datacopy, grid_loc: [0, 1], grid_size: [1, 1], inputs: [a], in_df: [Float32], out_df: Float32, intermed_df: Float32, acc_df: Float32,
         math_fidelity: HiFi4, t: 2, mblock: [2, 2], ublock: [1, 1], buf_size_mb: 2, ublock_order: r, input_0_tms: [hslice: 2]}
    vh: {type: nop, grid_loc: [0, 2], grid_size: [1, 1], inputs: [a], in_df: [Float32], out_df: Float32, intermed_df: Float32, acc_df: Float32,
         math_fidelity: HiFi4, t: 1, mblock: [1, 8], ublock: [1, 1], buf_size_mb: 2, ublock_order: r, input_0_tms: [vslice: 2, hstack: 2]}
    bc: {type: nop, grid_loc: [0, 3], grid_size: [1, 1], inputs: [one], in_df: [Float32], out_df: Float32, intermed_df: Float32, acc_df: Float32,
         math_fidelity: HiFi4, t: 2, mblock: [2, 3], ublock: [1, 1], buf_size_mb: 2, ublock_order: r,
         input_0_tms: [broadcast: {r: 2}, broadcast: {c: 3}, broadcast: {z: 2}]}
    pd: {type: nop, grid_loc: [0, 4], grid_size: [1, 1], inputs: [a], in_df: [Float32], out_df: Float32, intermed_df: Float32, acc_df: Float32,
         math_fidelity: HiFi4, t: 1, mblock: [2, 5], ublock: [1, 1], buf_size_mb: 2, ublock_order: c, input_0_pad: {rt: 0, ct: 1, pad_value: 7.0}}
programs:
  - p:
    - var: {$z: 0}
    - execute: {graph_name: g, queue_settings: {
        a: {prologue: false, epilogue: false, zero: false, rd_ptr_local: $z, rd_ptr_global: $z},
        one: {prologue: true, epilogue: false, zero: false, rd_ptr_local: $z, rd_ptr_global: $z}}}
"""


def test_tms_and_pad():
    sim = Simulator(TM_YAML)
    rng = np.random.default_rng(10)
    a = rng.standard_normal(sim.queue_shape("a")).astype(np.float32)  # (1, 64, 128)
    one = rng.standard_normal(sim.queue_shape("one")).astype(np.float32)  # (1, 32, 32)
    sim.push("a", a)
    sim.push("one", one)
    sim.run()
    assert np.array_equal(sim.pop("o_tr")[0], a[0].T)
    hs = sim.pop("o_hs")
    assert np.array_equal(hs[0], a[0, :, :64]) and np.array_equal(hs[1], a[0, :, 64:])
    assert np.array_equal(sim.pop("o_vh")[0], np.concatenate([a[0, :32], a[0, 32:]], axis=1))
    bc = sim.pop("o_bc")
    assert bc.shape == (2, 64, 96)
    for z in range(2):
        for r in range(2):
            for c in range(3):
                assert np.array_equal(bc[z, r * 32:(r + 1) * 32, c * 32:(c + 1) * 32], one[0])
    pd = sim.pop("o_pd")
    assert np.array_equal(pd[0, :, :128], a[0]) and np.all(pd[0, :, 128:] == 7.0)


REDUCE_YAML = """
devices: {arch: grayskull}
queues:
  x:   {input: HOST, type: queue, entries: 1, grid_size: [1, 1], t: 2, mblock: [2, 2], ublock: [1, 1], df: Float16_b, target_device: 0, loc: dram, dram: [[0, 0x0]]}
  o_r: {input: rr, type: queue, entries: 1, grid_size: [1, 1], t: 2, mblock: [1, 2], ublock: [1, 1], df: Float16_b, target_device: 0, loc: host, host: [0x0]}
  o_c: {input: rc, type: queue, entries: 1, grid_size: [1, 1], t: 2, mblock: [2, 1], ublock: [1, 1], df: Float16_b, target_device: 0, loc: host, host: [0x0]}
  o_z: {input: rz, type: queue, entries: 1, grid_size: [1, 1], t: 1, mblock: [2, 2], ublock: [1, 1], df: Float16_b, target_device: 0, loc: host, host: [0x0]}
graphs:
  g:
    target_device: 0
    input_count: 1
    rr: {type: reduce, grid_loc: [0, 0], grid_size: [1, 1], inputs: [x], in_df: [Float16_b], out_df: Float16_b, intermed_df: Float16_b, acc_df: Float16_b,
         math_fidelity: HiFi3, t: 2, mblock: [1, 2], ublock: [1, 1], buf_size_mb: 2, ublock_order: r, attributes: {dim: r, type: max, m_k: 2, u_kt: 1}}
    rc: {type: reduce, grid_loc: [0, 1], grid_size: [1, 1], inputs: [x], in_df: [Float16_b], out_df: Float16_b, intermed_df: Float16_b, acc_df: Float16_b,
         math_fidelity: HiFi3, t: 2, mblock: [2, 1], ublock: [1, 1], buf_size_mb: 2, ublock_order: r, attributes: {dim: c, type: max, m_k: 1, u_kt: 2}}
    rz: {type: reduce, grid_loc: [0, 2], grid_size: [1, 1], inputs: [x], in_df: [Float16_b], out_df: Float16_b, intermed_df: Float16_b, acc_df: Float16_b,
         math_fidelity: HiFi3, t: 1, mblock: [2, 2], ublock: [1, 1], buf_size_mb: 2, ublock_order: r, attributes: {dim: z, type: max, z: 2}}
programs:
  - p:
    - var: {$z: 0}
    - execute: {graph_name: g, queue_settings: {x: {prologue: false, epilogue: false, zero: false, rd_ptr_local: $z, rd_ptr_global: $z}}}
"""


def test_reduce_max_dims():
    sim = Simulator(REDUCE_YAML)
    x = bf16(np.random.default_rng(11).standard_normal(sim.queue_shape("x"))).astype(np.float32)  # (2, 64, 64)
    sim.push("x", x)
    sim.run()
    r = sim.pop("o_r")
    assert r.shape == (2, 32, 64)
    assert np.array_equal(r[:, 0, :], x.max(axis=1)) and np.all(r[:, 1:, :] == 0)
    c = sim.pop("o_c")
    assert c.shape == (2, 64, 32)
    assert np.array_equal(c[:, :, 0], x.max(axis=2)) and np.all(c[:, :, 1:] == 0)
    z = sim.pop("o_z")
    assert z.shape == (1, 64, 64) and np.array_equal(z[0], np.maximum(x[0], x[1]))


GRAD_YAML = """
devices: {arch: grayskull}
queues:
  x:   {input: HOST, type: queue, entries: 4, grid_size: [1, 1], t: 1, mblock: [1, 1], ublock: [1, 1], df: Float32, target_device: 0, loc: dram, dram: [[0, 0x0]]}
  acc: {input: g_op, type: ram, entries: 1, grid_size: [1, 1], t: 1, mblock: [1, 1], ublock: [1, 1], df: Float32, target_device: 0, loc: dram, dram: [[1, 0x0]]}
graphs:
  g:
    target_device: 0
    input_count: 2
    g_op: {type: nop, grid_loc: [0, 0], grid_size: [1, 1], inputs: [x], in_df: [Float32], out_df: Float32, intermed_df: Float32, acc_df: Float32,
           math_fidelity: HiFi4, t: 1, mblock: [1, 1], ublock: [1, 1], buf_size_mb: 2, ublock_order: r, gradient_op: true}
programs:
  - p:
    - param: [$p_zero]
    - var: {$c_zero: 0, $c_two: 2}
    - staticvar: {$ptr: 0}
    - execute: {graph_name: g, queue_settings: {
        x: {prologue: false, epilogue: false, zero: false, rd_ptr_local: $ptr, rd_ptr_global: $ptr},
        acc: {prologue: true, epilogue: true, zero: $p_zero, rd_ptr_global: $c_zero, wr_ptr_global: $c_zero}}}
    - varinst: [$ptr, incwrap, $c_two, 8]
"""


def test_gradient_op_accumulates_into_ram_and_zero_setting():
    sim = Simulator(GRAD_YAML)
    x = np.random.default_rng(12).standard_normal((4, 1, 32, 32)).astype(np.float32)
    sim.push("x", x)
    sim.run(p_zero=1)
    assert np.allclose(sim.pop("acc"), x[0] + x[1], atol=1e-6)
    sim.run(p_zero=0)
    assert np.allclose(sim.peek("acc", 0), x.sum(axis=0), atol=1e-6)


def test_errors_name_the_problem():
    bad_type = _unary_netlist({"sp": "topk"})
    sim = Simulator(bad_type)
    sim.push("x", np.zeros(sim.queue_shape("x")))
    with pytest.raises(SimulatorError, match=r"op 'sp' has type 'topk'.*supported: .*matmul"):
        sim.run()
    bad_shape = _unary_netlist({"n": "nop"}).replace("t: 2, mblock: [2, 2], ublock: [1, 1], buf_size_mb",
                                                     "t: 2, mblock: [2, 1], ublock: [1, 1], buf_size_mb")
    sim = Simulator(bad_shape)
    sim.push("x", np.zeros(sim.queue_shape("x")))
    with pytest.raises(SimulatorError, match=r"op 'n' \(nop\) input 0 \('x'\): expected \(t, rt, ct\) = "
                                             r"\(2, 2, 1\) tiles after TMs, got \(2, 2, 2\)"):
        sim.run()
    with pytest.raises(SimulatorError, match=r"push to queue 'x': expected shape \(t, R, C\) = \(2, 64, 64\)"):
        sim.push("x", np.zeros((2, 64, 32)))
    with pytest.raises(SimulatorError, match="no queue 'nope'"):
        sim.pop("nope")
    with pytest.raises(SimulatorError, match="no program"):
        sim.run("nope")
    with pytest.raises(SimulatorError, match="cannot read /no/such/netlist.yaml"):
        Simulator("/no/such/netlist.yaml")


def test_netlist_input_forms(tmp_path):
    import yaml
    path = tmp_path / "mul.yaml"
    path.write_text(MUL_YAML)
    for src in (str(path), path, MUL_YAML, yaml.safe_load(MUL_YAML)):
        nl = load_netlist(src)
        assert list(nl.graphs) == ["g"] and nl.queues["out"].loc == "host"
    nl = load_netlist(MUL_YAML)
    before = load_netlist(MUL_YAML)
    sim = Simulator(nl)  # an already-loaded model is simulated as is, and left unchanged
    assert sim.netlist is nl
    sim.push("in0", np.ones((2,) + sim.queue_shape("in0")))
    sim.push("in1", np.ones((2,) + sim.queue_shape("in1")))
    sim.run()
    assert nl == before and estimate(nl).total_cycles == estimate(MUL_YAML).total_cycles
    with pytest.raises(SimulatorError, match="a netlist must be a path, YAML text, a dict or a pybuda.netlist.Netlist"):
        Simulator(42)


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace("graphs:\n  g:\n", "graphs:\n  g0:\n    mul: {type: nop, grid_loc: [1, 0], grid_size: [1, 1], "
                         "inputs: [in0], in_df: [Float16_b], out_df: Float16_b, intermed_df: Float16_b, "
                         "math_fidelity: HiFi4, t: 2, mblock: [2, 4], ublock: [1, 1], buf_size_mb: 2, "
                         "ublock_order: r}\n  g:\n"),
     r"op mul: \[name.duplicate_op\] op names must be globally unique; 'mul' is also in graph g0"),
    (lambda t: t.replace("inputs: [in0, in1]", "inputs: [in0, nope]"),
     r"op mul: \[input.missing\] input 1 'nope' is neither a queue nor an op"),
    (lambda t: t.replace("in_df: [Float16_b, Float16_b]", "in_df: [Float16_b]"),
     r"op mul: \[op.in_df_count\] in_df needs one data format per input \(expected 2, got 1\)"),
    (lambda t: t + "    - endloop\n", r"program main: \[program.loop_balance\] endloop without a loop"),
    (lambda t: t.replace("arch: grayskull", "arch: blackhole"),
     r"netlist arch \['blackhole'\] is not supported; the simulator models grayskull, wormhole_b0"),
])
def test_netlists_the_simulator_cannot_run_are_rejected_by_name(edit, message):
    text = edit(MUL_YAML)
    for run in (Simulator, estimate):
        with pytest.raises(SimulatorError, match=message):
            run(text)


def test_program_runner_nests_typed_loops_and_rejects_unmatched_ones():
    from pybuda.backend_sim.program import ProgramRunner
    from pybuda.netlist import EndLoop, Execute, Loop, Program, Var, VarInst

    class Record:
        def __init__(self):
            self.graphs = []

        def execute(self, graph, settings):
            self.graphs.append(graph)

        def variable_changed(self, name, value):
            pass

    body = [Var(opcode="var", vars={"$n": 0}), Loop(count=2), Execute(graph_name="a"), Loop(count=3),
            VarInst(dst="$n", op="inc", args=[1]), Execute(graph_name="b"), EndLoop(), EndLoop(),
            Execute(graph_name="c")]
    rec = Record()
    runner = ProgramRunner(Program(name="p", instructions=body), rec)
    runner.run()
    assert rec.graphs == ["a", "b", "b", "b"] * 2 + ["c"] and runner.vars["$n"] == 6
    for broken, message in ((body[:-2], "loop without endloop"), ([EndLoop()] + body, "endloop without loop")):
        with pytest.raises(SimulatorError, match=f"program 'p': {message}"):
            ProgramRunner(Program(name="p", instructions=broken), rec)


# ------------------------------------------------------------------------------------------------------------
# real netlists
# ------------------------------------------------------------------------------------------------------------

def test_corpus_binary_multiply_numerics():
    sim = Simulator(corpus(MUL_NETLIST))
    rng = np.random.default_rng(13)
    a = rng.uniform(-1, 1, sim.queue_shape("input0"))
    b = rng.uniform(-1, 1, sim.queue_shape("input1"))
    sim.push("input0", a)
    sim.push("input1", b)
    sim.run()
    out = sim.pop("output").astype(np.float64)
    exact = bf16(a) * bf16(b)
    # LoFi (4x6 fraction bits) product, Float16 dest (subnormal below 2^-14), bf16 output
    assert np.all(np.abs(out - exact) <= (2 ** -4 + 2 ** -6 + 2 ** -8) * np.abs(exact) + 2 ** -14)
    assert np.corrcoef(out.ravel(), exact.ravel())[0, 1] > 0.999


def _push_ff(sim: Simulator, rng):
    shapes = {n: sim.queue_shape(n) for n in sim.netlist.queues}
    w1 = rng.normal(0, 0.03, shapes["ff.bert.encoder.layer.0.intermediate.dense.weight"])
    w2 = rng.normal(0, 0.03, shapes["ff.bert.encoder.layer.0.output.dense.weight"])
    b1 = np.zeros(shapes["ff.bert.encoder.layer.0.intermediate.dense.bias"])
    b2 = np.zeros(shapes["ff.bert.encoder.layer.0.output.dense.bias"])
    b1[:, 0, :] = rng.uniform(-1, 1, b1.shape[-1])  # PyBuda bias trick: row 0 of the bias tile ...
    b2[:, 0, :] = rng.uniform(-1, 1, b2.shape[-1])
    ones_col = np.zeros((1, 32, 32))
    ones_col[:, :, 0] = 1.0  # ... times a constant tile with ones in column 0 = the bias row in every row
    sim.push("ff.bert.encoder.layer.0.intermediate.dense.weight", w1)
    sim.push("ff.bert.encoder.layer.0.output.dense.weight", w2)
    sim.push("ff.bert.encoder.layer.0.intermediate.dense.bias", b1)
    sim.push("ff.bert.encoder.layer.0.output.dense.bias", b2)
    for n, q in sim.netlist.queues.items():
        if n.startswith("lc.input_tensor"):
            sim.push(n, ones_col)
    return bf16(w1)[0], bf16(w2)[0], bf16(b1)[0, 0], bf16(b2)[0, 0]


def test_corpus_feedforward_numerics():
    from math import erf
    sim = Simulator(corpus(FF_NETLIST))
    rng = np.random.default_rng(14)
    w1, w2, b1, b2 = _push_ff(sim, rng)
    xs = rng.uniform(-1, 1, (2,) + sim.queue_shape("input_0_ff_0_ff1"))
    sim.push("input_0_ff_0_ff1", xs)  # 2 inputs into a 1-entry queue: the second waits for the pop
    sim.run(p_microbatch_count=2)
    for x in xs:
        out = sim.pop("ff.output_ff_0_ff2.bias")[0].astype(np.float64)
        h = bf16(x[0]) @ w1 + b1
        ref = (0.5 * h * (1 + np.vectorize(erf)(h / np.sqrt(2)))) @ w2 + b2
        assert out.shape == (128, 1024)
        assert np.corrcoef(out.ravel(), ref.ravel())[0, 1] > 0.9995
        assert np.max(np.abs(out - ref)) < 0.05 * np.max(np.abs(ref))  # bf16 partial sums over 32/128 K-steps
        assert np.mean(np.abs(out - ref)) < 0.02


def test_corpus_module_direct_multi_epoch_numerics():
    sim = Simulator(corpus(MODULE_NETLIST))
    rng = np.random.default_rng(15)
    a1 = rng.normal(0, 0.1, (8,) + sim.queue_shape("act1"))
    a2 = rng.normal(0, 0.1, (8,) + sim.queue_shape("act2"))
    w1 = rng.normal(0, 0.1, sim.queue_shape("direct.weights1"))
    w2 = rng.normal(0, 0.1, sim.queue_shape("direct.weights2"))
    for name, value in (("act1", a1), ("act2", a2), ("direct.weights1", w1), ("direct.weights2", w2)):
        sim.push(name, value)
    sim.run(p_loop_count=2)
    assert sim.executed == [f"fwd_0_{k}_temporal_epoch_{k}" for k in range(4)] * 2
    for i in range(8):
        m2 = a2[i, 0] @ w2[0]
        # Float32 data through 19-bit source registers and HiFi3: ~1e-3 relative
        assert np.max(np.abs(sim.pop("direct.output_add_0")[0] - (a1[i, 0] @ w1[0] + m2))) < 3e-3
        assert np.max(np.abs(sim.pop("direct.output_matmul2")[0] - m2)) < 2e-3


def test_corpus_known_inconsistent_netlists_are_rejected():
    sim = Simulator(REAL + "graph_tests__netlists__netlist_softmax_v1.yaml")
    for n, q in sim.netlist.queues.items():
        if q.host_fed or q.is_ram:
            sim.push(n, np.zeros(q.element_shape))
    with pytest.raises(SimulatorError, match=r"op 'exp' \(exp\) input 0 .*expected \(t, rt, ct\) = \(1, 2, 2\)"):
        sim.run()


# ------------------------------------------------------------------------------------------------------------
# timing
# ------------------------------------------------------------------------------------------------------------

def test_estimate_hand_computed_multiply():
    r = estimate(MUL_YAML)
    assert isinstance(r, PerfReport) and r.device == "e150" and r.clock_hz == 1.2e9
    (op,) = r.ops
    kernel = int(2 * (2 * 261.21061127 + 4 * 54.83754362 * 2))  # t=2, U=2, T=4, Float16_b binary weight 2
    assert op.kernel_cycles == kernel
    dram_in = 8 * 2080 / (8.75 / 2)                         # 8 tiles/core at half the per-core DRAM rate
    pcie_out = 8 * 2080 / (24.0 / 2)                          # host output shared by the 2 writing cores
    assert op.terms["dram_in"] == pytest.approx(dram_in) and op.terms["pcie_out"] == pytest.approx(pcie_out)
    assert op.limiter == "dram_in" and op.limiter_cycles == pytest.approx(dram_in)
    (ep,) = r.epochs
    assert ep.fill_cycles == pytest.approx(dram_in) and ep.epoch_cycles == pytest.approx(2 * dram_in)
    assert r.total_cycles == math.ceil(2 * dram_in) and r.samples == 2
    assert r.samples_per_second == pytest.approx(2 / (r.total_cycles / 1.2e9))
    # on a wormhole device the arch must be allowed by the netlist
    with pytest.raises(SimulatorError, match="not wormhole_b0"):
        estimate(MUL_YAML, "n150")


def test_estimate_program_loops_switches_and_report(tmp_path):
    r = estimate(E2E_YAML, params={"p_loop_count": 3})
    assert r.device == "n150" and [e.graph for e in r.epochs] == ["g0", "g1"]
    assert [e.executions for e in r.epochs] == [3, 3] and r.epoch_switches == 5 and r.samples == 6
    expected = sum(e.epoch_cycles * e.executions for e in r.epochs) + 5 * 50000
    assert r.total_cycles == math.ceil(expected)
    assert r.samples_per_second == pytest.approx(6 / (r.total_cycles / 1e9))
    one = estimate(E2E_YAML)  # missing $p_ params count as 1
    assert one.samples == 2 and one.epoch_switches == 1
    text = r.to_text()
    assert "samples/s" in text and "g0" in text and "g1" in text
    path = tmp_path / "ops.csv"
    r.to_csv(str(path))
    rows = list(csv.DictReader(open(path)))
    assert [row["OP NAME"] for row in rows] == ["ex", "sum"] and rows[0]["LIMITER"] == r.ops[0].limiter


def test_estimate_nested_loops_trace():
    nested = E2E_YAML.split("programs:")[0] + """programs:
  - run:
    - var: {$n: 3}
    - loop: 2
    -   execute: {graph_name: g0, queue_settings: {}}
    -   loop: $n
    -     execute: {graph_name: g1, queue_settings: {}}
    -   endloop
    - endloop
"""
    r = estimate(nested)
    assert [e.executions for e in r.epochs] == [2, 6] and r.epoch_switches == 3 and r.samples == 4


def test_estimate_prologue_and_math_utilization():
    r = estimate(corpus(FF_NETLIST))
    ops = {o.name: o for o in r.ops}
    ff1 = ops["ff_0_ff1"]
    assert ff1.kernel_cycles == 208887
    # weights (not prologue) stream from DRAM every input: 512 tiles per core at half the per-core DRAM rate
    assert ff1.terms["dram_in"] == pytest.approx(512 * 2080 / (8.75 / 2))
    # ... and all 8 buffers of that weight sit in channel 5: the second operand of a 2x8 matmul is read once per
    # grid column and multicast down it, so the channel serves 8 columns' 512 tiles
    assert ff1.terms["dram_channel"] == pytest.approx(8 * 512 * 2080 / 8.75) and ff1.limiter == "dram_channel"
    bias_mm = ops["ff.bert.encoder.layer.0.intermediate.dense.bias_s_brcst_m2_0_0.lc1"]
    assert bias_mm.prologue_bytes_per_core > 0 and "dram_in" not in bias_mm.terms
    (ep,) = r.epochs
    chain = ["ff_0_ff1", "ff_0_ff1.bias", "ff0_gelu", "ff_0_ff2", "ff_0_ff2.bias"]
    # one input crosses the chain: an accumulating matmul hands on its output at the end, the eltwise ops ublock
    # by ublock (their per-input cycles over their output granules); one op of the chain takes the whole input
    netlist = load_netlist(corpus(FF_NETLIST))
    geometry = {op.name: op.geometry for g in netlist.graphs.values() for op in g.ops.values()}
    assert [output_granules(geometry[n]) for n in chain] == [1, 32, 32, 1, 128]   # t x mblock ublocks
    latency = [ops[n].limiter_cycles / output_granules(geometry[n]) for n in chain]
    whole = max(ops[n].limiter_cycles - lat for n, lat in zip(chain, latency))
    assert ep.fill_cycles == pytest.approx(sum(latency) + whole)
    assert ep.prologue_cycles > 0
    assert ep.epoch_cycles == pytest.approx(ep.fill_cycles + ep.prologue_cycles)
    ideal = 2 * 16 * 32 * 3 * 32  # tile MACs x fidelity x 32 cycles (grayskull)
    assert ff1.math_utilization == pytest.approx(ideal / ep.pipeline_cycles)
    assert 0 < ep.math_utilization < 1
    assert Simulator(corpus(FF_NETLIST)).estimate(p_microbatch_count=4).samples == 4


@pytest.mark.parametrize("path", sorted(glob.glob(REAL + "*.yaml")), ids=os.path.basename)
def test_estimate_runs_on_every_corpus_netlist(path):
    r = estimate(corpus(path))
    assert r.epochs and r.total_cycles > 0 and r.samples > 0 and r.samples_per_second > 0
    assert all(o.limiter in LIMITERS for o in r.ops)


def test_estimate_loop_count_modified_in_body():
    prog = E2E_YAML.split("programs:")[0] + """programs:
  - run:
    - var: {$n: 1}
    - loop: 3
    -   loop: $n
    -     execute: {graph_name: g0, queue_settings: {}}
    -   endloop
    -   varinst: [$n, inc, 1]
    - endloop
"""
    r = estimate(prog)
    assert [e.executions for e in r.epochs] == [1 + 2 + 3] and r.epoch_switches == 0 and r.samples == 12


def test_estimate_counts_data_parallel_replicas():
    nl = corpus(REAL + "graph_tests__netlists__netlist_encoder_data_parallel.yaml")
    (graph,) = nl.graphs.values()
    assert graph.replicas == 2
    r = estimate(nl)
    assert r.samples == graph.input_count * 2 * r.epochs[0].executions


# ------------------------------------------------------------------------------------------------------------
# op types added for issue 4: splice, embedding, tilizer, depthwise, fused_op, unpad, sparse encoding,
# fused gelu; batched execution equals input-by-input execution
# ------------------------------------------------------------------------------------------------------------

def _q(t, mblock, ublock, df="Float32", grid=(1, 1), input="HOST", type="queue", entries=1, **extra):
    q = {"input": input, "type": type, "entries": entries, "grid_size": list(grid), "t": t, "mblock": list(mblock),
         "ublock": list(ublock), "df": df, "target_device": 0, "loc": "dram",
         "dram": [[0, 0x1000 * k] for k in range(grid[0] * grid[1])]}
    q.update(extra)
    return q


def _op(type, inputs, t, mblock, ublock, grid=(1, 1), df="Float32", acc="Float32", fidelity="HiFi4", in_df=None,
        **extra):
    o = {"type": type, "grid_loc": [0, 0], "grid_size": list(grid), "inputs": list(inputs),
         "in_df": in_df or [df] * len(inputs), "out_df": df, "intermed_df": df, "acc_df": acc,
         "math_fidelity": fidelity, "t": t, "mblock": list(mblock), "ublock": list(ublock), "buf_size_mb": 2,
         "ublock_order": extra.pop("ublock_order", "r")}
    o.update(extra)
    return o


def _net(queues, ops, *, input_count=1, fused_ops=None, arch="wormhole_b0"):
    settings = {}
    for name, q in queues.items():
        if q["input"] != "HOST":
            continue
        if q["type"] == "ram":
            settings[name] = {"prologue": False, "epilogue": False, "zero": False, "rd_ptr_global": "$z",
                              "wr_ptr_global": "$z"}
        else:
            settings[name] = {"prologue": False, "epilogue": False, "zero": False, "rd_ptr_local": "$z",
                              "rd_ptr_global": "$z"}
    net = {"devices": {"arch": arch}, "queues": queues,
           "graphs": {"g": {"target_device": 0, "input_count": input_count, **ops}},
           "programs": [{"p": [{"var": {"$z": 0}}, {"execute": {"graph_name": "g", "queue_settings": settings}}]}]}
    if fused_ops is not None:
        net["fused_ops"] = fused_ops
    return net


def _tiles_rows(x, rows):
    """Tile rows of a (R, C) array by tile-row index list."""
    return np.concatenate([x[32 * r:32 * (r + 1)] for r in rows], axis=0)


def test_splice_ublock_select_and_t_granularity():
    rng = np.random.default_rng(40)
    a, b = rng.uniform(-1, 1, (1, 128, 32)).astype(np.float32), rng.uniform(-1, 1, (1, 64, 32)).astype(np.float32)
    # concatenation per core: grid [2, 1], each core takes its 2 rows of a then its row of b
    net = _net({"a": _q(1, (4, 1), (1, 1)), "b": _q(1, (2, 1), (1, 1)),
                "out": _q(1, (3, 1), (1, 1), grid=(2, 1), input="sp")},
               {"sp": _op("splice", ["a", "b"], 1, (3, 1), (1, 1), grid=(2, 1),
                          attributes={"input0": [0, 2, 2], "input1": [0, 1, 1]})})
    sim = Simulator(net)
    sim.push("a", a)
    sim.push("b", b)
    sim.run()
    want = np.concatenate([_tiles_rows(a[0], [0, 1]), _tiles_rows(b[0], [0]),
                           _tiles_rows(a[0], [2, 3]), _tiles_rows(b[0], [1])])
    assert np.array_equal(sim.pop("out")[0], want)
    # strided select: [index 1, length 1, stride 1] keeps units 1 and 3; ublock order c over 2x2-tile ublocks
    x = rng.uniform(-1, 1, (1, 128, 64)).astype(np.float32)
    net = _net({"x": _q(1, (2, 1), (2, 2)), "out": _q(1, (1, 1), (2, 2), input="sel")},
               {"sel": _op("splice", ["x"], 1, (1, 1), (2, 2), attributes={"input0": [1, 1, 1]})})
    sim = Simulator(net)
    sim.push("x", x)
    sim.run()
    assert np.array_equal(sim.pop("out")[0], x[0, 64:])
    # granularity t
    p, q = rng.uniform(-1, 1, (2, 32, 32)).astype(np.float32), rng.uniform(-1, 1, (1, 32, 32)).astype(np.float32)
    net = _net({"p": _q(2, (1, 1), (1, 1)), "q": _q(1, (1, 1), (1, 1)), "out": _q(3, (1, 1), (1, 1), input="st")},
               {"st": _op("splice", ["p", "q"], 3, (1, 1), (1, 1),
                          attributes={"granularity": "t", "input0": [0, 2, 2], "input1": [0, 1, 1]})})
    sim = Simulator(net)
    sim.push("p", p)
    sim.push("q", q)
    sim.run()
    assert np.array_equal(sim.pop("out"), np.concatenate([p, q]))
    bad = _net({"x": _q(1, (4, 1), (1, 1)), "out": _q(1, (2, 1), (1, 1), input="s")},
               {"s": _op("splice", ["x"], 1, (2, 1), (1, 1), attributes={"input0": [0, 1, 3]})})
    sim = Simulator(bad)
    sim.push("x", np.zeros((1, 128, 32)))
    with pytest.raises(SimulatorError, match=r"op 's': splice consumes"):
        sim.run()


def test_embedding_and_tilizer():
    rng = np.random.default_rng(41)
    table = bf16(rng.uniform(-1, 1, (1, 96, 64)))
    idx = np.zeros((1, 32, 32))
    idx[0, 0] = rng.integers(0, 96, 32)
    idx[0, 0, 5] = 0xFFFFFFFF  # invalid index: zero row
    net = _net({"table": _q(1, (3, 2), (1, 1), df="Float16_b", type="ram", layout="flat"),
                "idx": _q(1, (1, 1), (1, 1), df="RawUInt32"),
                "out": _q(1, (1, 2), (1, 1), df="Float16_b", input="emb")},
               {"emb": _op("embedding", ["table", "idx"], 1, (1, 2), (1, 1), df="Float16_b",
                           in_df=["Float16_b", "RawUInt32"], acc="Float16_b", attributes={"num_indices": 32})})
    sim = Simulator(net)
    sim.push("table", table)
    sim.push("idx", idx)
    sim.run()
    want = table[0][np.where(idx[0, 0] == 0xFFFFFFFF, 0, idx[0, 0]).astype(int)]
    want[5] = 0
    assert np.array_equal(sim.pop("out")[0], want)
    # tilizer: flat-layout input, values unchanged up to the output format
    x = rng.uniform(-1, 1, (1, 64, 96))
    net = _net({"x": _q(1, (2, 3), (1, 1), df="Float16_b", layout="flat"),
                "out": _q(1, (2, 3), (1, 1), df="Bfp8_b", input="tz")},
               {"tz": _op("tilizer", ["x"], 1, (2, 3), (1, 1), df="Bfp8_b", in_df=["Float16_b"], acc="Float16_b")})
    sim = Simulator(net)
    sim.push("x", x)
    sim.run()
    assert np.array_equal(sim.pop("out"), quantize(bf16(x), "Bfp8_b"))


def test_depthwise_matmul():
    rng = np.random.default_rng(42)
    a = rng.integers(-15, 16, (1, 32, 128)) / 8.0  # m_k = 2 blocks of CT = 2 tiles
    w = rng.integers(-15, 16, (1, 64, 64)) / 8.0
    net = _net({"a": _q(1, (1, 4), (1, 1)), "w": _q(1, (2, 2), (1, 1), type="ram"),
                "out": _q(1, (1, 2), (1, 1), input="dw")},
               {"dw": _op("depthwise", ["a", "w"], 1, (1, 2), (1, 1), attributes={"m_k": 2, "u_kt": 1})})
    sim = Simulator(net)
    sim.push("a", a)
    sim.push("w", w)
    sim.run()
    want = np.zeros((32, 64))
    for c in range(2):
        for k in range(2):
            want[:, 32 * c:32 * (c + 1)] += a[0, :, 32 * (2 * k + c):32 * (2 * k + c + 1)] @ \
                w[0, 32 * k:32 * (k + 1), 32 * c:32 * (c + 1)]
    assert np.array_equal(sim.pop("out")[0], want)


def test_fused_op_dest_intermediates_tile_broadcast_and_core_split():
    rng = np.random.default_rng(43)
    x, y, bias = (rng.integers(-7, 8, (1, 64, 64)) / 4.0 for _ in range(3))
    w = rng.integers(-7, 8, (1, 64, 32)) / 4.0
    s = rng.integers(1, 8, (1, 64, 32)) / 4.0
    fused = {0: {"inputs": 5, "intermediates": 2, "schedules": [
        [{"mul": {"type": "multiply", "inputs": ["input0", "input1"], "mblock": [1, 1], "ublock": [1, 2],
                  "output": "dest"}},
         {"add": {"type": "add", "inputs": ["dest", "input2"], "input_1_tms": [{"tile_broadcast": "r"}],
                  "mblock": [1, 1], "ublock": [1, 2], "output": "intermed0"}}],
        [{"mm": {"type": "matmul", "inputs": ["intermed0", "input3"], "attributes": {"m_k": 1, "u_kt": 2},
                 "pop": ["intermed0"], "mblock": [1, 1], "ublock": [1, 1], "output": "intermed1"}},
         {"scale": {"type": "multiply", "inputs": ["intermed1", "input4"], "input_1_tms": [{"tile_broadcast": "c"}],
                    "pop_last": ["intermed1"], "mblock": [1, 1], "ublock": [1, 1], "output": "output"}}]]}}
    net = _net({"x": _q(1, (2, 2), (1, 1)), "y": _q(1, (2, 2), (1, 1)), "b": _q(1, (2, 2), (1, 1)),
                "w": _q(1, (2, 1), (1, 1), type="ram"), "s": _q(1, (2, 1), (1, 1)),
                "out": _q(1, (2, 1), (1, 1), input="f")},
               {"f": _op("fused_op", ["x", "y", "b", "w", "s"], 1, (1, 1), (1, 1), grid=(2, 1),
                         attributes={"fused_op_id": 0})}, fused_ops=fused)
    sim = Simulator(net)
    for name, v in (("x", x), ("y", y), ("b", bias), ("w", w), ("s", s)):
        sim.push(name, v)
    sim.run()
    row0 = np.repeat(bias[0].reshape(2, 32, 64)[:, :1, :], 32, axis=1).reshape(64, 64)  # tile_broadcast r
    col0 = np.repeat(s[0].reshape(64, 1, 32)[:, :, :1], 32, axis=2).reshape(64, 32)     # tile_broadcast c
    mm = (x[0] * y[0] + row0) @ w[0]  # each core: its 32 rows, all of K, the whole input 3
    # the matmul result (Float32 intermediate) is the multiply's srcA operand: HiFi4 uses 9 of its fraction bits
    mm = (mm.astype(np.float32).view(np.uint32) & np.uint32(0xFFFFC000)).view(np.float32)
    want = mm * col0
    assert np.array_equal(sim.pop("out")[0], want)
    # grid [1, 2]: a matmul sub-op's input 1 is split by grid columns, input 0 only by rows
    fused = {"mm": {"inputs": 2, "intermediates": 0, "schedules": [[
        {"m": {"type": "matmul", "inputs": ["input0", "input1"], "attributes": {"m_k": 2, "u_kt": 1},
               "mblock": [1, 1], "ublock": [1, 1], "output": "output"}}]]}}
    net = _net({"a": _q(1, (1, 2), (1, 1)), "w": _q(1, (2, 2), (1, 1), type="ram"),
                "out": _q(1, (1, 2), (1, 1), input="f")},
               {"f": _op("fused_op", ["a", "w"], 1, (1, 1), (1, 1), grid=(1, 2), attributes={"fused_op_id": "mm"})},
               fused_ops=fused)
    sim = Simulator(net)
    sim.push("a", x[:, :32])
    sim.push("w", y)
    sim.run()
    assert np.array_equal(sim.pop("out")[0], x[0, :32] @ y[0])


def test_input_unpad_and_matmul_fused_gelu():
    rng = np.random.default_rng(44)
    x = rng.uniform(-1, 1, (1, 64, 96)).astype(np.float32)
    net = _net({"x": _q(1, (2, 3), (1, 1)), "out": _q(1, (1, 2), (1, 1), input="n")},
               {"n": _op("nop", ["x"], 1, (1, 2), (1, 1), input_0_unpad={"rt": 1, "ct": 1})})
    sim = Simulator(net)
    sim.push("x", x)
    sim.run()
    assert np.array_equal(sim.pop("out")[0], x[0, :32, :64])
    from math import erf
    a = rng.integers(-7, 8, (1, 32, 64)) / 8.0
    w = rng.integers(-7, 8, (1, 64, 32)) / 8.0
    net = _net({"a": _q(1, (1, 2), (1, 1)), "w": _q(1, (2, 1), (1, 1), type="ram"),
                "out": _q(1, (1, 1), (1, 1), input="mm")},
               {"mm": _op("matmul", ["a", "w"], 1, (1, 1), (1, 1), attributes={"m_k": 1, "u_kt": 2, "sfpu_op": "gelu"})})
    sim = Simulator(net)
    sim.push("a", a)
    sim.push("w", w)
    sim.run()
    h = a[0] @ w[0]
    want = 0.5 * h * (1 + np.vectorize(erf)(h / np.sqrt(2)))
    assert np.max(np.abs(sim.pop("out")[0] - want)) < 1e-6


def test_sparse_encoding_round_trip():
    from pybuda.backend_sim.kernels.sparse import decode, encode
    rng = np.random.default_rng(45)
    for t, outer_r, inner_r, u_kt, k_tiles, density in ((2, 2, 2, 2, 8, 0.4), (1, 4, 1, 3, 12, 0.9), (3, 1, 1, 1, 4, 0)):
        entries = {(b, r, k): int(rng.integers(0, 64)) for b in range(t) for r in range(outer_r * inner_r)
                   for k in range(k_tiles) if rng.random() < density}
        words = encode(entries, t=t, outer_r=outer_r, inner_r=inner_r, u_kt=u_kt, ptr_bits=8)
        assert len(words) % 1024 == 0 and words.max() < 2 ** 32
        got = decode(words, ptr_bits=8, ublock_bits=8, u_kt=u_kt, d_bits=max(1, (u_kt - 1).bit_length()),
                     inner_r=inner_r, outer_r=outer_r, t=t)
        assert sorted(got) == sorted((b, r, k, s) for (b, r, k), s in entries.items())
    # a long stream spills into a second encoding tile (last_strip_in_tile)
    entries = {(b, r, k): 1 for b in range(4) for r in range(8) for k in range(40)}
    words = encode(entries, t=4, outer_r=8, inner_r=1, u_kt=1, ptr_bits=4)
    assert len(words) > 1024
    got = decode(words, ptr_bits=4, ublock_bits=4, u_kt=1, d_bits=1, inner_r=1, outer_r=8, t=4)
    assert sorted(got) == sorted((b, r, k, 1) for (b, r, k) in entries)
    with pytest.raises(SimulatorError, match="encoding ends"):
        decode(np.zeros(3), ptr_bits=4, ublock_bits=4, u_kt=1, d_bits=1, inner_r=1, outer_r=1, t=1)


def test_sparse_matmul_two_grid_rows_and_t():
    from pybuda.backend_sim.kernels.sparse import encode
    rng = np.random.default_rng(46)
    op_attrs = {"identity": True, "m_k": 2, "u_kt": 2, "num_sparse_tiles": 3, "num_index_tiles": 1,
                "sparse_tile_ptr_bits": 5, "act_t": 1}   # activations read whole (t 1) by every t-slice
    net = _net({"sp": _q(1, (1, 3), (1, 1), grid=(2, 1), type="ram"), "act": _q(1, (4, 2), (1, 1)),
                "enc": _q(1, (1, 1), (1, 1), df="RawUInt32", grid=(2, 1), type="ram"),
                "out": _q(2, (1, 2), (2, 1), grid=(2, 1), input="smm")},
               {"smm": _op("matmul", ["sp", "act", "enc"], 2, (1, 2), (2, 1), grid=(2, 1),
                           in_df=["Float32", "Float32", "RawUInt32"], attributes=op_attrs)})
    sim = Simulator(net)
    tiles = rng.integers(-3, 4, (2, 3, 32, 32)) / 4.0
    act = rng.integers(-7, 8, (1, 128, 64)) / 8.0
    sparse = np.zeros((1, 64, 96))
    enc = np.zeros((1, 64, 32))
    want = np.zeros((2, 128, 64))
    for r in range(2):
        entries = {(b, o, k): int(rng.integers(0, 3)) for b in range(2) for o in range(2) for k in range(4)
                   if rng.random() < 0.5}
        enc[0, 32 * r:32 * (r + 1)] = encode(entries, t=2, outer_r=1, inner_r=2, u_kt=2, ptr_bits=5).reshape(32, 32)
        for s in range(3):
            sparse[0, 32 * r:32 * (r + 1), 32 * s:32 * (s + 1)] = tiles[r, s]
        for (b, o, k), s in entries.items():
            want[b, 64 * r + 32 * o:64 * r + 32 * (o + 1)] += tiles[r, s] @ act[0, 32 * k:32 * (k + 1)]
    sim.push("sp", sparse)
    sim.push("enc", enc)
    sim.push("act", act)
    sim.run()
    assert np.array_equal(sim.pop("out"), want)


@pytest.mark.parametrize("name", ["graph_tests__netlists__netlist_fused_layernorm_reduce.yaml",
                                  "graph_tests__netlists__netlist_module_direct_1x1.yaml",
                                  "graph_tests__netlists__netlist_encoder_x2.yaml"])
def test_batched_execution_equals_input_by_input(name):
    from pybuda.backend_sim.stimulus import default_params, fill_random, output_queues
    outs = []
    for chunk in (1, 1 << 30):  # one input at a time, then a whole execute at once
        sim = Simulator(corpus(REAL + name), chunk_elements=chunk)
        fill_random(sim, 3)
        for prog in sim.netlist.programs:
            sim.run(prog.name, **default_params(sim.netlist, prog.name))
        got = {}
        for q in output_queues(sim.netlist):
            got[q] = []
            while sim.occupancy(q):
                got[q].append(sim.pop(q))
        outs.append(got)
    assert outs[0].keys() == outs[1].keys() and outs[0]
    for q in outs[0]:
        assert len(outs[0][q]) == len(outs[1][q]) > 0
        for a, b in zip(outs[0][q], outs[1][q]):
            assert np.array_equal(a, b, equal_nan=True)


def test_sparse_matmul_huge_sparse_left_is_computed_per_entry():
    """A picker-like identity matmul whose dense left matrix would be 4 GiB (1024 x 1024 tiles of float32) but
    holds ~3000 tiles: the kernel works per encoded tile (small memory, seconds), exact against a float64
    entry-by-entry reference, for two inputs of a microbatch at once."""
    import tracemalloc

    from pybuda.backend_sim.kernels.sparse import encode
    rng = np.random.default_rng(47)
    outer_r, inner_r, u_kt, k_tiles, n_sparse, cols = 256, 4, 4, 1024, 40, 64
    rows_core = outer_r * inner_r
    assert rows_core * k_tiles * 32 * 32 * 4 >= 2 ** 31  # bytes of the dense float32 left matrix
    entries = {}
    for _ in range(3000):
        entries[(0, int(rng.integers(0, rows_core)), int(rng.integers(0, k_tiles)))] = int(rng.integers(0, n_sparse))
    words = encode(entries, t=1, outer_r=outer_r, inner_r=inner_r, u_kt=u_kt, ptr_bits=8)
    enc_tiles = len(words) // 1024
    op_attrs = {"identity": True, "m_k": k_tiles // u_kt, "u_kt": u_kt, "num_sparse_tiles": n_sparse,
                "num_index_tiles": enc_tiles, "sparse_tile_ptr_bits": 8}
    net = _net({"sp": _q(1, (1, n_sparse), (1, 1), type="ram"), "act": _q(1, (k_tiles, 2), (1, 1), entries=2),
                "enc": _q(1, (enc_tiles, 1), (1, 1), df="RawUInt32", type="ram"),
                "out": _q(1, (outer_r, 2), (inner_r, 1), input="smm", entries=2)},
               {"smm": _op("matmul", ["sp", "act", "enc"], 1, (outer_r, 2), (inner_r, 1),
                           in_df=["Float32", "Float32", "RawUInt32"], attributes=op_attrs)}, input_count=2)
    sim = Simulator(net)
    tiles = rng.integers(-7, 8, (n_sparse, 32, 32)) / 8.0  # dyadic: every product and sum is exact in float32
    act = rng.integers(-7, 8, (2, k_tiles * 32, cols)) / 8.0
    sim.push("sp", np.concatenate(list(tiles), axis=1)[None])
    sim.push("enc", words.reshape(1, enc_tiles * 32, 32))
    sim.push("act", act[:, None])
    tracemalloc.start()  # numpy allocations (a dense left matrix would be one) are traced
    try:
        sim.run()
        peak_mb = tracemalloc.get_traced_memory()[1] / 2**20
    finally:
        tracemalloc.stop()
    got = [sim.pop("out") for _ in range(2)]
    assert peak_mb < 512, f"the kernel allocated {peak_mb:.0f} MB at its peak"
    for i in range(2):
        want = np.zeros((1, rows_core * 32, cols))
        for (b, o, k), s in entries.items():
            want[b, o * 32:(o + 1) * 32] += tiles[s] @ act[i, k * 32:(k + 1) * 32]
        assert np.abs(want).max() > 0
        assert np.array_equal(got[i], want)


DUAL_VIEW_YAML = """
devices: {arch: grayskull}
queues:
  x:       {input: HOST, type: queue, entries: 1, grid_size: [1, 1], t: 1, mblock: [1, 1], ublock: [1, 1], df: Float16_b, target_device: 0, loc: dram, dram: [[0, 0x0]]}
  cache:   {input: HOST, type: ram, entries: 1, grid_size: [1, 1], t: 4, mblock: [1, 1], ublock: [1, 1], df: Float16_b, target_device: 0, loc: dram, dram: [[1, 0x0]]}
  cache_w: {input: write, type: ram, alias: cache, entries: 4, grid_size: [1, 1], t: 1, mblock: [1, 1], ublock: [1, 1], df: Float16_b, target_device: 0, loc: dram, dram: [[1, 0x0]]}
  out:     {input: read, type: queue, entries: 1, grid_size: [1, 1], t: 1, mblock: [4, 1], ublock: [1, 1], df: Float16_b, target_device: 0, loc: host, host: [0x0]}
graphs:
  g:
    target_device: 0
    input_count: 1
    read: {type: nop, grid_loc: [0, 0], grid_size: [1, 1], inputs: [cache], in_df: [Float16_b], out_df: Float16_b, intermed_df: Float16_b, acc_df: Float16_b,
           math_fidelity: HiFi4, t: 1, mblock: [4, 1], ublock: [1, 1], buf_size_mb: 2, ublock_order: r, input_0_tms: [vstack: 4]}
    write: {type: nop, grid_loc: [0, 1], grid_size: [1, 1], inputs: [x], in_df: [Float16_b], out_df: Float16_b, intermed_df: Float16_b, acc_df: Float16_b,
           math_fidelity: HiFi4, t: 1, mblock: [1, 1], ublock: [1, 1], buf_size_mb: 2, ublock_order: r}
programs:
  - p:
    - param: [$p_cache_write_index]
    - var: {$c_zero: 0, $v_write: 0, $c_one: 1}
    - staticvar: {$ptr: 0}
    - varinst: [$v_write, set, $p_cache_write_index]
    - execute: {graph_name: g, queue_settings: {
        x: {prologue: false, epilogue: false, zero: false, rd_ptr_local: $ptr, rd_ptr_global: $ptr},
        cache: {prologue: false, epilogue: false, zero: false, read_only: true, rd_ptr_global: $c_zero, wr_ptr_global: $c_zero},
        cache_w: {prologue: false, epilogue: false, zero: false, rd_ptr_global: $c_zero, wr_ptr_global: $v_write}}}
    - varinst: [$ptr, incwrap, $c_one, 2]
"""


def test_a_ram_aliasing_another_is_a_second_view_of_its_entries():
    """The backend's dual-view IO: `cache` (1 entry of t 4) and `cache_w` (4 entries of t 1, `alias: cache`) hold
    the same four slices; the op writes one page at the program's `$p_cache_write_index`, after `read` read all."""
    sim = Simulator(DUAL_VIEW_YAML)
    assert check(load_netlist(DUAL_VIEW_YAML), device=None) == []
    rng = np.random.default_rng(0)
    cache = rng.standard_normal((4, 32, 32)).astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)
    sim.push("cache", cache)
    for page in (2, 0):
        x = rng.standard_normal((1, 32, 32)).astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)
        sim.push("x", x)
        sim.run(p_cache_write_index=page)
        assert np.array_equal(sim.pop("out")[0], cache.reshape(128, 32))    # read before the write
        cache[page] = x[0]
        assert np.array_equal(sim.peek("cache", 0), cache) and np.array_equal(sim.peek("cache_w", page)[0], x[0])
