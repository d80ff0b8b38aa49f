"""The published-table section of docs/models.md: per row of the legacy compiler's published benchmark table
(`pybuda.tools.zoo.PUBLISHED`), our estimate against what silicon measured, with epochs, cores, the plan's ratio
to its lower bound and compile seconds. Prints Markdown.

    PYTHONPATH=. python benchmarks/published_table.py              # from benchmarks/perf_baseline.json (instant)
    PYTHONPATH=. python benchmarks/published_table.py --measure    # compile every row now (about 30 minutes)
    PYTHONPATH=. python benchmarks/published_table.py --measure --model unet

The baseline holds the rows `python -m pybuda.tools.perf_regression --tier published --update` measured.
"""
from __future__ import annotations

import argparse

from pybuda.errors import PyBudaError
from pybuda.tools.perf_regression import PerfCase, load_baseline, measure
from pybuda.tools.zoo import PUBLISHED, BenchmarkConfig

HEADER = ("| model | device | microbatch | format | estimate samples/s | silicon samples/s | estimate / silicon | "
          "epochs | cores | plan / bound | compile s |\n|---|---|---|---|---|---|---|---|---|---|---|")


def _case(bench: BenchmarkConfig) -> PerfCase:
    return PerfCase(bench.model, bench.device, bench.microbatch, bench.df, bench.fidelity)


def _rows(models: list[str] | None) -> list[BenchmarkConfig]:
    return [b for b in PUBLISHED if not models or b.model in models]


def row(bench: BenchmarkConfig, figures: dict | None) -> str:
    """One Markdown row: the figures, the error a compile now failed with, or (a baseline without the row) that it
    did not compile when the baseline was recorded."""
    head = f"| {bench.model} | {bench.device} | {bench.microbatch} | {bench.df}/{bench.fidelity} |"
    if figures is None or "error" in figures:
        why = "does not compile yet" if figures is None else f"fails: {figures['error']}"
        return f"{head} {why} | {bench.silicon:,.0f} | | | | | |"
    estimate = figures["samples_per_s"]
    return (f"{head} {estimate:,.1f} | {bench.silicon:,.0f} | {estimate / bench.silicon:.2f}x | {figures['epochs']} "
            f"| {figures['cores']} | {figures['bound_ratio']:.2f}x | {figures['compile_s']:.0f} |")


def table(figures: dict[str, dict], models: list[str] | None = None) -> str:
    """The Markdown table of the published rows (of `models`; all by default), from figures by perf-case key."""
    return "\n".join([HEADER, *(row(b, figures.get(_case(b).key)) for b in _rows(models))])


def measured(models: list[str] | None = None) -> dict[str, dict]:
    """The figures of the published rows (of `models`) compiled now; a row whose compile fails holds its error."""
    figures = {}
    for bench in _rows(models):
        case = _case(bench)
        try:
            figures[case.key] = measure(case)
        except PyBudaError as e:
            figures[case.key] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"}
    return figures


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--measure", action="store_true", help="compile the rows now instead of reading the baseline")
    parser.add_argument("--model", action="append", help="only this zoo model's rows (repeatable)")
    args = parser.parse_args(argv)
    print(table(measured(args.model) if args.measure else load_baseline(), args.model))


if __name__ == "__main__":
    main()
