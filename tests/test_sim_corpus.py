"""Backend simulator on the real netlist corpus (tests/corpus.py, issue 4).

- numeric results of corpus netlists of different kinds against independent numpy references written here
  (float64 math on the stored input values; no simulator kernel is called), with the tolerance each test states;
- `estimate` on every corpus netlist; numeric execution with random stimulus on every supported one.
"""
from __future__ import annotations

import functools
import glob
import math
import os

import ml_dtypes
import numpy as np
import pytest

from pybuda.backend_sim import Simulator, SimulatorError, estimate
from pybuda.backend_sim.stimulus import default_params, lowered_constant, run_random
from pybuda.netlist import load as load_netlist

from corpus import REAL  # noqa: E402
G = REAL + "graph_tests__netlists__"
O = REAL + "op_tests__netlists__bh_test_plan_netlists__hlk_functional_tests__"
ALL = sorted(glob.glob(REAL + "*.yaml"))
INCONSISTENT = {"graph_tests__netlists__netlist_softmax_v1.yaml", "graph_tests__netlists__netlist_bert_mha_train.yaml"}


@functools.lru_cache(maxsize=None)
def corpus(path: str):
    return load_netlist(path)


# ------------------------------------------------------------------------------------------------------------
# independent references: rounding helpers and comparisons (no pybuda code)
# ------------------------------------------------------------------------------------------------------------

def bf16(x):
    return np.asarray(x, dtype=np.float32).astype(ml_dtypes.bfloat16).astype(np.float64)


def fp16(x):
    return np.asarray(x, dtype=np.float32).astype(np.float16).astype(np.float64)


def bfp8(x, family="b"):
    """Block float with 7-bit magnitudes: 16 consecutive row values share the exponent of their maximum."""
    x = np.asarray(x, dtype=np.float64)
    blocks = x.reshape(-1, 16)
    mx = np.abs(blocks).max(axis=1, keepdims=True)
    e = np.floor(np.log2(np.where(mx > 0, mx, 1.0)))
    if family == "a":
        e = np.clip(e, -15, 16)
    step = 2.0 ** (e - 6)
    return (np.clip(np.round(blocks / step), -127, 127) * step).reshape(x.shape)


def gelu(x):
    return 0.5 * x * (1.0 + np.vectorize(math.erf)(x / math.sqrt(2.0)))


def bias_tile(vec, rows=32):
    """A bias vector repeated on every row of a tile row."""
    return np.broadcast_to(np.asarray(vec)[None, :], (rows, len(vec))).copy()


