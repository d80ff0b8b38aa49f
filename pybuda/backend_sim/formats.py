"""Numeric models of the Buda data formats and of the matrix unit's math fidelity.

All functions take and return float32 numpy arrays; values are "as stored" in the given format.
The models (rounding modes, block layout, fidelity bit splits) are documented in docs/simulator.md.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from pybuda.dataformat import DataFormat, MathFidelity
from pybuda.errors import InternalError

BFP_BLOCK = 16  # values sharing one exponent: 16 consecutive values of a tile row (one face row)

# Integer formats: (low, high) clip range after round-to-nearest-even.
_INT_RANGES = {
    DataFormat.Int8: (-127.0, 127.0),
    DataFormat.UInt8: (0.0, 255.0),
    DataFormat.UInt16: (0.0, 65535.0),
    DataFormat.Int32: (-2147483648.0, 2147483647.0),
    DataFormat.RawUInt8: (0.0, 255.0),
    DataFormat.RawUInt16: (0.0, 65535.0),
    DataFormat.RawUInt32: (0.0, 4294967295.0),
}
# Shared-exponent range (unbiased) of the BFP families: 5-bit field (bias 15) or 8-bit field (bias 127,
# limited to float32's largest finite exponent).
_BFP_EXP_RANGE = {"a": (-15, 16), "b": (-127, 127)}


# 32-bit integer formats are stored in float64 so every 32-bit value (sparse encodings, embedding indices) is exact.
WIDE_INT_FORMATS = frozenset({DataFormat.Int32, DataFormat.RawUInt32})
# Raw formats carry bit patterns / indices: stored as integers, never used in arithmetic.
RAW_FORMATS = frozenset({DataFormat.RawUInt8, DataFormat.RawUInt16, DataFormat.RawUInt32})


def storage_dtype(df: "DataFormat | str") -> type:
    """numpy dtype the simulator keeps values of `df` in: float64 for 32-bit integer formats, else float32."""
    return np.float64 if DataFormat.parse(df) in WIDE_INT_FORMATS else np.float32


# (format a value is stored in) -> other formats it is exactly representable in, for values blocked as stored
_EXACT_IN = {
    DataFormat.Bfp8_b: {DataFormat.Float16_b},
    DataFormat.Bfp4_b: {DataFormat.Float16_b, DataFormat.Bfp8_b},
    DataFormat.Bfp2_b: {DataFormat.Float16_b, DataFormat.Bfp8_b, DataFormat.Bfp4_b},
    DataFormat.Int8: {DataFormat.Float16_b, DataFormat.Float16, DataFormat.Int32},
}


def exactly_representable(stored: "DataFormat | None", df: "DataFormat | str") -> bool:
    """True if rounding values stored in `stored` (None: unknown) to `df` leaves them unchanged, provided their
    block-float blocks have not been rearranged (a transpose re-blocks values)."""
    if stored is None:
        return False
    df = DataFormat.parse(df)
    stored = DataFormat.parse(stored)
    if stored is df:
        return True
    if df is DataFormat.Float32:
        return storage_dtype(stored) is np.float32
    return df in _EXACT_IN.get(stored, ())


def quantize(x: np.ndarray, df: "DataFormat | str") -> np.ndarray:
    """Round `x` to the values representable in `df`; returns a new array of the same shape.

    The result is float32, except for the 32-bit integer formats (Int32, RawUInt32): float64, so that every
    32-bit value is exact. Float32: identity. Float16: IEEE half, round-to-nearest-even, overflow to +-inf.
    Float16_b: bfloat16, round-to-nearest-even. Bfp8/4/2 (A and B): block floating point, one exponent per 16
    consecutive values along the last axis (see `quantize_bfp`). Lf8 / Fp8_e4m3: ml_dtypes float8_e5m2 /
    float8_e4m3fn. Integer formats: round-to-nearest-even then clip to the format's range.
    """
    df = DataFormat.parse(df)
    if df in WIDE_INT_FORMATS:
        lo, hi = _INT_RANGES[df]
        with np.errstate(invalid="ignore"):
            return np.clip(np.rint(np.asarray(x, dtype=np.float64)), lo, hi)
    arr = np.asarray(x, dtype=np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        if df is DataFormat.Float32:
            return arr.copy()
        if df is DataFormat.Float16:
            return _via_torch(arr, "float16")
        if df is DataFormat.Float16_b:
            return arr.astype(ml_dtypes.bfloat16).astype(np.float32)
        if df.is_bfp:
            return quantize_bfp(arr, df.mantissa_bits, df.exponent_family)
        if df is DataFormat.Lf8:
            return arr.astype(ml_dtypes.float8_e5m2).astype(np.float32)
        if df is DataFormat.Fp8_e4m3:
            return arr.astype(ml_dtypes.float8_e4m3fn).astype(np.float32)
        if df in _INT_RANGES:
            lo, hi = _INT_RANGES[df]
            return np.clip(np.rint(arr), lo, hi).astype(np.float32)
    raise InternalError(f"no numeric model for data format {df.value}")  # pragma: no cover (every format is handled)


def _via_torch(arr: np.ndarray, dtype: str) -> np.ndarray:
    """IEEE half rounding through torch (same results as numpy's cast, several times faster)."""
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return arr.astype(np.float16).astype(np.float32)
    t = torch.from_numpy(np.ascontiguousarray(arr))
    return t.to(getattr(torch, dtype)).to(torch.float32).numpy()


_F32_MAX = np.float32(np.finfo(np.float32).max)


def quantize_bfp(x: np.ndarray, mantissa_bits: int, family: str) -> np.ndarray:
    """Block floating point: groups of 16 consecutive values along the last axis share an exponent.

    Shared exponent E = floor(log2(max |v|)) of the block (the largest exponent field), clipped to the family's
    range ('a': 5-bit, 'b': 8-bit). Each value becomes sign * k * 2**(E - (mantissa_bits - 1)) with integer
    k = round-half-even(|v| / step) clipped to 2**mantissa_bits - 1 (the magnitude field holds the explicit
    leading one). NaN stays NaN, +-inf saturates to the largest magnitude of the block. A last axis that is not a
    multiple of 16 is zero-padded. Vectorised on the float32 bit patterns (no float64 pass); large arrays are
    processed in cache-sized row ranges (blocks never cross rows, so the values are the same).
    """
    arr = np.asarray(x, dtype=np.float32)
    shape = arr.shape
    if arr.size == 0:
        return arr.copy()
    cols = shape[-1] if arr.ndim else 1
    flat = np.ascontiguousarray(arr).reshape(-1, cols)
    rows_per_chunk = max(1, _CHUNK_ELEMENTS // cols)
    if flat.shape[0] <= rows_per_chunk:
        return _quantize_bfp_rows(flat, mantissa_bits, family).reshape(shape)
    out = np.empty_like(flat)
    for start in range(0, flat.shape[0], rows_per_chunk):
        rows = slice(start, start + rows_per_chunk)
        _quantize_bfp_rows(flat[rows], mantissa_bits, family, out=out[rows])
    return out.reshape(shape)


_CHUNK_ELEMENTS = 1 << 17  # values per step of quantize_bfp: a step's temporaries stay in the L2 cache


def _quantize_bfp_rows(flat: np.ndarray, mantissa_bits: int, family: str, out: np.ndarray | None = None) -> np.ndarray:
    """quantize_bfp of a contiguous 2-D float32 array (blocks along its rows), into `out` if given."""
    cols = flat.shape[1]
    pad = (-cols) % BFP_BLOCK
    if pad:
        result = _quantize_bfp_rows(np.pad(flat, ((0, 0), (0, pad))), mantissa_bits, family)[:, :cols]
        if out is None:
            return np.ascontiguousarray(result)
        out[...] = result
        return out
    blocks = flat.reshape(-1, BFP_BLOCK)
    # block maximum of |v| (NaN ignored): |v| written transposed, (16, blocks), then reduced over the 16 rows;
    # numpy is several times faster this way than reducing the short last axis of (blocks, 16)
    mags = np.empty((BFP_BLOCK, blocks.shape[0]), dtype=np.float32)
    np.abs(blocks.T, out=mags)
    m = np.fmax.reduce(mags, axis=0)[:, None]
    np.minimum(m, _F32_MAX, out=m)  # inf counts as the largest finite value
    shared = (m.view(np.int32) >> 23) - 127  # exponent field of the block maximum, unbiased
    emin, emax = _BFP_EXP_RANGE[family]
    np.maximum(shared, emin, out=shared)
    np.minimum(shared, emax, out=shared)
    step_exp = shared - (mantissa_bits - 1)
    mb = mantissa_bits
    if step_exp.min() >= -126 and step_exp.max() <= 104:
        # Round to a multiple of the block's step with round-to-nearest-even by adding and subtracting
        # M = 1.5 * 2**(step_exp + 23): the sum's last mantissa bit is worth exactly one step.
        magic = (((step_exp + 150) << 23) | (1 << 22)).view(np.float32)
        target = np.empty_like(blocks) if out is None else out.reshape(blocks.shape)
        np.add(blocks, magic, out=target)
        target -= magic
        # only a block whose maximum rounds up past kmax steps (or holds an infinity) needs clipping:
        # threshold (kmax + 1/2) steps = 2**E * 1.11..1b (mb ones), bound kmax steps = 2**E * 1.1..1b (mb-1 ones)
        threshold = (((shared + 127) << 23) | (((1 << mb) - 1) << (23 - mb))).view(np.float32)
        if (m >= threshold).any():
            bound = (((shared + 127) << 23) | (((1 << (mb - 1)) - 1) << (24 - mb))).view(np.float32)
            np.minimum(target, bound, out=target)
            np.maximum(target, -bound, out=target)
    else:  # steps outside the normal float32 range: exact scaling with ldexp
        kmax = np.float32(2 ** mb - 1)
        bound = np.ldexp(kmax, step_exp).astype(np.float32)
        with np.errstate(over="ignore", invalid="ignore"):
            scaled = np.ldexp(np.rint(np.ldexp(blocks, -step_exp)), step_exp).astype(np.float32)
        target = scaled if out is None else out.reshape(blocks.shape)
        np.clip(scaled, -bound, bound, out=target)
    return target.reshape(flat.shape)


# ---------------------------------------------------------------------------------------------------
# Math fidelity model
#
# The matrix unit's source registers hold 19-bit values (sign, 8-bit exponent, 10-bit mantissa); operands are
# truncated to that on unpack. Its multiplier is 5 bits (srcA) x 7 bits (srcB) wide, so a full product is built
# from up to four phases over mantissa slices, MSB slices first:
#   srcA: hi = hidden bit + fraction bits 1..4, lo = fraction bits 5..9 (fraction bit 10 is never used)
#   srcB: hi = hidden bit + fraction bits 1..6, lo = fraction bits 7..10
#   LoFi: Ahi*Bhi | HiFi2: + Alo*Bhi | HiFi3: + Ahi*Blo | HiFi4: + Alo*Blo
# For bfloat16 operands (7 fraction bits) HiFi4 is the exact product; LoFi keeps ~4 x 6 fraction bits.
# ---------------------------------------------------------------------------------------------------

SRC_FRACTION_BITS = 10
SRCA_SPLIT = (4, 5)  # fraction bits in the (hi, lo) slices of srcA
SRCB_SPLIT = (6, 4)  # fraction bits in the (hi, lo) slices of srcB


def fraction_bits(df: "DataFormat | str") -> int:
    """Most fraction bits (below the leading one) any value stored in `df` has: a block-float magnitude
    k < 2**mantissa_bits has mantissa_bits - 1 of them, Int8/UInt8 values (|v| < 256) 7."""
    df = DataFormat.parse(df)
    if df.is_bfp:
        return df.mantissa_bits - 1
    if df in (DataFormat.Int8, DataFormat.UInt8):
        return 7
    return 23 if df.is_integer else df.mantissa_bits


def truncate_mantissa(x: np.ndarray, fraction_bits_kept: int, stored: "DataFormat | None" = None) -> np.ndarray:
    """Keep the sign, exponent and the top `fraction_bits_kept` of a float32 mantissa (round toward zero).

    Infinities are unchanged; NaNs stay NaN (quiet NaNs keep their top mantissa bit; any other NaN is restored).
    `stored`: the format `x` holds values of; when its values have no more fraction bits than are kept, `x` is
    returned as it is.
    """
    if stored is not None and fraction_bits(stored) <= fraction_bits_kept:
        return x
    arr = np.ascontiguousarray(x, dtype=np.float32)
    mask = np.uint32((0xFFFFFFFF << (23 - fraction_bits_kept)) & 0xFFFFFFFF)
    out = (arr.view(np.uint32) & mask).view(np.float32)
    if fraction_bits_kept < 1:
        return np.where(np.isfinite(arr), out, arr).astype(np.float32)
    return out  # a quiet NaN's top fraction bit survives, so NaN stays NaN


def to_source_register(x: np.ndarray, stored: "DataFormat | None" = None) -> np.ndarray:
    """Value as held in srcA/srcB: mantissa truncated to 10 fraction bits (no-op for values stored in a format
    with at most 10 fraction bits)."""
    return truncate_mantissa(x, SRC_FRACTION_BITS, stored)


def fidelity_slices(x: np.ndarray, operand: str, stored: "DataFormat | None" = None) -> tuple[np.ndarray, np.ndarray]:
    """(hi, hi+lo) of an operand in source register `operand` ('a' or 'b'), both float32."""
    hi_bits, lo_bits = SRCA_SPLIT if operand == "a" else SRCB_SPLIT
    src = to_source_register(x, stored)
    return truncate_mantissa(src, hi_bits, stored), truncate_mantissa(src, hi_bits + lo_bits, stored)


def _phase_terms(fidelity: MathFidelity) -> list[tuple[str, str]]:
    """Which (srcA slice, srcB slice) combinations are summed: 'hi' = MSB slice, 'full' = hi+lo."""
    phases = fidelity.phases
    if phases <= 1:
        return [("hi", "hi")]
    if phases == 2:
        return [("full", "hi")]
    if phases == 3:
        return [("full", "hi"), ("hi", "lo")]
    return [("full", "full")]


def fidelity_product(a: np.ndarray, b: np.ndarray, fidelity: "MathFidelity | str",
                     a_df: "DataFormat | None" = None, b_df: "DataFormat | None" = None) -> np.ndarray:
    """Elementwise a*b as the matrix unit computes it with a = srcA operand, b = srcB operand (`a_df`, `b_df`:
    the formats they hold values of, if known). An infinite operand gives the full product (inf times a finite
    non-zero value is inf at any fidelity, not inf times a zero low slice)."""
    fidelity = MathFidelity.parse(fidelity)
    a_hi, a_full = fidelity_slices(a, "a", a_df)
    b_hi, b_full = fidelity_slices(b, "b", b_df)
    out = None
    with np.errstate(over="ignore", invalid="ignore"):
        parts = {"a": {"hi": a_hi, "full": a_full}, "b": {"hi": b_hi, "full": b_full, "lo": b_full - b_hi}}
        for sa, sb in _phase_terms(fidelity):
            term = parts["a"][sa] * parts["b"][sb]
            out = term if out is None else out + term
        infinite = np.isinf(a_full) | np.isinf(b_full)
        if infinite.any():
            out = np.where(infinite, a_full * b_full, out)
    return out.astype(np.float32)
