"""Data-format model of the backend simulator, beyond tests/test_backend_sim.py: an independent block-float
reference for every Bfp format (both exponent families), known values, idempotence, 32-bit integer exactness,
non-finite values, the executor's "already representable" shortcuts, and round trips through queues (including
tiny tiles)."""
from __future__ import annotations

import numpy as np
import pytest

from pybuda.backend_sim import Simulator, quantize
from pybuda.backend_sim.executor import to_host, to_internal
from pybuda.backend_sim.formats import (exactly_representable, fidelity_product, fraction_bits, quantize_bfp,
                                       storage_dtype, truncate_mantissa)
from pybuda.dataformat import DataFormat

BFP = [("Bfp8", 7, "a"), ("Bfp8_b", 7, "b"), ("Bfp4", 3, "a"), ("Bfp4_b", 3, "b"), ("Bfp2", 1, "a"),
       ("Bfp2_b", 1, "b")]


def reference_bfp(x, bits, family):
    """Straightforward float64 block float: per 16 values, E = floor(log2 max|v|) clipped to the family's
    exponent range, step 2^(E - bits + 1), round half to even, clip to +-(2^bits - 1) steps."""
    x = np.asarray(x, dtype=np.float64)
    out = np.empty_like(x)
    lo, hi = (-15, 16) if family == "a" else (-127, 127)
    flat_in, flat_out = x.reshape(-1, 16), out.reshape(-1, 16)
    for i, block in enumerate(flat_in):
        finite = np.abs(block[np.isfinite(block)])
        mx = min(finite.max() if finite.size else 0.0, float(np.finfo(np.float32).max))
        if np.isinf(block).any():
            mx = float(np.finfo(np.float32).max)
        e = int(np.clip(np.floor(np.log2(mx)) if mx > 0 else -127, lo, hi))
        step = 2.0 ** (e - bits + 1)
        kmax = 2 ** bits - 1
        k = np.clip(np.round(np.where(np.isfinite(block), block, np.sign(block) * 1e300) / step), -kmax, kmax)
        flat_out[i] = np.where(np.isnan(block), np.nan, k * step)
    return out


@pytest.mark.parametrize("df, bits, family", BFP)
def test_bfp_matches_independent_reference(df, bits, family):
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((3, 32, 64)) * 10.0 ** rng.integers(-6, 6, (3, 32, 1))).astype(np.float32)
    x[0, 0, :16] = [np.nan, np.inf, -np.inf, 1.0] + [0.25] * 12
    x[0, 1, :16] = 0.0
    x[1, 0, :16] = [(2 ** bits - 0.5) * 2.0 ** (1 - bits)] + [0.1] * 15  # max rounds past kmax: saturates
    got = quantize(x, df)
    want = reference_bfp(x, bits, family)
    assert np.array_equal(got, want.astype(np.float32), equal_nan=True)


@pytest.mark.parametrize("df, bits, family", BFP)
def test_bfp_extreme_exponents_take_the_exact_path(df, bits, family):
    x = np.array([[3e38] + [1e30] * 15, [1e-38] + [3e-39] * 15, [2.0 ** -140] + [0] * 15], dtype=np.float32)
    assert np.array_equal(quantize_bfp(x, bits, family), reference_bfp(x, bits, family).astype(np.float32))


def test_bfp_known_values_and_shared_exponent():
    # Bfp4_b: 3 magnitude bits; block max 3.0 -> E = 1, step 2^-1: 0.3 -> 0.5, 0.2 -> 0 (half to even), -1.3 -> -1.5
    x = np.array([[3.0, 0.3, 0.25, -1.3] + [0.0] * 12], dtype=np.float32)
    assert list(quantize(x, "Bfp4_b")[0, :4]) == [3.0, 0.5, 0.0, -1.5]
    # a large value elsewhere in the block coarsens its neighbours; in the next block they keep precision
    y = np.zeros((1, 32), dtype=np.float32)
    y[0, 0], y[0, 1], y[0, 17] = 100.0, 0.3, 0.3
    q = quantize(y, "Bfp8_b")[0]
    assert q[0] == 100.0 and q[1] == 0.0  # E = 6: step 2^0
    assert abs(q[17] - 0.3) <= 2 ** -9    # E = -2: step 2^-8
    # Bfp2: values are 0 or +-2^E of the block
    z = np.array([[0.9, -0.6, 0.4, 0.2] + [0] * 12], dtype=np.float32)
    assert list(quantize(z, "Bfp2")[0, :4]) == [0.5, -0.5, 0.5, 0.0]


@pytest.mark.parametrize("df", ["Float32", "Float16", "Float16_b", "Bfp8", "Bfp8_b", "Bfp4_b", "Bfp2_b", "Lf8",
                                "Int8", "Int32", "UInt16", "RawUInt32"])
def test_quantize_is_idempotent(df):
    x = (np.random.default_rng(2).standard_normal((2, 32, 32)) * 50).astype(np.float32)
    once = quantize(x, df)
    assert np.array_equal(quantize(once, df), once)


def test_32_bit_integer_formats_are_exact():
    big = np.array([2 ** 31 - 1, 2 ** 24 + 1, 0xFFFFFFFF, 16777217], dtype=np.float64)
    assert storage_dtype("RawUInt32") is np.float64 and storage_dtype("Int32") is np.float64
    assert list(quantize(big, "RawUInt32")) == [2 ** 31 - 1, 2 ** 24 + 1, 0xFFFFFFFF, 16777217]
    assert list(quantize(big, "Int32")) == [2 ** 31 - 1, 2 ** 24 + 1, 2 ** 31 - 1, 16777217]
    assert quantize(np.array([-3.5, 2.5]), "Int32").tolist() == [-4.0, 2.0]


