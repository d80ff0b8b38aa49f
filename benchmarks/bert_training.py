"""BERT-base (the 12-layer encoder stack, sequence 128) compiled for training on e150 and n150, against the legacy
compiler's training netlist of it, all estimated by our simulator.

`graph_tests__netlists__bert_base_training.yaml` (shared/netlists/real) is the legacy PyBuda compiler's training
netlist of BERT-base for grayskull at microbatch 64 in Float16_b with HiFi3. This script compiles
`pybuda.tools.models.BertEncoderStack` (random weights) for training with SGD at the same configuration, validates
the netlist (compile does), runs one training step in the simulator unless `--no-step`, and prints per device the
forward / backward / optimizer epochs, the estimated training samples/s (one step of one microbatch: run_fwd +
run_bwd + run_opt) and the compile seconds.

    PYTHONPATH=. python benchmarks/bert_training.py [--microbatch 64] [--devices e150 n150] [--no-step]
"""
from __future__ import annotations

import argparse
import tempfile
import time

import torch

import pybuda
from pybuda.backend_sim import estimate
from pybuda.netlist import load
from pybuda.optimizers import SGD
from pybuda.tools.models import BertEncoderStack
from pybuda.tools.shared import real_netlist

LEGACY = real_netlist("graph_tests__netlists__bert_base_training.yaml")


def step_estimate(netlist) -> tuple[float, int]:
    """Samples/s of one training step of one microbatch (run_fwd + run_bwd + run_opt) and the epochs."""
    reports = [estimate(netlist, program=p) for p in ("run_fwd", "run_bwd", "run_opt")]
    samples = reports[0].samples
    return samples / sum(r.seconds for r in reports), sum(len(r.epochs) for r in reports)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--microbatch", type=int, default=64)
    ap.add_argument("--devices", nargs="+", default=["e150", "n150"])
    ap.add_argument("--no-step", action="store_true", help="do not run a training step in the simulator")
    args = ap.parse_args(argv)
    if LEGACY.exists():
        legacy, epochs = step_estimate(load(str(LEGACY)))
        print(f"legacy netlist {LEGACY.name}: {legacy:,.1f} training samples/s, {epochs} epochs (our simulator)")
    print("| device | epochs fwd / bwd / opt | ops | training samples/s | compile s | step in the simulator |")
    print("|---|---|---|---|---|---|")
    for device in args.devices:
        torch.manual_seed(0)
        model = BertEncoderStack().eval()
        mb = args.microbatch
        inputs = (torch.randn(mb, 128, 768), torch.zeros(mb, 1, 128))
        targets = torch.randn(mb, 128, 768)
        config = pybuda.CompilerConfig(default_df_override="Float16_b", default_math_fidelity="HiFi3")
        with tempfile.TemporaryDirectory() as out:
            start = time.perf_counter()
            compiled = pybuda.compile(model, *inputs, device=device, config=config, output_dir=out,
                                      loss=torch.nn.MSELoss(), optimizer=SGD(1e-3), sample_targets=targets)
            seconds = time.perf_counter() - start
        kinds = [g.split("_")[0] for g in compiled.netlist.graphs]
        split = " / ".join(str(kinds.count(k)) for k in ("fwd", "bwd", "opt"))
        step = "not run"
        if not args.no_step:
            start = time.perf_counter()
            loss = compiled.train_step(*inputs, targets=targets)
            step = f"loss {loss:.4f}, {time.perf_counter() - start:.0f} s"
        print(f"| {device} | {split} | {len(compiled.netlist.ops)} | {compiled.perf.samples_per_second:,.1f} | "
              f"{seconds:.1f} | {step} |", flush=True)


if __name__ == "__main__":
    main()
