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
from pybuda.dataformat import DataFormat
from pybuda.verify import NETLIST_PCC_THRESHOLDS, netlist_pcc_threshold, pcc

FORMATS = ("Float32", "Float16", "Float16_b", "Bfp8", "Bfp8_b", "Bfp4_b", "Bfp2_b")
FIDELITIES = ("HiFi3", "LoFi")


def measure(name: str, df: str, fidelity: str, microbatch: int) -> tuple[str, bool, float]:
    """The compiled netlist's least precise format, whether it computes at LoFi, and the worst output PCC
    against torch."""
    entry = ZOO[name]
    model, inputs = entry.build(), entry.inputs(microbatch)
    with torch.no_grad():
        expected = pytree.tree_leaves(model(*inputs))
    config = pybuda.CompilerConfig(default_df_override=df, default_math_fidelity=fidelity)
    with tempfile.TemporaryDirectory() as out:
        compiled = pybuda.compile(model, *inputs, device="e150", config=config, output_dir=out)
        got = pytree.tree_leaves(compiled(*inputs))
    fmt, lofi, _ = netlist_pcc_threshold(compiled.netlist)
    return fmt.value, lofi, min(pcc(g.numpy(), e.numpy()) for g, e in zip(got, expected))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", help="zoo model (default: the fast tier)")
    parser.add_argument("--format", action="append", choices=FORMATS)
    parser.add_argument("--fidelity", action="append", choices=FIDELITIES)
    parser.add_argument("--microbatch", type=int, default=2)
    args = parser.parse_args()
    models = args.model or [n for n, m in ZOO.items() if not m.full_size]
    lowest: dict[tuple[str, bool], tuple[float, str]] = {}
    print("| model | default_df_override | fidelity | least precise format | PCC |\n|---|---|---|---|---|")
    for name in models:
        for df in args.format or FORMATS:
            for fidelity in args.fidelity or FIDELITIES:
                fmt, lofi, value = measure(name, df, fidelity, args.microbatch)
                lowest[fmt, lofi] = min(lowest.get((fmt, lofi), (1.0, "")), (value, name))
                print(f"| {name} | {df} | {fidelity} | {fmt} | {value:.4f} |", flush=True)
    print("\n| least precise format | LoFi | lowest PCC (model) | threshold |\n|---|---|---|---|")
    order = list(NETLIST_PCC_THRESHOLDS)
    for (fmt, lofi), (value, name) in sorted(lowest.items(), key=lambda kv: (order.index(DataFormat(kv[0][0])),
                                                                               kv[0][1])):
        print(f"| {fmt} | {'yes' if lofi else 'no'} | {value:.4f} ({name}) | "
              f"{NETLIST_PCC_THRESHOLDS[DataFormat(fmt)][lofi]} |")


if __name__ == "__main__":
    main()
