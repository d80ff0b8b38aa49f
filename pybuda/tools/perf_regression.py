"""Performance regression runner: compiles zoo models at fixed configurations and compares the balancer's plan
(estimated cycles, samples/s, epochs, cores, lower bound) with a checked-in baseline (`benchmarks/perf_baseline.json`).

The estimate is deterministic (same model and config, same plan), so any change is a change of the compiler: a
plan more than `TOLERANCE` slower than its baseline is a regression (exit status 1); a faster one is reported as
an improvement to record with `--update`; a netlist whose bytes changed (sha256) is reported. Compile time is
recorded too, in seconds and in units of a fixed reference workload timed just before each compile
(`reference_seconds`: this machine's speed at that moment, which tempers, not removes, the effect of other
tenants); a compile more than `COMPILE_TOLERANCE` slower in those units is a regression as well (compiles the
baseline took less than `MIN_COMPILE_S` for are not compared: on a shared machine they vary more than that).

    python -m pybuda.tools.perf_regression                  # the fast tier (tiny zoo models, e150 and n150)
    python -m pybuda.tools.perf_regression --tier full      # the full-size BENCHMARKS configurations (slow)
    python -m pybuda.tools.perf_regression --tier published --model unet   # the published table's rows, one model
    python -m pybuda.tools.perf_regression --update         # write the measured figures as the new baseline
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import sys
import time
from pathlib import Path

import numpy as np

from pybuda.device import get_device
from pybuda.errors import UserInputError
from pybuda.files import write_atomically
from pybuda.tools.zoo import BENCHMARKS, PUBLISHED, ZOO, compile_zoo_model

BASELINE = Path(__file__).resolve().parents[2] / "benchmarks" / "perf_baseline.json"
TOLERANCE = 0.005          # a plan this much slower than its baseline is a regression
COMPILE_TOLERANCE = 0.25   # a compile this much slower (in reference units) than its baseline is a regression
MIN_COMPILE_S = 5.0        # shorter compiles are not compared: on a shared 2-core machine they vary more than that
FAST_MICROBATCH = 4
TIERS = ("fast", "full", "published")
REFERENCE_REPEATS = 5      # runs of the reference workload before each compile; the fastest is the unit


@dataclasses.dataclass(frozen=True)
class PerfCase:
    """One model at one configuration."""

    model: str
    device: str
    microbatch: int
    df: str | None = None
    fidelity: str | None = None

    @property
    def key(self) -> str:
        return f"{self.model}/{self.device}/mb{self.microbatch}" + (f"/{self.df}/{self.fidelity}" if self.df else "")


def cases(tier: str) -> list[PerfCase]:
    """The cases of a tier: "fast" (every fast-tier zoo model on e150 and n150), "full" (`zoo.BENCHMARKS`) or
    "published" (its rows of the published benchmark table, `zoo.PUBLISHED`)."""
    if tier == "fast":
        return [PerfCase(name, device, FAST_MICROBATCH) for name, entry in ZOO.items() if not entry.full_size
                for device in ("e150", "n150")]
    if tier in ("full", "published"):
        return [PerfCase(b.model, b.device, b.microbatch, b.df, b.fidelity)
                for b in (BENCHMARKS if tier == "full" else PUBLISHED)]
    raise UserInputError(f"unknown tier {tier!r}; legal: {', '.join(TIERS)}")


def reference_seconds(repeats: int = REFERENCE_REPEATS) -> float:
    """Seconds this machine takes right now for a fixed workload of the kinds a compile does (Python loops over
    dicts and small numpy arrays): the unit compile times are compared in. The least of `repeats` runs (one run
    of about 0.2 s varied by 10 % between consecutive compiles on a quiet machine)."""
    def once() -> float:
        start = time.perf_counter()
        table: dict[int, float] = {}
        rows = np.arange(512, dtype=float)
        for i in range(250_000):
            table[i % 997] = table.get(i % 997, 0.0) + float(np.maximum(rows[i % 512], 3.0))
        return time.perf_counter() - start
    return min(once() for _ in range(repeats))


def measure(case: PerfCase, policy: str = "default") -> dict:
    """Compile the case (no simulation) with balancer_policy `policy` and return its plan's figures and the
    seconds of the compile's stages (also in `reference_seconds` units)."""
    reference = reference_seconds()
    compiled = compile_zoo_model(case.model, case.device, case.microbatch, case.df, case.fidelity, policy)
    seconds = sum(compiled.stage_times.values())     # the compile's stages, not building the model
    placement = compiled.placement
    clock = get_device(case.device).clock_hz
    return {"estimated_cycles": int(placement.estimated_cycles),
            "samples_per_s": round(case.microbatch * clock / placement.estimated_cycles, 2),
            "epochs": placement.epochs,
            "cores": sum(m.cores for m in placement.models.values()),
            "lower_bound_cycles": placement.lower_bound_cycles,
            "bound_ratio": round(placement.estimated_cycles / placement.lower_bound_cycles, 3),
            "policy": placement.policy,
            "compile_s": round(seconds, 2),
            "compile_units": round(seconds / reference, 1),
            "netlist_sha256": hashlib.sha256("".join(compiled.runtime.netlist_texts).encode()).hexdigest()}


