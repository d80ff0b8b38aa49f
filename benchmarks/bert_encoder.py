"""The BERT-base encoder stack against the legacy compiler's netlist of it, both estimated by our simulator.

`graph_tests__netlists__bert_base_inference.yaml` (shared/netlists/real) is the legacy PyBuda compiler's netlist of
12 BERT-base encoder layers (sequence 128, hidden 768; inputs: hidden states and an additive attention mask, read
from DRAM queues; output to the host) for e150 at input_count 128 in Bfp8_b with LoFi. This script compiles the same
stack (`pybuda.tools.models.BertEncoderStack`, random weights) at the same configuration with t-streaming and fusion
off and on, and prints each estimate next to the legacy netlist's and the ratio.

    PYTHONPATH=. python benchmarks/bert_encoder.py [--corpus DIR] [--microbatch 128]
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import torch

import pybuda
from pybuda.backend_sim import estimate
from pybuda.netlist import load
from pybuda.tools.models import BertEncoderStack
from pybuda.tools.shared import REAL_NETLISTS

LEGACY = "graph_tests__netlists__bert_base_inference.yaml"
DEFAULT_CORPUS = REAL_NETLISTS


def compile_stack(microbatch: int, streaming: bool, fusion: bool):
    """The encoder stack compiled for e150 at the legacy netlist's configuration; (perf, epochs, seconds)."""
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


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    ap.add_argument("--microbatch", type=int, default=128)
    args = ap.parse_args(argv)
    legacy = estimate(load(str(args.corpus / LEGACY)))
    print(f"legacy netlist {LEGACY}: {legacy.samples_per_second:,.1f} samples/s, {len(legacy.epochs)} epochs "
          f"(our simulator)")
    print("| this compiler | epochs | max cores/epoch | estimate samples/s | vs legacy netlist | compile s |")
    print("|---|---|---|---|---|---|")
    for label, streaming, fusion in (("streaming and fusion off", False, False), ("streaming and fusion on", True, True)):
        perf, seconds = compile_stack(args.microbatch, streaming, fusion)
        print(f"| {label} | {len(perf.epochs)} | {max(e.cores for e in perf.epochs)} | "
              f"{perf.samples_per_second:,.1f} | {perf.samples_per_second / legacy.samples_per_second:.2f}x | "
              f"{seconds:.1f} |", flush=True)


if __name__ == "__main__":
    main()
