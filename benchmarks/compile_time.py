"""Compile time per stage: the MNIST CNN (batch 64) and the test MLP, each compiled `--repeat` times
(the best run is reported; the first MNIST run also includes torch.export's warm-up)."""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))

import pybuda  # noqa: E402
from pybuda.tools.models import MNISTCNN  # noqa: E402
from models import MLP  # noqa: E402


def measure(label: str, make_model, inputs, repeat: int, device: str) -> None:
    runs = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as out:
            start = time.perf_counter()
            compiled = pybuda.compile(make_model(), *inputs, device=device, output_dir=out)
            total = time.perf_counter() - start
        runs.append((total, compiled.stage_times))
    best_total, best = min(runs, key=lambda r: r[0])
    stages = "  ".join(f"{k} {v:.3f}" for k, v in best.items())
    print(f"{label:<10} {device:<5} total {best_total:6.3f} s   {stages}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--device", default="e150")
    args = parser.parse_args()
    torch.manual_seed(0)
    print("seconds per stage (best of", args.repeat, "runs)")
    measure("mnist_cnn", lambda: MNISTCNN().eval(), (torch.randn(64, 1, 28, 28),), args.repeat, args.device)
    measure("mlp", MLP, (torch.randn(64, 16, 64),), args.repeat, args.device)


if __name__ == "__main__":
    main()
