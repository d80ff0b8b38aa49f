"""Data formats and math fidelity of the Buda graph (legacy `run_dataformat_passes`, simplified):
one device format for every tensor (Float16_b unless `default_df_override`), accumulation format from
`default_accumulate_df` or inferred (Float32 only where the arch can accumulate in it), fidelity from
`default_math_fidelity`."""
from __future__ import annotations

from ..dataformat import DataFormat, MathFidelity
from ..ir import Graph


def accumulate_format(df: DataFormat, arch: str) -> DataFormat:
    """The dest format the legacy compiler infers: Float32 where the arch has a 32-bit dest, Float16_b for
    B formats, Float16 otherwise (so Float32 on grayskull accumulates with 10 mantissa bits)."""
    if df == DataFormat.Float32 and arch != "grayskull":
        return DataFormat.Float32
    return DataFormat.Float16_b if df.exponent_family == "b" else DataFormat.Float16


def assign_data_formats(bgraph: Graph, config, arch: str) -> Graph:
    """Set `df` on every node and intermed/acc formats and fidelity on every op."""
    df = DataFormat.parse(config.default_df_override) if config.default_df_override else DataFormat.Float16_b
    acc = DataFormat.parse(config.default_accumulate_df) if config.default_accumulate_df else accumulate_format(df, arch)
    if arch == "grayskull" and acc in (DataFormat.Float32, DataFormat.Int32):
        raise ValueError(f"default_accumulate_df={acc.value} is not supported on grayskull (no 32-bit dest); "
                         "legal: Float16, Float16_b")
    fidelity = MathFidelity.parse(config.default_math_fidelity)
    for node in bgraph.nodes():
        node.df = df
        if node.kind == "op":
            intermed = acc if acc == DataFormat.Float32 and node.op_type == "matmul" else df
            node.tags.update(intermed_df=intermed, acc_df=acc, math_fidelity=fidelity)
    return bgraph
