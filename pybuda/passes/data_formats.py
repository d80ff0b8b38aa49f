"""Data formats and math fidelity of the Buda graph (legacy `run_dataformat_passes`, simplified):
1. one device format for every tensor (Float16_b unless `default_df_override`), accumulation format from
   `default_accumulate_df` or inferred (Float32 only where the arch has a 32-bit dest), fidelity from
   `default_math_fidelity`;
2. automatic mixed precision (`amp_level` 1 "mixed B" / 2 "mixed A", as the legacy AMP levels);
3. user rules from `configure_mixed_precision` (op type or original framework op type, name regex);
4. the backend's format rules enforced (intermediate format of accumulating ops, grayskull dest)."""
from __future__ import annotations

import re

from ..dataformat import DataFormat, MathFidelity
from ..errors import UserInputError
from ..ir import Graph, epoch_types, gradient_ops
from ..ops import registry

BFP_ACC_FORBIDDEN = (DataFormat.Bfp2, DataFormat.Bfp2_b, DataFormat.Bfp4, DataFormat.Bfp4_b)


def accumulate_format(df: DataFormat, arch: str) -> DataFormat:
    """The dest format the legacy compiler infers: Float32 where the arch has a 32-bit dest, Float16_b for
    B formats, Float16 otherwise (so Float32 on grayskull accumulates with 10 mantissa bits; a training graph's
    optimizer ops may differ: `_training_formats`)."""
    if df == DataFormat.Float32 and arch != "grayskull":
        return DataFormat.Float32
    return DataFormat.Float16_b if df.exponent_family == "b" else DataFormat.Float16


def _set(node, out=None, intermed=None, acc=None, fidelity=None) -> None:
    if out is not None:
        node.df = DataFormat.parse(out)
        node.intermed_df = node.df
    if intermed is not None:
        node.intermed_df = DataFormat.parse(intermed)
    if acc is not None:
        node.acc_df = DataFormat.parse(acc)
    if fidelity is not None:
        node.math_fidelity = MathFidelity.parse(fidelity)


def _amp(bgraph: Graph, level: int) -> None:
    """Legacy AMP levels: 1 = matmuls Bfp8_b (HiFi2, Float16_b accumulation), softmax/layernorm Float16_b;
    2 = the same in A formats (Bfp8 matmuls, Float16 elsewhere)."""
    if level not in (1, 2):
        raise UserInputError(f"amp_level={level} is not defined; legal: 0 (off), 1 (mixed B formats), 2 (mixed A "
                             "formats)")
    low, high = (DataFormat.Bfp8_b, DataFormat.Float16_b) if level == 1 else (DataFormat.Bfp8, DataFormat.Float16)
    kept_high = registry.in_group("amp_float16")
    for node in bgraph.nodes("op"):
        origin = node.framework_op_type
        if origin in kept_high:
            _set(node, out=high, acc=high)
        elif node.op_type == "matmul" and origin == "matmul":
            _set(node, out=low, acc=high, fidelity=MathFidelity.HiFi2)
            for operand in bgraph.operands(node.name)[1:]:
                src = bgraph.node(operand.src)
                if src.kind in ("parameter", "constant"):
                    src.df = low


LEGACY_EPOCH_TYPES = {"fwd": "forward", "bwd": "backward", "opt": "optimizer"}   # configure_mixed_precision's names


def _matches(rule, node, epoch_type: str, gradient_op: bool) -> bool:
    """op_type names the framework op a device op comes from (a conv2d's matmuls match "conv2d", a softmax's
    internal matmuls do not match "matmul"); name_regex must match the whole device op name; epoch_type ("fwd",
    "bwd", "opt") and is_gradient_op select by the op's epoch type and whether it writes a gradient accumulator."""
    if rule.op_type and rule.op_type != node.framework_op_type:
        return False
    if rule.name_regex and not re.fullmatch(rule.name_regex, node.name):
        return False
    if rule.epoch_type and LEGACY_EPOCH_TYPES[rule.epoch_type] != epoch_type:
        return False
    return rule.is_gradient_op is None or rule.is_gradient_op == gradient_op


def _apply_rules(bgraph: Graph, rules: list) -> None:
    if not rules:
        return
    types, grads = epoch_types(bgraph), gradient_ops(bgraph)
    for rule in rules:
        for node in bgraph.nodes("op"):
            if not _matches(rule, node, types[node.name], node.name in grads):
                continue
            _set(node, rule.output_df, rule.intermediate_df, rule.accumulate_df, rule.math_fidelity)
            if rule.input_df is None:
                continue
            inputs = rule.input_df if isinstance(rule.input_df, dict) else \
                {i: (rule.input_df, False) for i in range(len(bgraph.operands(node.name)))}
            operands = bgraph.operands(node.name)
            for index, (df, _) in inputs.items():
                src = bgraph.node(operands[int(index)].src) if int(index) < len(operands) else None
                if src is not None and src.kind in ("input", "parameter", "constant"):
                    src.df = DataFormat.parse(df)


