"""The table of docs/models.md: per zoo model and device, epochs, cores, estimated samples/s, simulated PCC
against PyTorch at Float16_b/HiFi3 and at Bfp8_b/LoFi, and compile seconds. Prints Markdown rows.

    python benchmarks/zoo_table.py                  # fast tier
    python benchmarks/zoo_table.py --full           # full-size zoo (long: the simulator runs every model)
"""
from __future__ import annotations

import argparse
import tempfile
import time

import torch

import pybuda
from pybuda.tools.zoo import ZOO
from pybuda.verify import pcc


def _first(out) -> torch.Tensor:
    """The first output tensor of a model (HF models return ModelOutput tuples)."""
    return out if isinstance(out, torch.Tensor) else out[0]


def row(name: str, device: str, microbatch: int) -> str:
    entry = ZOO[name]
    model, inputs = entry.build(), entry.inputs(microbatch)
    with torch.no_grad():
        expected = _first(model(*inputs)).numpy()
    cells = []
    for options in ({}, {"default_df_override": "Bfp8_b", "default_math_fidelity": "LoFi"}):
        with tempfile.TemporaryDirectory() as out:
            start = time.perf_counter()
            compiled = pybuda.compile(model, *inputs, device=device, config=pybuda.CompilerConfig(**options),
                                      output_dir=out)
            seconds = time.perf_counter() - start
            got = _first(compiled(*inputs)).numpy()
            perf = compiled.perf
        cells.append((perf, seconds, pcc(got, expected)))
    (perf, seconds, p16), (_, _, p8) = cells
    cores = max(e.cores for e in perf.epochs)
    return (f"| {name} | {device} | {microbatch} | {len(perf.epochs)} | {cores} | {perf.samples_per_second:,.1f} | "
            f"{p16:.5f} | {p8:.4f} | {seconds:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true")
    parser.add_argument("--model", action="append")
    parser.add_argument("--microbatch", type=int, default=2)
    args = parser.parse_args()
    names = args.model or [n for n, e in ZOO.items() if e.full_size == args.full]
    print("| model | device | microbatch | epochs | max cores/epoch | est. samples/s | PCC Float16_b | "
          "PCC Bfp8_b/LoFi | compile s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in names:
        for device in ("e150", "n150"):
            try:
                print(row(name, device, args.microbatch), flush=True)
            except Exception as e:  # noqa: BLE001  (a failing model is a row, not the end of the table)
                print(f"| {name} | {device} | fails: {type(e).__name__}: {str(e).splitlines()[0][:120]} |", flush=True)


if __name__ == "__main__":
    main()