def test_truncate_mantissa_keeps_nan_and_inf():
    x = np.array([np.nan, np.inf, -np.inf, 1.999], dtype=np.float32)
    for bits in (1, 4, 10):
        y = truncate_mantissa(x, bits)
        assert np.isnan(y[0]) and y[1] == np.inf and y[2] == -np.inf and y[3] <= 1.999


@pytest.mark.parametrize("fidelity", ["LoFi", "HiFi2", "HiFi3", "HiFi4"])
def test_an_infinite_operand_multiplies_to_infinity_at_every_fidelity(fidelity):
    """A masked attention score (-inf in Float16_b) times a finite scale is -inf, not inf times a zero low slice
    of the other operand (NaN)."""
    a = np.array([-np.inf, np.inf, 3.0, 0.0], dtype=np.float32)
    b = np.array([32768.0, 1.5, np.inf, np.inf], dtype=np.float32)
    y = fidelity_product(a, b, fidelity)
    assert y[0] == -np.inf and y[1] == np.inf and y[2] == np.inf and np.isnan(y[3])   # 0 * inf stays NaN


def test_representable_shortcuts_are_sound():
    """The executor skips rounding a value stored in format A to format B only if that is the identity."""
    x = (np.random.default_rng(3).standard_normal((4, 32, 64)) * 10.0 ** np.arange(-2, 2)[:, None, None])
    for a in DataFormat:
        stored = quantize(x.astype(np.float32), a)
        for b in DataFormat:
            if exactly_representable(a, b):
                assert np.array_equal(quantize(stored, b), stored.astype(quantize(stored, b).dtype)), (a, b)


def test_fraction_bits_bound_every_stored_value():
    """Kernels skip mantissa truncation of operands whose format has no more fraction bits than are kept."""
    x = (np.random.default_rng(6).standard_normal((4, 32, 64)) * 10.0 ** np.arange(-3, 1)[:, None, None])
    for df in DataFormat:
        if df.is_integer and df not in (DataFormat.Int8, DataFormat.UInt8):
            continue
        stored = quantize(x.astype(np.float32), df)
        bits = fraction_bits(df)
        assert np.array_equal(truncate_mantissa(stored, bits), stored), df
        if bits > 0 and not df.is_integer:
            assert not np.array_equal(truncate_mantissa(stored, bits - 1), stored), df
        assert truncate_mantissa(stored, bits, df) is stored


@pytest.mark.parametrize("df", [DataFormat.Bfp8_b, DataFormat.Bfp4_b, DataFormat.Bfp2_b, DataFormat.Bfp8])
def test_zeroing_values_keeps_block_floats_representable(df):
    """The packer may zero values (relu, tiny tiles) of an already-rounded result without re-rounding it."""
    rng = np.random.default_rng(5)
    x = quantize((rng.standard_normal((8, 32, 64)) * 10.0 ** rng.uniform(-3, 3, (8, 32, 1))).astype(np.float32), df)
    for keep in (x > 0, rng.random(x.shape) < 0.3, np.abs(x) < np.median(np.abs(x))):
        zeroed = np.where(keep, x, np.float32(0))
        assert np.array_equal(quantize(zeroed, df), zeroed)


@pytest.mark.parametrize("tile_dim", [(32, 32), (16, 32), (1, 32), (32, 16)])
def test_tiny_tile_layout_round_trip(tile_dim):
    h, w = tile_dim
    x = np.random.default_rng(4).standard_normal((2, 3 * h, 2 * w)).astype(np.float32)
    inner = to_internal(x, tile_dim)
    assert inner.shape == (2, 96, 64)
    tiles = inner.reshape(2, 3, 32, 2, 32)
    assert not tiles[:, :, h:, :, :].any() and not tiles[:, :, :, :, w:].any()  # padding is zero
    assert np.array_equal(to_host(inner, tile_dim), x)


@pytest.mark.parametrize("df", ["Float32", "Float16", "Float16_b", "Bfp8_b", "Bfp4", "Int8", "RawUInt32"])
def test_push_pop_round_trip_rounds_once(df):
    yaml = f"""
devices: {{arch: wormhole_b0}}
queues:
  x: {{input: HOST, type: queue, entries: 2, grid_size: [1, 1], t: 1, mblock: [1, 2], ublock: [1, 1], df: {df}, target_device: 0, loc: dram, dram: [[0, 0]]}}
  r: {{input: HOST, type: ram, entries: 1, grid_size: [1, 1], t: 1, mblock: [1, 2], ublock: [1, 1], tile_dim: [16, 32], df: {df}, target_device: 0, loc: dram, dram: [[1, 0]]}}
graphs:
  g: {{target_device: 0, input_count: 1}}
programs:
  - p: [{{var: {{$z: 0}}}}]
"""
    sim = Simulator(yaml)
    rng = np.random.default_rng(5)
    x = rng.uniform(-100, 100, (1, 32, 64))
    if df == "RawUInt32":
        x = rng.integers(0, 2 ** 32, (1, 32, 64)).astype(np.float64)
    sim.push("x", x)
    out = sim.pop("x")
    assert np.array_equal(out, quantize(x, df))
    r = x[:, :16]
    sim.push("r", r)
    assert sim.queue_shape("r") == (1, 16, 64) and np.array_equal(sim.peek("r"), quantize(r, df))
