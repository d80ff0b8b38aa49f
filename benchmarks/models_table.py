"""The "models users bring" table of docs/models.md: per architecture of `pybuda.tools.families`, whether it
compiles for e150 at Float16_b, the simulated PCC against PyTorch, epochs, max cores per epoch, compile seconds,
and for a failure the first line of its error. Prints Markdown rows.

    PYTHONPATH=. python benchmarks/models_table.py                      # every architecture
    PYTHONPATH=. python benchmarks/models_table.py --model swin --model t5_encoder
"""
from __future__ import annotations

import argparse
import tempfile
import time

import torch

import pybuda
from pybuda.tools.families import FAMILIES
from pybuda.verify import pcc


def _first(out) -> torch.Tensor:
    """The first output tensor of a model (HF models return ModelOutput tuples)."""
    return out if isinstance(out, torch.Tensor) else out[0]


def row(name: str, device: str = "e150", microbatch: int = 1) -> str:
    """One Markdown row: the architecture compiled and simulated, or the first line of the error it fails with."""
    entry = FAMILIES[name]
    start = time.perf_counter()
    try:
        model, inputs = entry.build(), entry.inputs(microbatch)
        with torch.no_grad():
            expected = _first(model(*inputs)).numpy()
        with tempfile.TemporaryDirectory() as out:
            compiled = pybuda.compile(model, *inputs, device=device, output_dir=out)
            score = pcc(_first(compiled(*inputs)).numpy(), expected)
    except Exception as e:  # noqa: BLE001  (a failing model is a row, not the end of the table)
        first = str(e).splitlines()[0] if str(e) else ""
        return f"| {name} | no | | | | {time.perf_counter() - start:.1f} | {type(e).__name__}: {first[:200]} |"
    seconds = time.perf_counter() - start
    epochs = compiled.perf.epochs
    return (f"| {name} | yes | {score:.5f} | {len(epochs)} | {max(e.cores for e in epochs)} | "
            f"{seconds:.1f} | |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", action="append", choices=sorted(FAMILIES))
    parser.add_argument("--device", default="e150")
    args = parser.parse_args()
    print("| architecture | compiles | PCC Float16_b | epochs | max cores/epoch | compile+run s | failure |")
    print("|---|---|---|---|---|---|---|")
    for name in args.model or FAMILIES:
        print(row(name, args.device), flush=True)


if __name__ == "__main__":
    main()
