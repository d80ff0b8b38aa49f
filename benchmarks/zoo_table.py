"""The table of docs/models.md: per zoo model and device, epochs, cores, estimated samples/s, simulated PCC
against PyTorch at Float16_b/HiFi3 and at Bfp8_b/LoFi, and compile seconds. Prints Markdown rows.

    python benchmarks/zoo_table.py                  # fast tier
    python benchmarks/zoo_table.py --full           # full-size zoo (long: the simulator runs every model)
    python benchmarks/zoo_table.py --compare        # PCC with t-streaming and fusion off vs on (both formats),
                                                    # compared as printed (5 decimals at Float16_b, 4 at Bfp8_b)
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


FORMATS = ({}, {"default_df_override": "Bfp8_b", "default_math_fidelity": "LoFi"})
OFF = {"enable_t_streaming": False, "enable_auto_fusing": False}


def _run(model, inputs, device: str, options: dict, expected) -> tuple:
    """(perf, compile seconds, PCC of the first output) of one compile and simulated run."""
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        compiled = pybuda.compile(model, *inputs, device=device, config=pybuda.CompilerConfig(**options),
                                  output_dir=out)
        seconds = time.perf_counter() - start
        got = _first(compiled(*inputs)).numpy()
        return compiled.perf, seconds, pcc(got, expected)


def row(name: str, device: str, microbatch: int, compare: bool) -> str:
    entry = ZOO[name]
    model, inputs = entry.build(), entry.inputs(microbatch)
    with torch.no_grad():
        expected = _first(model(*inputs)).numpy()
    if compare:
        p16, p8 = ([round(_run(model, inputs, device, {**fmt, **mode}, expected)[2], digits) for mode in (OFF, {})]
                   for fmt, digits in zip(FORMATS, (5, 4)))
        return (f"| {name} | {device} | {microbatch} | {p16[0]:.5f} | {p16[1]:.5f} | {p8[0]:.4f} | {p8[1]:.4f} | "
                f"{'yes' if p16[1] >= p16[0] and p8[1] >= p8[0] else 'no'} |")
    (perf, seconds, p16), (_, _, p8) = (_run(model, inputs, device, fmt, expected) for fmt in FORMATS)
    cores = max(e.cores for e in perf.epochs)
    return (f"| {name} | {device} | {microbatch} | {len(perf.epochs)} | {cores} | {perf.samples_per_second:,.1f} | "
            f"{p16:.5f} | {p8:.4f} | {seconds:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true")
    parser.add_argument("--model", action="append")
    parser.add_argument("--microbatch", type=int, default=2)
    parser.add_argument("--compare", action="store_true", help="PCC with t-streaming and fusion off vs on")
    args = parser.parse_args()
    names = args.model or [n for n, e in ZOO.items() if e.full_size == args.full]
    if args.compare:
        print("| model | device | microbatch | PCC Float16_b off | on | PCC Bfp8_b/LoFi off | on | on >= off |")
        print("|---|---|---|---|---|---|---|---|")
    else:
        print("| model | device | microbatch | epochs | max cores/epoch | est. samples/s | PCC Float16_b | "
              "PCC Bfp8_b/LoFi | compile s |")
        print("|---|---|---|---|---|---|---|---|---|")
    for name in names:
        for device in ("e150", "n150"):
            try:
                print(row(name, device, args.microbatch, args.compare), flush=True)
            except Exception as e:  # noqa: BLE001  (a failing model is a row, not the end of the table)
                print(f"| {name} | {device} | fails: {type(e).__name__}: {str(e).splitlines()[0][:120]} |", flush=True)


if __name__ == "__main__":
    main()
