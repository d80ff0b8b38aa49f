"""The BERT-base encoder stack against the legacy compiler's netlists of it, all estimated by our simulator.

The baseline is the backend team's own netlist of the model,
`perf_lib__graph_tests__grayskull__inference__bert_base_lofi_bfp8b_v3.yaml` (shared/netlists/calibration: 12
BERT-base encoder layers, sequence 128, hidden 768, e150, input_count 128, Bfp8_b, LoFi; fused, weights
prologued). The legacy PyBuda compiler's older netlist of the same stack, `graph_tests__netlists__bert_base_inference
.yaml` (shared/netlists/real: no fusion, weights streamed from DRAM every input), is the second row. This script
compiles the same stack (`pybuda.tools.models.BertEncoderStack`, random weights, inputs in DRAM) at the same
configuration with t-streaming and fusion off and on, prints each estimate and its ratio to the baseline, then
every side's epochs with what limits each (its slowest op and its limiter: kernel, DRAM, a NoC link, ...).

    PYTHONPATH=. python benchmarks/bert_encoder.py [--microbatch 128] [--no-epochs]
"""
from __future__ import annotations

import argparse
import tempfile
import time

import torch

import pybuda
from pybuda.backend_sim import estimate
from pybuda.backend_sim.report import limiter_text
from pybuda.netlist import load
from pybuda.tools.models import BertEncoderStack
from pybuda.tools.shared import CALIBRATION_NETLISTS, REAL_NETLISTS

BASELINE = CALIBRATION_NETLISTS / "perf_lib__graph_tests__grayskull__inference__bert_base_lofi_bfp8b_v3.yaml"
OLD_LEGACY = REAL_NETLISTS / "graph_tests__netlists__bert_base_inference.yaml"


def compile_stack(microbatch: int, streaming: bool, fusion: bool):
    """The encoder stack compiled for e150 at the baseline's configuration; (perf, seconds)."""
    torch.manual_seed(0)
    model = BertEncoderStack().eval()
    inputs = (torch.randn(microbatch, 128, 768), torch.zeros(microbatch, 1, 128))
    config = pybuda.CompilerConfig(default_df_override="Bfp8_b", default_math_fidelity="LoFi",
                                   input_queues_on_host=False, enable_t_streaming=streaming,
                                   enable_auto_fusing=fusion)
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        compiled = pybuda.compile(model, *inputs, device="e150", config=config, output_dir=out)
        seconds = time.perf_counter() - start
    return compiled.perf, seconds


def epoch_lines(label: str, perf) -> list[str]:
    """One line per epoch: cores, pipeline cycles per input, its slowest op and what limits that op."""
    lines = [f"{label}: {len(perf.epochs)} epochs"]
    for e in perf.epochs:
        slow = next((o for o in e.ops if o.name == e.slowest_op), None)
        what = f"{slow.name} ({slow.type} {slow.grid[0]}x{slow.grid[1]}): {limiter_text(slow)}" if slow else ""
        lines.append(f"  epoch {e.index:>2}  {e.cores:>3} cores  {e.pipeline_cycles:>9,.0f} cycles/input  {what}")
    return lines


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--microbatch", type=int, default=128)
    ap.add_argument("--no-epochs", action="store_true", help="print only the table")
    args = ap.parse_args(argv)
    baseline, old = estimate(load(str(BASELINE))), estimate(load(str(OLD_LEGACY)))
    print("| netlist | epochs | max cores/epoch | estimate samples/s | vs v3 netlist | compile s |")
    print("|---|---|---|---|---|---|")
    for label, perf in ((f"legacy v3: {BASELINE.name}", baseline), (f"legacy old: {OLD_LEGACY.name}", old)):
        print(f"| {label} | {len(perf.epochs)} | {max(e.cores for e in perf.epochs)} | "
              f"{perf.samples_per_second:,.1f} | {perf.samples_per_second / baseline.samples_per_second:.2f}x | |")
    ours = []
    for label, streaming, fusion in (("ours, streaming and fusion off", False, False),
                                     ("ours, streaming and fusion on", True, True)):
        perf, seconds = compile_stack(args.microbatch, streaming, fusion)
        ours.append((label, perf))
        print(f"| {label} | {len(perf.epochs)} | {max(e.cores for e in perf.epochs)} | "
              f"{perf.samples_per_second:,.1f} | {perf.samples_per_second / baseline.samples_per_second:.2f}x | "
              f"{seconds:.1f} |", flush=True)
    if not args.no_epochs:
        for label, perf in (("legacy v3", baseline), ("legacy old", old), *ours):
            print()
            print("\n".join(epoch_lines(label, perf)))


if __name__ == "__main__":
    main()
