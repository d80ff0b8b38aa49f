"""Data-format, gradient and untilize rules of single ops (netlist-format.md §3.4)."""
from __future__ import annotations

from ...arch.optypes import DATACOPY_OPS
from ...dataformat import DataFormat as DF
from ...dataformat import MathFidelity
from ..model import Op
from .registry import Context, rule, sized

_FP32_ACC = (DF.Float32, DF.Int32)
_LOW_BFP = {DF.Bfp2, DF.Bfp2_b, DF.Bfp4, DF.Bfp4_b}
_INT = {DF.Int8, DF.Int32, DF.UInt8, DF.UInt16}
_UNTILIZE_DF = {DF.Float16, DF.Float16_b, DF.Float32}


def _accumulates(op: Op) -> bool:
    """A gradient op, or a matmul that accumulates over K or adds a bias."""
    return bool(op.gradient_op) or (op.type == "matmul" and ((op.attrs.m_k or 0) > 1 or bool(op.attrs.bias)))


def _gradient(op: Op) -> bool:
    return bool(op.gradient_op) and sized(op)


def _untilizing(op: Op) -> bool:
    return bool(op.untilize_output) and sized(op)


def _int_inputs(op: Op) -> bool:
    return any(d in _INT for d in op.in_df)


# --- grayskull -----------------------------------------------------------------------------------------------------

@rule("df.grayskull_acc", on=Op, when=sized, section="§3.4")
def df_grayskull_acc(c: Context, op: Op) -> None:
    """Grayskull's dest accumulates in 16 bits only (no Float32 / Int32 acc_df)."""
    if c.gs and op.acc_df in _FP32_ACC:
        c.fail(op, f"grayskull has no {op.acc_df.value} dest accumulation", "a 16-bit acc_df", op.acc_df.value)


@rule("df.grayskull_exp_width", on=Op, when=sized, section="§3.4")
def df_grayskull_exp_width(c: Context, op: Op) -> None:
    """Grayskull: an accumulating op's out_df and intermed_df share the exponent width."""
    out, im = op.out_df, op.intermed_df
    if not c.gs or out == im or not (op.gradient_op or (op.attrs.m_k or 0) > 1):
        return
    family = out.exponent_family
    same = (family != "" and family == im.exponent_family) or (out == DF.Float32 and im.exponent_family == "b")
    if not same:
        c.fail(op, "grayskull: out_df and intermed_df must share the exponent width when the op accumulates",
               f"intermed_df with {'5' if family == 'a' else '8'}-bit exponent",
               f"out_df {out.value}, intermed_df {im.value}")


@rule("gradient.grayskull_op", on=Op, when=_gradient, section="§3.4")
def gradient_grayskull_op(c: Context, op: Op) -> None:
    """Grayskull accumulates gradients only in matmul, multiply and datacopy ops."""
    if c.gs and not (op.type in ("matmul", "multiply") or op.type in DATACOPY_OPS):
        c.fail(op, f"grayskull supports gradient_op only on matmul, multiply and datacopy, not {op.type}",
               "matmul, multiply or datacopy", op.type)


# --- accumulation --------------------------------------------------------------------------------------------------

@rule("df.accumulate_bfp", on=Op, when=sized, section="§3.4")
def df_accumulate_bfp(c: Context, op: Op) -> None:
    """Accumulating ops do not use Bfp4/Bfp2 intermediates."""
    if _accumulates(op) and op.intermed_df in _LOW_BFP:
        c.fail(op, "accumulating ops cannot use Bfp4/Bfp2 intermediates", "not Bfp4/Bfp2", op.intermed_df.value)


@rule("df.fp32_acc_intermed", on=Op, when=lambda op: op.type == "matmul" and sized(op), section="§3.4")
def df_fp32_acc_intermed(c: Context, op: Op) -> None:
    """A matmul accumulating with a Float32/Int32 acc_df has that intermed_df."""
    acc = op.acc_df
    if acc in _FP32_ACC:
        acc_en = bool(op.attrs.l1_acc) if c.arch == "wormhole_b0" else (op.attrs.m_k or 0) > 1
        if acc_en and op.intermed_df != acc:
            c.fail(op, f"matmul accumulation with acc_df {acc.value} needs intermed_df {acc.value}", acc.value,
                   op.intermed_df.value)


@rule("df.fp32_dest_stoch_rnd", on=Op, when=sized, section="§3.4")
def df_fp32_dest_stoch_rnd(c: Context, op: Op) -> None:
    """No fpu stochastic rounding with a Float32 dest."""
    if op.acc_df == DF.Float32 and op.attrs.stoch_rnd_mode in ("fpu", "all"):
        c.fail(op, "fpu stochastic rounding cannot be used with a Float32 dest", "none or pack",
               op.attrs.stoch_rnd_mode)


