"""PCC of the simulated netlist against PyTorch per data format and math fidelity, for the fast-tier zoo
models: the measurements behind `pybuda.verify.NETLIST_PCC_THRESHOLDS` (verify=True fails a netlist whose PCC
is below its least precise format's threshold). Prints one Markdown row per model and format, then the lowest
PCC per format.

    python benchmarks/format_pcc.py                          # every format, HiFi3 and LoFi
    python benchmarks/format_pcc.py --model mnist_cnn --format Bfp2_b
"""
from __future__ import annotations

import argparse
import tempfile

import torch
from torch.utils import _pytree as pytree

import pybuda
from pybuda.tools.zoo import ZOO
from pybuda.verify import NETLIST_PCC_THRESHOLDS, least_precise_format, pcc

FORMATS = ("Float32", "Float16", "Float16_b", "Bfp8", "Bfp8_b", "Bfp4_b", "Bfp2_b")
FIDELITIES = ("HiFi3", "LoFi")


def measure(name: str, df: str, fidelity: str, microbatch: int) -> tuple[str, float]:
    """The least precise format of the compiled netlist and the worst output PCC against torch."""
    entry = ZOO[name]
    model, inputs = entry.build(), entry.inputs(microbatch)
    with torch.no_grad():
        expected = pytree.tree_leaves(model(*inputs))
    config = pybuda.CompilerConfig(default_df_override=df, default_math_fidelity=fidelity)
    with tempfile.TemporaryDirectory() as out:
        compiled = pybuda.compile(model, *inputs, device="e150", config=config, output_dir=out)
        got = pytree.tree_leaves(compiled(*inputs))
    return least_precise_format(compiled.netlist).value, min(pcc(g.numpy(), e.numpy()) for g, e in zip(got, expected))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", help="zoo model (default: the fast tier)")
    parser.add_argument("--format", action="append", choices=FORMATS)
    parser.add_argument("--fidelity", action="append", choices=FIDELITIES)
    parser.add_argument("--microbatch", type=int, default=2)
    args = parser.parse_args()
    models = args.model or [n for n, m in ZOO.items() if not m.full_size]
    lowest: dict[str, float] = {}
    print("| model | default_df_override | fidelity | least precise format | PCC |\n|---|---|---|---|---|")
    for name in models:
        for df in args.format or FORMATS:
            for fidelity in args.fidelity or FIDELITIES:
                fmt, value = measure(name, df, fidelity, args.microbatch)
                lowest[fmt] = min(lowest.get(fmt, 1.0), value)
                print(f"| {name} | {df} | {fidelity} | {fmt} | {value:.4f} |", flush=True)
    print("\n| least precise format | lowest PCC | threshold |\n|---|---|---|")
    for fmt, value in sorted(lowest.items(), key=lambda kv: _order(kv[0])):
        print(f"| {fmt} | {value:.4f} | {NETLIST_PCC_THRESHOLDS[pybuda.DataFormat(fmt)]} |")


def _order(fmt: str) -> int:
    return list(NETLIST_PCC_THRESHOLDS).index(pybuda.DataFormat(fmt))


if __name__ == "__main__":
    main()
