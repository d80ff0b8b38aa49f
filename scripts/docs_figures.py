"""The figures of docs/user_guide.md: a screenshot of the MNIST demo's HTML report (headless chromium) and the plot
of a sweep of the fast-tier zoo on Ray (3 microbatches x 2 formats on e150).

    PYTHONPATH=. python scripts/docs_figures.py [--out docs/images] [--only report|sweep]
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

import torch

import pybuda
from pybuda.tools.models import MNISTCNN


def report_screenshot(out: Path) -> Path:
    """Compile the demo's MNIST CNN, write its report and screenshot it searching for its matmuls."""
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("chromium is not installed (make browser installs it)")
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        compiled = pybuda.compile(MNISTCNN().eval(), torch.randn(64, 1, 28, 28), device="e150", output_dir=tmp)
        page = compiled.report(Path(tmp) / "report.html")
        shot = Path(tmp) / "report.png"
        subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        "--window-size=1280,1500", f"--screenshot={shot}", page.as_uri() + "#search=matmul"],
                       check=True, capture_output=True, timeout=120)
        target = out / "report.png"
        shutil.copyfile(shot, target.with_suffix(".tmp"))
        os.replace(target.with_suffix(".tmp"), target)
    return target


def sweep_plot(out: Path) -> Path:
    """Sweep the fast-tier zoo (microbatch 1, 4, 16; Float16_b and Bfp8_b; e150) on local Ray; its plot."""
    from pybuda.tools.sweep import best_per_model, run_sweep, sweep_points
    from pybuda.tools.zoo import ZOO
    models = [name for name, m in ZOO.items() if not m.full_size]
    with tempfile.TemporaryDirectory() as tmp:
        rows = run_sweep(sweep_points(models, ["e150"], [1, 4, 16], ["Float16_b", "Bfp8_b"], ["HiFi3"]), tmp)
        for model, r in best_per_model(rows).items():
            print(f"{model}: best microbatch {r['microbatch']} {r['df']}: {float(r['samples_per_s']):,.1f} samples/s")
        target = out / "sweep.png"
        shutil.copyfile(Path(tmp) / "samples_per_s.png", target.with_suffix(".tmp"))
        os.replace(target.with_suffix(".tmp"), target)
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/images"))
    parser.add_argument("--only", choices=("report", "sweep"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.only in (None, "report"):
        print(report_screenshot(args.out))
    if args.only in (None, "sweep"):
        print(sweep_plot(args.out))


if __name__ == "__main__":
    main()