@rule("df.l1_acc", on=Op, when=sized, section="§3.4")
def df_l1_acc(c: Context, op: Op) -> None:
    """L1 accumulation needs intermed_df Float32, Int32 or Float16_b."""
    if op.attrs.l1_acc and op.intermed_df not in (DF.Float32, DF.Int32, DF.Float16_b):
        c.fail(op, "L1 accumulation needs intermed_df Float32, Int32 or Float16_b", "Float32, Int32 or Float16_b",
               op.intermed_df.value)


# --- gradient ops --------------------------------------------------------------------------------------------------

@rule("gradient.int32", on=Op, when=_gradient, section="§3.4")
def gradient_int32(c: Context, op: Op) -> None:
    """No gradient accumulation with an Int32 dest."""
    if op.acc_df == DF.Int32:
        c.fail(op, "gradient accumulation with an Int32 dest is not supported", "not Int32", op.acc_df.value)


@rule("df.gradient_intermed", on=Op, when=_gradient, section="§3.4")
def df_gradient_intermed(c: Context, op: Op) -> None:
    """Gradient ops have intermed_df == out_df."""
    if op.intermed_df != op.out_df:
        c.fail(op, "gradient ops need intermed_df == out_df", op.out_df.value, op.intermed_df.value)


@rule("gradient.transpose", on=Op, when=_gradient, section="§3.4")
def gradient_transpose(c: Context, op: Op) -> None:
    """Gradient ops transpose inputs only on matmul and datacopy."""
    has_t = any(tm[0] == "transpose" for tms in op.input_tms.values() for tm in tms)
    if has_t and not (op.type == "matmul" or op.type in DATACOPY_OPS):
        c.fail(op, "gradient ops support input transpose only on matmul and datacopy", "no transpose", "transpose")


@rule("df.gradient_fp32_acc", on=Op, when=_gradient, section="§3.4")
def df_gradient_fp32_acc(c: Context, op: Op) -> None:
    """Off wormhole_b0, gradient ops with a Float32 acc_df have intermed_df Float32."""
    if c.arch != "wormhole_b0" and op.acc_df == DF.Float32 and op.intermed_df != op.acc_df:
        c.fail(op, "gradient ops with Float32 acc_df need intermed_df Float32 (GS/WH A0)", "Float32",
               op.intermed_df.value)


@rule("gradient.maximum", on=Op, when=_gradient, section="§3.4")
def gradient_maximum(c: Context, op: Op) -> None:
    """No gradient accumulation in maximum ops."""
    if op.type == "maximum":
        c.fail(op, "gradient ops do not support maximum", "not maximum", op.type)


@rule("gradient.identity", on=Op, when=_gradient, section="§3.4")
def gradient_identity(c: Context, op: Op) -> None:
    """No gradient accumulation in identity matmuls."""
    if op.type == "matmul" and op.attrs.identity:
        c.fail(op, "gradient accumulation is not supported on identity matmul", "gradient_op false", True)


# --- untilize ------------------------------------------------------------------------------------------------------

@rule("untilize.ublock_order", on=Op, when=_untilizing, section="§3.4")
def untilize_ublock_order(c: Context, op: Op) -> None:
    """An untilizing op has ublock_order r."""
    if op.ublock_order != "r":
        c.fail(op, "untilize_output needs ublock_order r", "r", op.ublock_order)


@rule("df.untilize", on=Op, when=_untilizing, section="§3.4")
def df_untilize(c: Context, op: Op) -> None:
    """An untilizing op writes Float16, Float16_b or Float32 (Int8/Int32 off grayskull)."""
    out = op.out_df
    if out not in _UNTILIZE_DF and not (out in (DF.Int8, DF.Int32) and not c.gs):
        c.fail(op, f"untilize_output does not support out_df {out.value}", "Float16, Float16_b or Float32",
               out.value)


@rule("untilize.matmul_mk", on=Op, when=_untilizing, section="§3.4")
def untilize_matmul_mk(c: Context, op: Op) -> None:
    """An untilizing matmul has m_k == 1."""
    if op.type == "matmul" and (op.attrs.m_k or 1) != 1:
        c.fail(op, "an untilizing matmul needs m_k == 1", 1, op.attrs.m_k)


@rule("untilize.reduce_z", on=Op, when=_untilizing, section="§3.4")
def untilize_reduce_z(c: Context, op: Op) -> None:
    """A reduce over z does not untilize its output."""
    if op.type == "reduce" and op.attrs.dim == "z":
        c.fail(op, "reduce dim z cannot untilize its output", "untilize_output false", True)


# --- reduce, splice ------------------------------------------------------------------------------------------------

@rule("df.reduce_z", on=Op, when=lambda op: op.type == "reduce" and sized(op), section="§3.4")
def df_reduce_z(c: Context, op: Op) -> None:
    """A reduce over z has in_df[0] == intermed_df == out_df."""
    im, out = op.intermed_df, op.out_df
    if op.attrs.dim == "z" and op.in_df and not (op.in_df[0] == im == out):
        c.fail(op, "reduce dim z needs in_df[0] == intermed_df == out_df", op.in_df[0].value,
               f"intermed_df {im.value}, out_df {out.value}")


