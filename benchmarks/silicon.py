"""Whole-model estimates against silicon: the legacy calibration netlists (reference/silicon/README.md §3).

Prints, per netlist, our samples/s, the silicon figure (a range where the configuration was not measured as such),
the ratio estimate / silicon (to each end of a range) and the limiter of the slowest epoch.

    PYTHONPATH=. python benchmarks/silicon.py [--root DIR]
"""
from __future__ import annotations

import argparse
from pathlib import Path

from pybuda.backend_sim import estimate

DEFAULT_ROOT = Path("/work/shared/netlists/calibration")
SILICON = {   # netlist file -> samples/s measured on silicon (low, high)
    "perf_lib__graph_tests__grayskull__inference__bert_large_lofi_bfp8b_v3.yaml": (99.0, 99.0),
    "perf_lib__graph_tests__wormhole_b0__inference__resnet50_hifi3_fp16b.yaml": (1000.0, 2900.0),
}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", type=Path, default=DEFAULT_ROOT, help="folder of the calibration netlists")
    args = ap.parse_args(argv)
    print("| netlist | device | estimate samples/s | silicon samples/s | estimate / silicon | slowest epoch limited by |")
    print("|---|---|---|---|---|---|")
    for name, (low, high) in SILICON.items():
        report = estimate(str(args.root / name))
        slowest = max(report.epochs, key=lambda e: e.epoch_cycles * e.executions)
        silicon = f"{low:,.0f}" if low == high else f"{low:,.0f}-{high:,.0f}"
        ratio = report.samples_per_second / low
        ratios = f"{ratio:.2f}" if low == high else f"{report.samples_per_second / high:.2f}-{ratio:.2f}"
        print(f"| {name.split('__')[-1]} | {report.device} | {report.samples_per_second:,.1f} | {silicon} | {ratios} "
              f"| {slowest.limiter} ({slowest.slowest_op}) |")


if __name__ == "__main__":
    main()