def compare(baseline: dict, measured: dict, compile_time: bool = True) -> tuple[list[str], list[str]]:
    """(regressions, notes): per case, a plan more than TOLERANCE slower than its baseline is a regression, and
    (with `compile_time`, where both have it) a compile more than COMPILE_TOLERANCE slower in reference units; a
    faster one, or a case without a baseline, a note."""
    regressions, notes = [], []
    for key, now in measured.items():
        was = baseline.get(key)
        if was is None:
            notes.append(f"{key}: no baseline ({now['estimated_cycles']:,} cycles)")
            continue
        ratio = now["estimated_cycles"] / was["estimated_cycles"]
        line = f"{key}: {was['estimated_cycles']:,} -> {now['estimated_cycles']:,} cycles ({ratio:.3f}x)"
        if ratio > 1 + TOLERANCE:
            regressions.append(line)
        elif ratio != 1:
            notes.append(line + (" improved: record it with --update" if ratio < 1 else ""))
        if None not in (was.get("netlist_sha256"), now.get("netlist_sha256")) and \
                was["netlist_sha256"] != now["netlist_sha256"]:
            notes.append(f"{key}: the netlist's bytes changed (sha256 {was['netlist_sha256'][:12]} -> "
                         f"{now['netlist_sha256'][:12]})")
        if compile_time and "compile_units" in was and "compile_units" in now and was["compile_s"] >= MIN_COMPILE_S:
            growth = now["compile_units"] / was["compile_units"]
            line = (f"{key}: compile {was['compile_units']} -> {now['compile_units']} reference units "
                    f"({now['compile_s']} s now, {growth:.2f}x)")
            if growth > 1 + COMPILE_TOLERANCE:
                regressions.append(line)
    return regressions, notes


def load_baseline(path: Path = BASELINE) -> dict:
    """The baseline figures by case key (empty if the file does not exist)."""
    return json.loads(path.read_text()) if path.exists() else {}


def _warm_up() -> None:
    """Pay the one-off costs of the process's first torch.export before any compile is timed."""
    import torch

    with torch.no_grad():
        torch.export.export(torch.nn.Linear(4, 4), (torch.randn(1, 4),))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tier", default="fast", choices=TIERS)
    parser.add_argument("--model", action="append", help="only this zoo model's cases (repeatable)")
    parser.add_argument("--update", action="store_true", help="write the measured figures as the baseline")
    parser.add_argument("--baseline", type=Path, default=BASELINE)
    args = parser.parse_args(argv)
    baseline = load_baseline(args.baseline)
    _warm_up()
    measured = {}
    for case in cases(args.tier):
        if args.model and case.model not in args.model:
            continue
        figures = measured[case.key] = measure(case)
        ratio = figures["estimated_cycles"] / figures["lower_bound_cycles"]
        print(f"{case.key:48s} {figures['estimated_cycles']:>14,} cycles {figures['samples_per_s']:>10,.1f} "
              f"samples/s  {figures['epochs']:>3} epochs  plan/bound {ratio:.2f}x  compile "
              f"{figures['compile_s']:.1f} s", flush=True)
    regressions, notes = compare(baseline, measured)
    for line in notes:
        print("note:", line)
    for line in regressions:
        print("REGRESSION:", line)
    if args.update:
        text = json.dumps({**baseline, **measured}, indent=1, sort_keys=True) + "\n"
        write_atomically(args.baseline, lambda f: f.write(text), binary=False)
        print(f"baseline written: {args.baseline}")
        return 0
    return 1 if regressions else 0


if __name__ == "__main__":
    sys.exit(main())