def _legalize(bgraph: Graph, arch: str) -> None:
    """Backend format rules (netlist-format.md §3.4) that mixed precision could break. A gradient op needs its
    intermediate format equal to its output's: where a Float32 accumulation makes a gradient matmul's intermediate
    Float32, its accumulator (the op's output) is kept in Float32 too."""
    grads = gradient_ops(bgraph)
    for node in bgraph.nodes("op"):
        acc = node.acc_df
        if arch == "grayskull" and acc in (DataFormat.Float32, DataFormat.Int32):
            raise UserInputError(f"op {node.name!r}: accumulate format {acc.value} is not supported on grayskull (no "
                                 "32-bit dest); legal: Float16, Float16_b")
        if registry.get(node.op_type).kind == "matmul":
            if node.intermed_df in BFP_ACC_FORBIDDEN:
                node.intermed_df = acc
            if acc == DataFormat.Float32:
                node.intermed_df = acc
        else:
            node.intermed_df = node.df
        if node.name in grads:
            node.df = node.intermed_df
        if node.large_padding and node.df.is_bfp:
            # padding filled with -1e6 shares exponent blocks with real values: keep a per-value exponent
            node.df = DataFormat.Float16_b if node.df.exponent_family == "b" else DataFormat.Float16
            node.intermed_df = node.df


FLOAT16_NORMAL, FLOAT16_MAX = 2.0 ** -14, 65504.0


def _training_formats(bgraph: Graph, arch: str, config) -> None:
    """Where the arch has a 32-bit dest (wormhole), training keeps master copies: trained parameters, their residuals,
    optimizer state, the per-step scalars (a learning rate in Float16_b would be off by up to 2^-9) and the
    optimizer's ops in Float32, accumulating in Float32, whatever the default format (a 16-bit parameter moves in
    steps of its rounding step: 2^-7 for a layernorm weight near 1.0 in Float16_b). Grayskull's dest is 16-bit, so
    a Float32 copy would gain little there (the sum is rounded in the dest, as on the hardware; a compensated
    update keeps what it drops in the residual) and double the bytes every forward matmul reads: its parameters
    keep the default format. Where the dest would be Float16 (5-bit exponent) and a per-step scalar is outside
    Float16's normal range (Adam's eps, ~1e-8: its second moments, 1 / (sqrt(v) + eps) up to 1e8, need the
    range), the optimizer's ops accumulate in Float16_b for the 8-bit exponent (range before the 3 bits of
    mantissa Float16 would add)."""
    types = epoch_types(bgraph)
    optimizer = [name for name, kind in types.items() if kind == "optimizer"]
    if not optimizer:
        return
    if arch == "grayskull":
        wide = any(n.role == "optimizer_parameter" and not FLOAT16_NORMAL <= abs(float(n.value.flat[0])) <= FLOAT16_MAX
                   for n in bgraph.nodes("parameter"))
        for name in optimizer:
            node = bgraph.node(name)
            if wide and node.acc_df == DataFormat.Float16 and not config.default_accumulate_df:
                node.acc_df = DataFormat.Float16_b
        return
    for node in bgraph.nodes("parameter"):
        if node.role in ("trained", "optimizer_state", "parameter_residual", "optimizer_parameter"):
            node.df = DataFormat.Float32
    for name in optimizer:
        node = bgraph.node(name)
        node.df = node.intermed_df = DataFormat.Float32
        if not config.default_accumulate_df:
            node.acc_df = DataFormat.Float32


def assign_data_formats(bgraph: Graph, config, arch: str) -> Graph:
    """Set `df` on every node and intermediate/accumulate formats and fidelity on every op."""
    df = DataFormat.parse(config.default_df_override) if config.default_df_override else DataFormat.Float16_b
    acc = DataFormat.parse(config.default_accumulate_df) if config.default_accumulate_df else \
        accumulate_format(df, arch)
    fidelity = MathFidelity.parse(config.default_math_fidelity)
    for node in bgraph.nodes():
        node.df = df
        if node.kind == "op":
            node.intermed_df, node.acc_df, node.math_fidelity = df, acc, fidelity
    _training_formats(bgraph, arch, config)
    if config.amp_level:
        _amp(bgraph, int(config.amp_level))
    _apply_rules(bgraph, config.amp_properties)
    _legalize(bgraph, arch)
    return bgraph
