"""Estimates against silicon (reference/silicon/README.md): how far to trust the estimate.

Prints three Markdown tables:
1. the legacy calibration netlists: our estimate as the netlist is written and at the microbatch of the published
   run, the silicon figure (a range where the configuration was not measured as such), the ratio estimate /
   silicon and the limiter of the slowest epoch;
2. zoo models compiled by this compiler at the published configuration (device, microbatch, data format, math
   fidelity of the benchmark table): `published_table.py --measure`;
3. the per-op error table against the silicon sweeps (benchmarks/silicon_ops.py).

    PYTHONPATH=. python benchmarks/silicon.py [--root DIR] [--model NAME ...] [--no-zoo] [--no-ops]
"""
from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from pybuda.backend_sim import estimate
from pybuda.netlist import load
from pybuda.tools.shared import CALIBRATION_NETLISTS

import published_table
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
        print(published_table.table(published_table.measured(args.model), args.model))
    if not args.no_ops:
        print()
        silicon_ops.main([])


if __name__ == "__main__":
    main()
