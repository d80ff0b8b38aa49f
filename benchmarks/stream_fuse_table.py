"""Full-size zoo models with t-streaming and fusion off vs on, at their benchmark configurations.

For each `pybuda.tools.zoo.BENCHMARKS` entry (the published benchmark table's microbatch, formats and fidelity
where it has the model), the model is compiled twice (enable_t_streaming and enable_auto_fusing both off, then
both on; compile and estimate only: no simulated numerics) and one Markdown row per mode prints epochs, the most
cores an epoch uses, ops, fused ops, ops streamed beyond their own t (t > their graph t: the t_stream stage's),
ops with t > 1, the estimate and the compile seconds.

    PYTHONPATH=. python benchmarks/stream_fuse_table.py [--model NAME ...] [--device e150|n150]
"""
from __future__ import annotations

import argparse
import tempfile
import time

import torch

import pybuda
from pybuda.tools.zoo import BENCHMARKS, ZOO, BenchmarkConfig

MODES = (("off", False), ("on", True))


def row(bench: BenchmarkConfig, on: bool) -> str:
    entry = ZOO[bench.model]
    model, inputs = entry.build(), entry.inputs(bench.microbatch)
    config = pybuda.CompilerConfig(default_df_override=bench.df, default_math_fidelity=bench.fidelity,
                                   enable_t_streaming=on, enable_auto_fusing=on)
    with tempfile.TemporaryDirectory() as out, torch.no_grad():
        start = time.perf_counter()
        compiled = pybuda.compile(model, *inputs, device=bench.device, config=config, output_dir=out)
        seconds = time.perf_counter() - start
    perf = compiled.perf
    ops = [op for nl in compiled.netlists for g in nl.graphs.values() for op in g.ops.values()]
    streamed = sum(1 for p in compiled.placements for m in p.models.values() if m.t_stream)
    return (f"| {bench.model} | {bench.device} | {bench.microbatch} | {bench.df}/{bench.fidelity} | "
            f"{'on' if on else 'off'} | {len(perf.epochs)} | {max(e.cores for e in perf.epochs)} | {len(ops)} | "
            f"{sum(op.type == 'fused_op' for op in ops)} | {streamed} | {sum(op.t > 1 for op in ops)} | "
            f"{perf.samples_per_second:,.1f} | {seconds:.0f} |")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", action="append", help="zoo models (default: every full-size one)")
    ap.add_argument("--device", action="append", help="devices (default: e150 and n150)")
    args = ap.parse_args(argv)
    print("| model | device | microbatch | formats | streaming + fusion | epochs | max cores/epoch | ops | fused ops | "
          "streamed ops | ops with t > 1 | est. samples/s | compile s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for bench in BENCHMARKS:
        if (args.model and bench.model not in args.model) or (args.device and bench.device not in args.device):
            continue
        for _, on in MODES:
            try:
                print(row(bench, on), flush=True)
            except Exception as e:  # noqa: BLE001  (a configuration that fails is a row, not the end of the table)
                print(f"| {bench.model} | {bench.device} | {bench.microbatch} | {bench.df}/{bench.fidelity} | "
                      f"{'on' if on else 'off'} | fails: {type(e).__name__}: {str(e).splitlines()[0][:150]} |",
                      flush=True)


if __name__ == "__main__":
    main()
