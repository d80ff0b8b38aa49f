"""The figures of docs/user_guide.md: a screenshot of the MNIST demo's HTML report (headless chromium).

    PYTHONPATH=. python scripts/docs_figures.py [--out docs/images]
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("docs/images"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    print(report_screenshot(args.out))


if __name__ == "__main__":
    main()