def check(out, ref, rel, corr=0.999):
    """max |out - ref| <= rel * max |ref| and Pearson correlation >= corr; returns the relative error."""
    out = np.asarray(out, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    assert out.shape == ref.shape, (out.shape, ref.shape)
    assert np.all(np.isfinite(out))
    err = float(np.abs(out - ref).max())
    scale = float(np.abs(ref).max())
    assert err <= rel * scale, f"max error {err:.4g} > {rel} x max|ref| {scale:.4g}"
    if corr and ref.std() > 0:
        assert np.corrcoef(out.ravel(), ref.ravel())[0, 1] >= corr
    return err / scale


def run_all(sim: Simulator, **params):
    for prog in sim.netlist.programs:
        sim.run(prog.name, **default_params(sim.netlist, prog.name, params))


# ------------------------------------------------------------------------------------------------------------
# 1. feedforward: matmul m_k/u_kt + bias trick + gelu (PyBuda, grayskull)
# ------------------------------------------------------------------------------------------------------------

def test_feedforward_bias_gelu():
    sim = Simulator(corpus(G + "pybuda_pregenerated__feedforward__grayskull__ff_1_32_128_netlist.yaml"))
    rng = np.random.default_rng(1)
    p = "ff.bert.encoder.layer.0."
    x = rng.uniform(-1, 1, (1, 32, 128))
    w1 = rng.normal(0, 0.06, (1, 128, 512))
    w2 = rng.normal(0, 0.04, (1, 512, 128))
    b1 = rng.uniform(-0.5, 0.5, 512)
    b2 = rng.uniform(-0.5, 0.5, 128)
    ones_col = np.zeros((1, 32, 32))
    ones_col[0, :, 0] = 1.0  # constant: a ones column picks row 0 of the bias tile for every row
    bias1 = np.zeros((1, 32, 512))
    bias1[0, 0] = b1
    bias2 = np.zeros((1, 32, 128))
    bias2[0, 0] = b2
    sim.push("input_0_ff_0_ff1", x)
    sim.push(p + "intermediate.dense.weight", w1)
    sim.push(p + "output.dense.weight", w2)
    sim.push(p + "intermediate.dense.bias", bias1)
    sim.push(p + "output.dense.bias", bias2)
    sim.push("lc.input_tensor." + p + "output.dense.bias_s_brcst_m2_0_0.0", ones_col)
    sim.push("lc.input_tensor." + p + "intermediate.dense.bias_s_brcst_m2_0_0.0", ones_col)
    sim.run(p_microbatch_count=1)
    out = sim.pop("ff.output_ff_0_ff2.bias")[0]
    ref = gelu(bf16(x[0]) @ bf16(w1[0]) + bf16(b1)) @ bf16(w2[0]) + bf16(b2)
    check(out, ref, rel=0.03)  # HiFi3 on bf16, bf16 partials over 2 + 8 K-steps, bf16 gelu input/output


# ------------------------------------------------------------------------------------------------------------
# 2. multi-head attention: hslice / transpose / hstack / broadcast r, c, z; softmax by exp, matmul, reciprocal
# ------------------------------------------------------------------------------------------------------------

def test_bert_mha_tms():
    sim = Simulator(corpus(G + "netlist_bert_mha.yaml"))
    rng = np.random.default_rng(2)
    p = "mha.bert.encoder.layer.0.attention."
    x = rng.uniform(-1, 1, (1, 128, 128))
    mask = rng.uniform(-1, 0, (1, 128, 128))
    w = {n: rng.normal(0, 0.1, (1, 128, 128)) for n in ("query", "key", "value", "output")}
    b = {n: rng.uniform(-0.2, 0.2, 128) for n in w}
    sim.push("input_0_mha_0_value", x)
    sim.push("input_1_mha_0_as_mask", mask)
    for n in ("query", "key", "value"):
        sim.push(p + f"self.{n}.weight", w[n])
        sim.push(p + f"self.{n}.bias", bias_tile(b[n])[None])
    sim.push(p + "output.dense.weight", w["output"])
    sim.push(p + "output.dense.bias", bias_tile(b["output"])[None])
    scale = 1 / math.sqrt(32)
    sim.push("mha.reciprocal_of_sqrt_of_head_size_0", np.full((1, 32, 32), scale))
    sim.push("lc.input_tensor.mha_0_as_softmax_sum.0", np.ones((1, 32, 32)))
    run_all(sim)
    out = sim.pop("mha.output_mha_0_output.bias")[0]

    xb = bf16(x[0])
    q, k, v = (xb @ bf16(w[n][0]) + bf16(b[n]) for n in ("query", "key", "value"))
    heads = lambda m: m.reshape(128, 4, 32).transpose(1, 0, 2)  # hslice 4
    scores = heads(q) @ heads(k).transpose(0, 2, 1) * bf16(scale) + bf16(mask[0])
    e = np.exp(scores)
    probs = e / e.sum(axis=-1, keepdims=True)
    ctx = (probs @ heads(v)).transpose(1, 0, 2).reshape(128, 128)  # hstack 4
    ref = ctx @ bf16(w["output"][0]) + bf16(b["output"])
    check(out, ref, rel=0.03)  # every intermediate rounded to bf16, HiFi3


# ------------------------------------------------------------------------------------------------------------
# 3. softmax on one tile (Float16 dest)
# ------------------------------------------------------------------------------------------------------------

def test_softmax_single_tile():
    sim = Simulator(corpus(G + "netlist_softmax_single_tile.yaml"))
    x = np.random.default_rng(3).uniform(-2, 2, (1, 32, 32))
    sim.push("input_activation", x)
    sim.push("input_constant", np.ones((1, 32, 32)))  # matmul with ones: every column holds the row sum
    run_all(sim)
    out = sim.pop("output_softmax")[0]
    e = np.exp(bf16(x[0]))
    ref = e / e.sum(axis=1, keepdims=True)
    check(out, ref, rel=0.02)  # bf16 values, Float16 dest


# ------------------------------------------------------------------------------------------------------------
# 4. fused layernorm: fused_op with 5 schedules, intermediates, dest, matmul sub-ops, broadcast TMs
# ------------------------------------------------------------------------------------------------------------

def _layernorm(h, gamma, beta, eps):
    mean = h.mean(axis=-1, keepdims=True)
    var = ((h - mean) ** 2).mean(axis=-1, keepdims=True)
    return (h - mean) / np.sqrt(var + eps) * gamma + beta


def test_fused_layernorm_reduce():
    sim = Simulator(corpus(G + "netlist_fused_layernorm_reduce.yaml"))
    rng = np.random.default_rng(4)
    acts = rng.uniform(-1, 1, (2, 1, 64, 64))
    w = rng.normal(0, 0.2, (1, 64, 64))
    gamma, beta, eps = rng.uniform(0.5, 1.5, 64), rng.uniform(-0.5, 0.5, 64), 1e-5
    ln_w = rng.uniform(-9, 9, (1, 32, 64))  # rows 1..31 must not matter
    ln_b = rng.uniform(-9, 9, (1, 32, 64))
    ln_w[0, 0], ln_b[0, 0] = gamma, beta
    ones_col = np.zeros((1, 32, 32))
    ones_col[0, :, 0] = 1.0
    sim.push("act1", acts)
    sim.push("fuse_layernorm_reduce.weights1", w)
    sim.push("fuse_layernorm_reduce.ln_weights", ln_w)
    sim.push("fuse_layernorm_reduce.ln_bias", ln_b)
    for n in ("lc.input_tensor.layernorm.dc.reduce_avg.0.0", "lc.input_tensor.layernorm.dc.reduce_avg.3.0"):
        sim.push(n, np.full((1, 32, 32), 1 / 64))  # every column of x @ c is the row mean
    sim.push("dc.input_tensor.layernorm.4", np.full((1, 64, 32), eps))
    sim.push("lc.input_tensor.layernorm.dc.reciprocal.7_s_brcst_m1_0_0.0", np.eye(32)[None])
    sim.push("lc.input_tensor.fuse_layernorm_reduce.ln_weights_s_brcst_m2_0_0.0", ones_col)
    sim.push("lc.input_tensor.fuse_layernorm_reduce.ln_weights_s_brcst_m2_0_0.0.new", ones_col)
    run_all(sim)
    for a in acts:
        out = sim.pop("fuse_layernorm_reduce.output_layernorm")[0]
        ref = _layernorm(bf16(a[0]) @ bf16(w[0]), bf16(gamma), bf16(beta), eps)
        check(out, ref, rel=0.04)  # normalised values of order 1, ~10 bf16 roundings


# ------------------------------------------------------------------------------------------------------------
# 5. reduce max over c and r
# ------------------------------------------------------------------------------------------------------------

def test_reduce_max_c_and_r():
    sim = Simulator(corpus(O + "netlist_reduce_c_dim.yaml"))
    x = np.random.default_rng(5).uniform(-4, 4, (1, 128, 256))
    sim.push("input_0_max0", x)
    run_all(sim)
    out = sim.pop("ModuleBuilder.simple_max.output_max0")[0]
    ref = np.zeros((128, 32))
    ref[:, 0] = fp16(x[0]).max(axis=1)
    assert np.array_equal(out, ref)  # exact: Float16 values through 10-bit source registers

    sim = Simulator(corpus(O + "netlist_reduce_r_dim.yaml"))
    (qin,) = [n for n, q in sim.netlist.queues.items() if q.host_fed]
    (qout,) = [n for n, q in sim.netlist.queues.items() if not q.host_fed]
    x = np.random.default_rng(6).uniform(-4, 4, (1,) + sim.queue_shape(qin)[1:])
    sim.push(qin, x)
    run_all(sim)
    out = sim.pop(qout)[0]
    df = sim.netlist.queues[qin].df.value
    stored = fp16(x[0]) if df == "Float16" else bf16(x[0])
    ref = np.zeros((32, x.shape[2]))
    ref[0] = stored.max(axis=0)
    assert np.array_equal(out, ref)


# ------------------------------------------------------------------------------------------------------------
# 6. training step: fwd / bwd (gradient_op accumulators, zero, e2e queue) / optimizer programs
# ------------------------------------------------------------------------------------------------------------

def test_training_step():
    sim = Simulator(corpus(G + "netlist_train.yaml"))
    rng = np.random.default_rng(7)
    x1, x2 = rng.uniform(0.1, 1, (1, 64, 64)), rng.uniform(0, 1, (1, 64, 64))
    w1, w2 = rng.uniform(0, 0.1, (1, 64, 64)), rng.uniform(-0.1, 0.1, (1, 64, 64))
    loss_grad = rng.uniform(-1, 1, (1, 64, 64))
    lr = 0.01
    sim.push("input_0_matmul1", x1)
    sim.push("input_0_matmul2", x2)
    sim.push("ff.verify_module.weights1", w1)
    sim.push("ff.verify_module.weights2", w2)
    sim.push("loss_verify_module.output_add", loss_grad)
    sim.push("input_constant_sqrt_1", np.full((1, 32, 32), 0.5))
    sim.push("input_opt_verify_module.weights1_0.lr", np.full((1, 32, 32), lr))
    sim.push("input_opt_verify_module.weights2_0.lr", np.full((1, 32, 32), lr))
    for name in ("grad_acc_verify_module.weights1", "grad_acc_verify_module.weights2"):
        sim.push(name, np.full((1, 64, 64), 7.0))  # stale values: `zero: true` must clear them
    sim.run("run_fwd", p_microbatch_count=1)
    sim.run("run_bwd", p_microbatch_count=1)
    grad1 = sim.peek("grad_acc_verify_module.weights1")[0]
    grad2 = sim.peek("grad_acc_verify_module.weights2")[0]
    sim.run("run_opt")

    X1, X2, W1, W2, L = bf16(x1[0]), bf16(x2[0]), bf16(w1[0]), bf16(w2[0]), bf16(loss_grad[0])
    m1 = X1 @ W1
    s = np.sqrt(m1)
    check(sim.pop("verify_module.output_add")[0], s + X2 @ W2, rel=0.02)
    g_m1 = 0.5 / s * L  # d sqrt(m1) / d m1 times the incoming gradient
    check(sim.pop("output_grad_input_0_matmul1")[0], g_m1 @ W1.T, rel=0.03)
    check(sim.pop("output_grad_input_0_matmul2")[0], L @ W2.T, rel=0.02)
    ref_g1, ref_g2 = X1.T @ g_m1, X2.T @ L
    check(grad1, ref_g1, rel=0.03)
    check(grad2, ref_g2, rel=0.02)
    new_w1 = sim.peek("ff.verify_module.weights1")[0]
    new_w2 = sim.peek("ff.verify_module.weights2")[0]
    check(new_w1, W1 - lr * ref_g1, rel=0.02)
    check(new_w2, W2 - lr * ref_g2, rel=0.02)
    check(new_w1 - W1, -lr * ref_g1, rel=0.1, corr=0.99)  # the update itself, not only the weights


# ------------------------------------------------------------------------------------------------------------
# 7. four temporal epochs, e2e queues, allocate/deallocate, program loop (Float32 data)
# ------------------------------------------------------------------------------------------------------------

def test_module_direct_multi_epoch():
    sim = Simulator(corpus(G + "netlist_module_direct_1x1.yaml"))
    rng = np.random.default_rng(8)
    a1, a2 = rng.normal(0, 1, (8, 1, 32, 32)), rng.normal(0, 1, (8, 1, 32, 32))
    w1, w2 = rng.normal(0, 0.2, (1, 32, 32)), rng.normal(0, 0.2, (1, 32, 32))
    sim.push("act1", a1)
    sim.push("act2", a2)
    sim.push("direct.weights1", w1)
    sim.push("direct.weights2", w2)
    sim.run(p_loop_count=2)
    assert sim.executed == [f"fwd_0_{k}_temporal_epoch_{k}" for k in range(4)] * 2
    for i in range(8):
        m2 = a2[i, 0] @ w2[0]
        # Float32 data through 19-bit source registers and HiFi3 (srcA 9 x srcB 6 + srcA 4 x srcB 4 fraction
        # bits): ~2^-9 relative per product
        check(sim.pop("direct.output_add_0")[0], a1[i, 0] @ w1[0] + m2, rel=5e-3, corr=0.9999)
        check(sim.pop("direct.output_matmul2")[0], m2, rel=5e-3, corr=0.9999)


# ------------------------------------------------------------------------------------------------------------
# 8. Bfp8_b: matmul with a transposed input, Bfp8_b dest, HiFi2, 3 K-steps
# ------------------------------------------------------------------------------------------------------------

def test_bfp8b_matmul_transpose():
    sim = Simulator(corpus(O + "matmul_transpose.yaml"))
    rng = np.random.default_rng(9)
    a = rng.uniform(-1, 1, (1, 64, 192))
    b = rng.uniform(-1, 1, (1, 192, 192))
    sim.push("input0", a)
    sim.push("input1", b)
    run_all(sim)
    out = sim.pop("output")[0]
    # the transpose moves the stored Bfp8_b values (blocks along rows of input1 as pushed)
    ref = bfp8(a[0]) @ bfp8(b[0]).T
    check(out, ref, rel=0.04)  # Bfp8_b partials and output: 2^-7 of each block's maximum per rounding


def test_bfp8b_fused_residual_layernorm():
    """Bfp8_b, LoFi, acc Float16_b, approximate mode: residual add + layernorm in one fused op."""
    sim = Simulator(corpus(G + "netlist_fused_layernorm_reduce_perf.yaml"))
    rng = np.random.default_rng(10)
    h = rng.uniform(-1, 1, (1, 128, 768))
    r = rng.uniform(-1, 1, (1, 128, 768))
    gamma, beta = rng.uniform(0.5, 1.5, 768), rng.uniform(-0.5, 0.5, 768)
    sim.push("matmul_34", h)
    sim.push("hidden_states", r)
    sim.push("layer.0.attention.output.LayerNorm.weight", bias_tile(gamma)[None])
    sim.push("layer.0.attention.output.LayerNorm.bias", bias_tile(beta)[None])
    sim.push("lc.input_tensor.layernorm_39.dc.reduce_avg.0.0", np.full((1, 32, 32), 1 / 768))
    sim.push("lc.input_tensor.layernorm_39.dc.reduce_avg.3.0", np.full((1, 32, 32), 1 / 768))
    sim.push("dc.input_tensor.layernorm_39.4", np.full((1, 128, 32), 1e-5))
    run_all(sim)
    out = sim.pop("fuse_layernorm_reduce.output_layernorm")[0]
    x = bfp8(h[0]) + bfp8(r[0])
    ref = _layernorm(x, bfp8(bias_tile(gamma))[0], bfp8(bias_tile(beta))[0], 1e-5)
    check(out, ref, rel=0.08, corr=0.995)  # Bfp8_b everywhere, LoFi multiplies (srcA 4 fraction bits)


# ------------------------------------------------------------------------------------------------------------
# more op types: sparse (identity) matmul, tiny tiles, int8
# ------------------------------------------------------------------------------------------------------------

def test_sparse_identity_matmul_32x16_tiles():
    from pybuda.backend_sim.kernels.sparse import encode

    path = O + "netlist_matmul_ident_op_with_32x16_tile_size.yaml"
    sim = Simulator(corpus(path))
    op = sim.netlist.ops["op0"]
    rng = np.random.default_rng(11)
    tiles = rng.integers(-1, 2, (5, 32, 32)).astype(np.float64)  # {-1, 0, 1}: exact in Bfp2_b
    pattern = {}  # (t, output tile row, input-1 tile row) -> sparse tile
    for out_row in range(2):
        for k in range(4):
            if rng.random() < 0.6:
                pattern[(0, out_row, k)] = int(rng.integers(0, 5))
    words = encode(pattern, t=1, outer_r=op.mblock[0], inner_r=op.ublock[0], u_kt=op.attrs.u_kt, ptr_bits=10)
    encoding = np.zeros((1, 32, 64))
    encoding.reshape(-1)[:len(words)] = words
    act = rng.integers(-31, 32, (1, 64, 128)) / 16.0  # exact in Bfp8_b and in LoFi's srcA slice
    sim.push("input0_sparse", np.concatenate(list(tiles), axis=1)[None])
    sim.push("input2_encoding", encoding)
    sim.push("input1", act)
    run_all(sim)
    out = sim.pop("output0")[0]
    left = np.zeros((64, 128))
    for (_, r, k), s in pattern.items():
        left[r * 32:(r + 1) * 32, k * 32:(k + 1) * 32] += tiles[s]
    ref = left @ act[0].T  # input 1 is transposed: 16x32 tiles become 32x16
    check(out, ref, rel=0.01)  # Float16 dest, Bfp8_b output


def test_tiny_tile_16x32_matmul():
    sim = Simulator(corpus(O + "netlist_matmul_op_with_16x32_tile_size.yaml"))
    rng = np.random.default_rng(12)
    x = rng.integers(-63, 64, (1, 64, 128)) / 32.0   # 16x32 tiles: 4 x 4 tiles
    w = rng.integers(-15, 16, (1, 128, 32)) / 8.0
    sim.push("input0", x)
    sim.push("input1", w)
    run_all(sim)
    out = sim.pop("output")[0]
    ref = np.zeros((128, 32))
    for i in range(4):  # output tile i = (16 rows of input tile row i, zero padded) @ input 1
        ref[32 * i:32 * i + 16] = bfp8(x[0], "a")[16 * i:16 * i + 16] @ bfp8(w[0], "a")
    check(out, ref, rel=0.02)


def test_tiny_tile_1x32_matmul():
    sim = Simulator(corpus(O + "netlist_matmul_op_with_tiny_tile_size.yaml"))
    rng = np.random.default_rng(13)
    x = rng.integers(-127, 128, (1,) + sim.queue_shape("input0")) / 64.0
    w = rng.integers(-31, 32, (1,) + sim.queue_shape("input1")) / 16.0
    assert x.shape == (1, 5, 16, 1024) and w.shape == (1, 5, 1024, 256)
    sim.push("input0", np.repeat(x, 4, axis=0))
    sim.push("input1", np.repeat(w, 4, axis=0))
    run_all(sim)
    out = sim.pop("output")
    assert out.shape == (5, 16, 256)
    check(out, x[0] @ w[0], rel=0.01)  # Float16 dest and spills over 16 K-steps


def test_int8_matmul_exact():
    sim = Simulator(corpus(O + "matmul_int8.yaml"))
    rng = np.random.default_rng(14)
    a = rng.integers(-1, 2, (1, 128, 256)).astype(np.float64)
    b = rng.integers(-1, 2, (1, 256, 256)).astype(np.float64)
    sim.push("input0", a)
    sim.push("input1", b)
    run_all(sim)
    out = sim.pop("output0")[0]
    assert np.array_equal(out, np.clip(a[0] @ b[0], -127, 127))


# ------------------------------------------------------------------------------------------------------------
# every corpus netlist: estimate, and numerics where supported
# ------------------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", ALL, ids=os.path.basename)
def test_estimate_every_corpus_netlist(path):
    r = estimate(corpus(path))
    assert r.epochs and r.total_cycles > 0 and r.samples_per_second > 0
    rows = r.csv_rows()
    assert len(rows) == len(r.ops) and all(row["OP NAME"] and row["MATH FIDELITY"] for row in rows)
    assert all(o.output is not None and len(o.inputs) == len(corpus(path).ops[o.name].inputs) for o in r.ops)


# Numeric runs of several seconds or more on 2 cores are marked slow (they still run in `make test`). The
# whole-BERT netlists (minutes each, BERT-large ~15 min) run only with PYBUDA_SIM_FULL_CORPUS=1; docs/simulator.md
# lists their measured times.
HEAVY = {
    "graph_tests__netlists__bert_base_inference.yaml", "graph_tests__netlists__bert_base_training.yaml",
    "graph_tests__netlists__bert_base_netlist_qupdate.yaml", "graph_tests__netlists__bert_base_netlist_perf_infra_test.yaml",
    "graph_tests__netlists__bert_base_bfp8_lofi_4chip.yaml", "graph_tests__netlists__netlist_bert_base.yaml",
    "graph_tests__netlists__bert_large_external_queue_update.yaml", "graph_tests__netlists__netlist_fused_bert_encoders.yaml",
    "graph_tests__netlists__bert_encoders_microbatch_loops_training.yaml",    # 75 s: past the suite's budget
}
SLOW = {
    "graph_tests__netlists__netlist_encoder_device_tilize.yaml", "graph_tests__netlists__netlist_fused_layernorm.yaml",
    "graph_tests__netlists__netlist_fused_bert_encoders_base.yaml",
}


def _numeric_params():
    for path in ALL:
        name = os.path.basename(path)
        if name in INCONSISTENT:
            continue
        marks = []
        if name in HEAVY:
            marks = [pytest.mark.slow, pytest.mark.skipif(not os.environ.get("PYBUDA_SIM_FULL_CORPUS"),
                                                          reason="minutes: set PYBUDA_SIM_FULL_CORPUS=1")]
        elif name in SLOW:
            marks = [pytest.mark.slow]
        yield pytest.param(path, id=name, marks=marks)


# netlists whose outputs are not all finite with random stimulus (seed 0), and why (docs/simulator.md)
NONFINITE = {
    "graph_tests__netlists__netlist_bert_mha.yaml": "exp of unscaled random attention scores overflows",
    "graph_tests__netlists__netlist_softmax_single_tile_add_recip.yaml": "reciprocal of a random sum that is 0",
    "graph_tests__netlists__netlist_train.yaml": "sqrt of a negative random matmul output",
    "graph_tests__netlists__bert_encoders_microbatch_loops_training.yaml":
        "backward layernorm gradients of random output gradients overflow (forward outputs are finite)",
}


@pytest.mark.parametrize("path", list(_numeric_params()))
def test_numerics_every_supported_corpus_netlist(path):
    sim, stats = run_random(corpus(path), seed=0)
    assert sim.executed and stats
    for s in stats.values():
        assert s.entries > 0 and s.shape == sim.queue_shape(s.queue)
    nonfinite = sorted(s.queue for s in stats.values() if s.nan or s.inf)
    if os.path.basename(path) in NONFINITE:
        assert nonfinite
    else:
        assert not nonfinite, f"non-finite outputs with random stimulus: {nonfinite}"


def test_lowered_constants_get_the_values_pybuda_pushes():
    avg = lowered_constant("lc.input_tensor.ln.dc.reduce_avg.0.0", (1, 768, 32), operand=1)
    assert np.all(avg == np.float32(1 / 768))
    assert np.all(lowered_constant("lc.input_tensor.sm.dc.reduce_sum.1.0", (12, 32, 128), operand=0) == 1)
    rows = lowered_constant("lc.input_tensor.bias_s_brcst_m2_0_0.0", (1, 128, 32), operand=0)
    assert np.all(rows[..., 0] == 1) and not rows[..., 1:].any()
    cols = lowered_constant("lc.input_tensor.recip_s_brcst_m1_0_0.0", (1, 32, 32), operand=1)
    assert np.all(cols[..., 0, :] == 1) and not cols[..., 1:, :].any()
    assert lowered_constant("constant_1_multiply_17", (1, 32, 32), operand=1) is None
    assert lowered_constant("lc.input_tensor.other.0", (1, 32, 32), operand=1) is None


@pytest.mark.parametrize("name", sorted(INCONSISTENT))
def test_known_inconsistent_netlists_fail_with_a_clear_message(name):
    estimate(corpus(REAL + name))  # the timing model still estimates them
    with pytest.raises(SimulatorError, match=r"op '.*' .*input \d"):
        run_random(corpus(REAL + name))
