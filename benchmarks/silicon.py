"""Estimates against silicon (reference/silicon/README.md): how far to trust the estimate.

Prints three Markdown tables:
1. the legacy calibration netlists: our estimate as the netlist is written and at the microbatch of the published
   run, the silicon figure (a range where the configuration was not measured as such), the ratio estimate /
   silicon and the limiter of the slowest epoch;
2. zoo models compiled by this compiler at the published configuration (device, microbatch, data format, math
   fidelity of the benchmark table): our estimate, silicon, ratio, epochs and compile seconds;
3. the per-op error table against the silicon sweeps (benchmarks/silicon_ops.py).

    PYTHONPATH=. python benchmarks/silicon.py [--root DIR] [--model NAME ...] [--no-zoo] [--no-ops]
"""
from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path

import torch

import pybuda
from pybuda.backend_sim import estimate
from pybuda.netlist import load
from pybuda.tools.zoo import BENCHMARKS, ZOO, BenchmarkConfig
from pybuda.tools.shared import CALIBRATION_NETLISTS

import silicon_ops

DEFAULT_ROOT = CALIBRATION_NETLISTS


@dataclasses.dataclass(frozen=True)
class Calibration:
    """A legacy netlist of a published model, the silicon samples/s (low, high) and the published microbatch."""

    file: str
    silicon: tuple[float, float]
    published_microbatch: int


CALIBRATION = (
    Calibration("perf_lib__graph_tests__grayskull__inference__bert_large_lofi_bfp8b_v3.yaml", (99.0, 99.0), 64),
    Calibration("perf_lib__graph_tests__wormhole_b0__inference__resnet50_hifi3_fp16b.yaml", (1000.0, 2900.0), 64),
)


PUBLISHED = tuple(b for b in BENCHMARKS if b.silicon is not None)


def _ratio(value: float, low: float, high: float) -> str:
    return f"{value / low:.2f}" if low == high else f"{value / high:.2f}-{value / low:.2f}"


def calibration_table(root: Path) -> None:
    print("| netlist | device | estimate samples/s | at the published microbatch | silicon samples/s | "
          "estimate / silicon | slowest epoch limited by |")
    print("|---|---|---|---|---|---|---|")
    for cal in CALIBRATION:
        netlist = load(str(root / cal.file))
        report = estimate(netlist)
        for graph in netlist.graphs.values():
            graph.input_count = cal.published_microbatch
        published = estimate(netlist)
        slowest = max(report.epochs, key=lambda e: e.epoch_cycles * e.executions)
        low, high = cal.silicon
        silicon = f"{low:,.0f}" if low == high else f"{low:,.0f}-{high:,.0f}"
        print(f"| {cal.file.split('__')[-1]} | {report.device} | {report.samples_per_second:,.1f} | "
              f"{published.samples_per_second:,.1f} (mb {cal.published_microbatch}) | {silicon} | "
              f"{_ratio(report.samples_per_second, low, high)} | {slowest.limiter} ({slowest.slowest_op}) |")


def zoo_row(row: BenchmarkConfig) -> str:
    entry = ZOO[row.model]
    model, inputs = entry.build(), entry.inputs(row.microbatch)
    config = pybuda.CompilerConfig(default_df_override=row.df, default_math_fidelity=row.fidelity)
    with tempfile.TemporaryDirectory() as out, torch.no_grad():
        start = time.perf_counter()
        compiled = pybuda.compile(model, *inputs, device=row.device, config=config, output_dir=out)
        seconds = time.perf_counter() - start
    perf = compiled.perf
    return (f"| {row.model} | {row.device} | {row.microbatch} | {row.df}/{row.fidelity} | "
            f"{perf.samples_per_second:,.1f} | {row.silicon:,.0f} | {perf.samples_per_second / row.silicon:.2f} | "
            f"{len(perf.epochs)} | {seconds:.0f} |")


def zoo_table(models: list[str] | None) -> None:
    print("| zoo model | device | microbatch | formats | estimate samples/s | silicon samples/s | "
          "estimate / silicon | epochs | compile s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for row in PUBLISHED:
        if models and row.model not in models:
            continue
        try:
            print(zoo_row(row), flush=True)
        except Exception as e:  # noqa: BLE001  (a model that fails is a row, not the end of the table)
            print(f"| {row.model} | {row.device} | {row.microbatch} | {row.df}/{row.fidelity} | fails: "
                  f"{type(e).__name__}: {str(e).splitlines()[0][:120]} |", flush=True)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="folder of the calibration netlists")
    ap.add_argument("--model", action="append", help="zoo models to compile (default: every published one)")
    ap.add_argument("--no-zoo", action="store_true", help="skip compiling the zoo models")
    ap.add_argument("--no-ops", action="store_true", help="skip the per-op error table")
    args = ap.parse_args(argv)
    calibration_table(args.root)
    if not args.no_zoo:
        print()
        zoo_table(args.model)
    if not args.no_ops:
        print()
        silicon_ops.main([])


if __name__ == "__main__":
    main()
