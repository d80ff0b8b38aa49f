"""The published-table section of docs/models.md: per row of the legacy compiler's published benchmark table
(`pybuda.tools.zoo.PUBLISHED`), our estimate against what silicon measured, with epochs, cores, the plan's ratio
to its lower bound and compile seconds. Prints Markdown.

    PYTHONPATH=. python benchmarks/published_table.py              # from benchmarks/perf_baseline.json (instant)
    PYTHONPATH=. python benchmarks/published_table.py --measure    # compile every row now (about 30 minutes)

The baseline holds the rows `python -m pybuda.tools.perf_regression --tier published --update` measured.
"""
from __future__ import annotations

import argparse

from pybuda.tools.perf_regression import PerfCase, load_baseline, measure
from pybuda.tools.zoo import PUBLISHED, BenchmarkConfig

HEADER = ("| model | device | microbatch | format | estimate samples/s | silicon samples/s | estimate / silicon | "
          "epochs | cores | plan / bound | compile s |\n|---|---|---|---|---|---|---|---|---|---|---|")


def row(bench: BenchmarkConfig, figures: dict | None) -> str:
    """One Markdown row; a configuration the baseline has no figures for did not compile when it was recorded."""
    head = f"| {bench.model} | {bench.device} | {bench.microbatch} | {bench.df}/{bench.fidelity} |"
    if figures is None:
        return f"{head} does not compile yet | {bench.silicon:,.0f} | | | | | |"
    estimate = figures["samples_per_s"]
    return (f"{head} {estimate:,.1f} | {bench.silicon:,.0f} | {estimate / bench.silicon:.2f}x | {figures['epochs']} "
            f"| {figures['cores']} | {figures['bound_ratio']:.2f}x | {figures['compile_s']:.0f} |")


def table(figures: dict[str, dict]) -> str:
    """The Markdown table of every published row, from figures by perf-case key."""
    keys = [PerfCase(b.model, b.device, b.microbatch, b.df, b.fidelity).key for b in PUBLISHED]
    return "\n".join([HEADER, *(row(b, figures.get(k)) for b, k in zip(PUBLISHED, keys))])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--measure", action="store_true", help="compile every row now instead of reading the baseline")
    args = parser.parse_args()
    if args.measure:
        cases = [PerfCase(b.model, b.device, b.microbatch, b.df, b.fidelity) for b in PUBLISHED]
        print(table({c.key: measure(c) for c in cases}))
    else:
        print(table(load_baseline()))


if __name__ == "__main__":
    main()