@rule("df.reduce_fp32_acc", on=Op, when=lambda op: op.type == "reduce" and sized(op), section="§3.4")
def df_reduce_fp32_acc(c: Context, op: Op) -> None:
    """A reduce with a Float32 acc_df takes a B-format (8-bit exponent) input."""
    if op.acc_df == DF.Float32 and op.in_df and op.in_df[0].exponent_family == "a":
        c.fail(op, "reduce with Float32 acc_df cannot take an 'A' format input", "a B format input",
               op.in_df[0].value)


@rule("df.splice", on=Op, when=lambda op: op.type == "splice" and sized(op), section="§3.4")
def df_splice(c: Context, op: Op) -> None:
    """Splice inputs share one data format."""
    if len(set(op.in_df)) > 1:
        c.fail(op, "splice inputs must all have the same data format", op.in_df[0].value, [d.value for d in op.in_df])


# --- integer formats -----------------------------------------------------------------------------------------------

_QUANT_OPS = ("quantization", "requantization", "dequantization")


@rule("df.uint8", on=Op, when=lambda op: op.type in (*_QUANT_OPS, "reduce") and sized(op), section="§3.4")
def df_uint8(c: Context, op: Op) -> None:
    """Quantization and reduce ops do not use UInt8."""
    if DF.UInt8 in op.in_df or op.out_df == DF.UInt8:
        c.fail(op, f"{op.type} ops cannot use UInt8", "not UInt8", [d.value for d in op.in_df] + [op.out_df.value])


@rule("df.int", on=Op, when=sized, section="§3.4")
def df_int(c: Context, op: Op) -> None:
    """Integer inputs (except topk): integer out_df (or dequantizing), Int8/UInt8/Int32 intermed_df, HiFi4, acc_df
    Int32, Int8/UInt8 matmul operands without l1_acc; requant/dequant need integer inputs."""
    a = op.attrs
    out, im, acc = op.out_df, op.intermed_df, op.acc_df
    if _int_inputs(op) and op.type != "topk":
        problems = []
        if not (out in _INT or a.dequant or op.type in ("dequantization", "fused_op")):
            problems.append(f"out_df {out.value} is not an integer format")
        if im not in (DF.Int8, DF.UInt8, DF.Int32):
            problems.append(f"intermed_df {im.value} is not Int8/UInt8/Int32")
        if op.math_fidelity != MathFidelity.HiFi4:
            problems.append(f"math_fidelity {op.math_fidelity.value} is not HiFi4")
        if acc != DF.Int32:
            problems.append(f"acc_df {acc.value if acc else None} is not Int32")
        if op.type == "matmul" and len(op.in_df) >= 2:
            if op.in_df[0] not in (DF.Int8, DF.UInt8) or op.in_df[1] not in (DF.Int8, DF.UInt8):
                problems.append("matmul inputs 0 and 1 must be Int8/UInt8")
            if a.l1_acc:
                problems.append("integer matmul cannot use l1_acc")
        if problems:
            c.fail(op, "integer inputs: " + "; ".join(problems), "Int formats, HiFi4, acc_df Int32",
                   [d.value for d in op.in_df])
    if not _int_inputs(op) and (a.requant or a.dequant):
        c.fail(op, "requant/dequant need integer inputs", "Int8/Int32 inputs", [d.value for d in op.in_df])


@rule("df.int_acc", on=Op, when=sized, section="§3.4")
def df_int_acc(c: Context, op: Op) -> None:
    """acc_df Int32 only with integer inputs (or on a quantization or fused op)."""
    int_rules = _int_inputs(op) and op.type != "topk"      # df.int's case
    if not int_rules and op.acc_df == DF.Int32 and op.type not in ("quantization", "fused_op"):
        c.fail(op, "acc_df Int32 needs integer inputs (or a quantization / fused op)", "a 16/32-bit float acc_df",
               op.acc_df.value)


@rule("df.quant", on=Op, when=lambda op: op.type in _QUANT_OPS and sized(op) and len(op.in_df) >= 2,
      section="§3.4")
def df_quant(c: Context, op: Op) -> None:
    """quantization: in_df Float32, out_df Int8, acc_df Int32; dequantization / requantization: in_df
    [Int32|Int8, Float32], acc_df Int32, out_df Float32 / Int8."""
    ins, out, acc = op.in_df, op.out_df, op.acc_df
    if op.type == "quantization":
        if ins[0] != DF.Float32 or ins[1] != DF.Float32 or out != DF.Int8 or acc != DF.Int32:
            c.fail(op, "quantization needs in_df Float32, out_df Int8 and acc_df Int32", None,
                   [d.value for d in ins] + [out.value])
        return
    dequant = op.type == "dequantization"
    if not (ins[0] in (DF.Int32, DF.Int8) and ins[1] == DF.Float32 and acc == DF.Int32 and
            out == (DF.Float32 if dequant else DF.Int8)):
        c.fail(op, f"{op.type} needs in_df [Int32, Float32], acc_df Int32 and out_df "
               f"{'Float32' if dequant else 'Int8'}", None, [d.value for d in ins] + [out.value])
