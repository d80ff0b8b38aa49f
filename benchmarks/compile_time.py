"""Compile time per stage, peak memory and the ratio of the whole compile to the TVM import alone
(torch.export + from_exported_program), per zoo model. Each model runs in its own process so that peak
memory (max RSS) is the model's own.

    python benchmarks/compile_time.py              # fast tier (small configurations) + the MNIST CNN
    python benchmarks/compile_time.py --full       # full-size zoo (BERT-base/large at 128 and 384, GPT-2, ViT)
    python benchmarks/compile_time.py --model bert_large_384 --device n150
Targets (issue 5): ratio <= 4 for BERT-base; BERT-large at sequence 384 in <= 60 s; peak memory <= 4 GB."""
from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time


def measure(name: str, device: str, microbatch: int) -> dict:
    import torch
    from tvm.relax.frontend.torch import from_exported_program

    import pybuda
    from pybuda.tools.zoo import ZOO

    entry = ZOO[name]
    model, inputs = entry.build(), entry.inputs(microbatch)
    one = tuple(x[:1] for x in inputs)
    with torch.no_grad():  # warm-up: the first torch.export in a process pays one-off costs
        torch.export.export(model, one)
    start = time.perf_counter()
    with torch.no_grad():
        program = torch.export.export(model, one).run_decompositions()
        from_exported_program(program, keep_params_as_input=True, run_ep_decomposition=False)
    tvm_import = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        compiled = pybuda.compile(model, *inputs, device=device, output_dir=out)
        total = time.perf_counter() - start
    return {"model": name, "device": device, "total_s": total, "tvm_import_s": tvm_import,
            "ratio": total / tvm_import, "stages": compiled.stage_times, "epochs": compiled.placement.epochs,
            "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--full", action="store_true", help="the full-size zoo instead of the fast tier")
    parser.add_argument("--model", action="append", help="zoo model name (repeatable)")
    parser.add_argument("--device", default="e150")
    parser.add_argument("--microbatch", type=int, default=1)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.model[0], args.device, args.microbatch)))
        return
    from pybuda.tools.zoo import ZOO

    names = args.model or [n for n, m in ZOO.items() if m.full_size == args.full]
    print(f"{'model':<16}{'device':<7}{'total s':>8}{'import s':>9}{'ratio':>7}{'epochs':>7}{'peak MB':>9}   stages (s)")
    for name in names:
        cmd = [sys.executable, __file__, "--child", "--model", name, "--device", args.device,
               "--microbatch", str(args.microbatch)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            print(f"{name:<16}{args.device:<7} failed: {proc.stderr.strip().splitlines()[-1]}")
            continue
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        stages = "  ".join(f"{k} {v:.2f}" for k, v in r["stages"].items())
        print(f"{name:<16}{r['device']:<7}{r['total_s']:>8.2f}{r['tvm_import_s']:>9.2f}{r['ratio']:>7.2f}"
              f"{r['epochs']:>7}{r['peak_mb']:>9.0f}   {stages}")


if __name__ == "__main__":
    main()
