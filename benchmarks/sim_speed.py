"""Backend simulator speed on the legacy BERT-base netlist (issue 4).

Prints
- the numeric run time of one microbatch (input_count inputs, every epoch of the program once) with random
  stimulus for every host queue and every parameter ram (stimulus generation is not timed),
- the time of a torch eager fp32 forward of a BERT-base encoder with the same shapes (transformers BertConfig /
  BertModel encoder with random weights, nothing downloaded; dimensions read from the netlist),
- their ratio (target <= 3) and the estimate-only time (parse + estimate, target <= 1 s).

    python benchmarks/sim_speed.py [--netlist PATH] [--skip-numeric] [--skip-torch]
"""
from __future__ import annotations

import argparse
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from pybuda.backend_sim import Simulator, estimate  # noqa: E402
from pybuda.backend_sim.stimulus import default_params, fill_random, output_stats  # noqa: E402
from pybuda.netlist import load as load_netlist  # noqa: E402

# the shared checkout next to the repository
DEFAULT_NETLIST = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared",
                                                "netlists", "real", "graph_tests__netlists__bert_base_inference.yaml"))


def netlist_dims(nl) -> dict:
    """BERT dimensions of a PyBuda BERT netlist: batch (input_count), sequence, hidden, layers, heads, FFN size."""
    hidden_q = nl.queues.get("hidden_states") or max(
        (q for q in nl.queues.values() if q.host_fed and not q.is_ram),
        key=lambda q: q.element_shape[1] * q.element_shape[2])
    _, seq, hidden = hidden_q.element_shape
    layers = {int(m.group(1)) for name in nl.queues for m in [re.search(r"layer\.(\d+)\.", name)] if m}
    heads = 1
    for op in nl.ops.values():
        for tms in op.input_tms.values():
            for tm in tms:
                if tm[0] == "hslice":
                    heads = max(heads, int(tm[1]))
    ffn = hidden * 4
    for name, q in nl.queues.items():
        if name.endswith("intermediate.dense.weight"):
            ffn = q.element_shape[2]
            break
    first = nl.graphs[next(iter(nl.graphs))]
    return {"batch": first.input_count, "seq": seq, "hidden": hidden, "layers": len(layers) or 1, "heads": heads,
            "ffn": ffn}


def time_numeric(path: str, seed: int = 0) -> tuple[float, float, Simulator]:
    sim = Simulator(path)
    program = sim.netlist.programs[0].name
    start = time.perf_counter()
    fill_random(sim, seed, programs=[program])
    setup = time.perf_counter() - start
    params = default_params(sim.netlist, program)
    start = time.perf_counter()
    sim.run(program, **params)
    return time.perf_counter() - start, setup, sim


def time_torch(dims: dict, repeat: int = 1) -> float:
    import torch
    from transformers import BertConfig, BertModel

    torch.manual_seed(0)
    cfg = BertConfig(hidden_size=dims["hidden"], num_hidden_layers=dims["layers"],
                     num_attention_heads=dims["heads"], intermediate_size=dims["ffn"],
                     max_position_embeddings=max(512, dims["seq"]))
    encoder = BertModel(cfg).encoder.eval()
    x = torch.randn(dims["batch"], dims["seq"], dims["hidden"])
    best = float("inf")
    with torch.no_grad():
        encoder(x[:2])  # warm-up
        for _ in range(repeat):
            start = time.perf_counter()
            encoder(x)
            best = min(best, time.perf_counter() - start)
    return best


def time_estimate(path: str, repeat: int = 3) -> tuple[float, object]:
    best = float("inf")
    report = None
    for _ in range(repeat):
        start = time.perf_counter()
        report = estimate(load_netlist(path))
        best = min(best, time.perf_counter() - start)
    return best, report


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--netlist", default=DEFAULT_NETLIST)
    ap.add_argument("--skip-numeric", action="store_true")
    ap.add_argument("--skip-torch", action="store_true")
    ap.add_argument("--torch-repeat", type=int, default=1)
    args = ap.parse_args(argv)

    nl = load_netlist(args.netlist)
    dims = netlist_dims(nl)
    print(f"netlist {os.path.basename(args.netlist)}: {len(nl.graphs)} graphs, {len(nl.ops)} ops; BERT dims {dims}")

    est_s, report = time_estimate(args.netlist)
    print(f"estimate only (parse + estimate): {est_s:.3f} s  (target <= 1 s)  -> "
          f"{report.samples_per_second:,.1f} samples/s on {report.device}")

    sim_s = torch_s = None
    if not args.skip_numeric:
        sim_s, setup_s, sim = time_numeric(args.netlist)
        stats = output_stats(sim)
        print(f"numeric run, one microbatch ({dims['batch']} inputs, {len(sim.executed)} epochs): {sim_s:.1f} s "
              f"(stimulus setup {setup_s:.1f} s, not timed)")
        for s in stats.values():
            print(f"  output {s.queue}: {s.entries} x {s.shape}  mean {s.mean:.4g}  std {s.std:.4g}  "
                  f"nan {s.nan}")
    if not args.skip_torch:
        torch_s = time_torch(dims, args.torch_repeat)
        print(f"torch eager fp32 BERT encoder forward (batch {dims['batch']}, seq {dims['seq']}): {torch_s:.1f} s")
    if sim_s is not None and torch_s is not None:
        print(f"ratio numeric / torch: {sim_s / torch_s:.2f}  (target <= 3)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
