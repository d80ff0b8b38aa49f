"""`pybuda sim ...`: run a Buda netlist in the backend simulator, or estimate its performance.

    pybuda sim run NETLIST --random [--seed N] [--program P] [--param k=v ...] [--device NAME]
    pybuda sim perf NETLIST [--csv FILE] [--device NAME] [--program P] [--param k=v ...] [--top N] [--rich]

`add_sim_commands(subparsers)` adds the `sim` group to an argparse subparsers object; each leaf parser sets
`func` (a handler taking the parsed namespace and returning an exit code). Standalone:
`python -m pybuda.tools.cli_sim sim ...`.
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Any, Sequence

from .console import output_console


def _param(text: str) -> tuple[str, Any]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected k=v, got {text!r}")
    key, value = text.split("=", 1)
    key = key.strip().lstrip("$")
    if not key:
        raise argparse.ArgumentTypeError(f"expected k=v, got {text!r}")
    try:
        return key, int(value, 0)
    except ValueError:
        return key, value.strip()


def add_sim_commands(subparsers: Any) -> argparse.ArgumentParser:
    """Add `sim run` and `sim perf` to an argparse subparsers object; returns the `sim` parser."""
    sim = subparsers.add_parser("sim", help="run or estimate a Buda netlist in the backend simulator",
                                description="Backend simulator: numeric execution and performance estimate of a "
                                            "Buda netlist (see docs/simulator.md).")
    sub = sim.add_subparsers(dest="sim_command", metavar="{run,perf}")
    sub.required = True

    run = sub.add_parser("run", help="execute a netlist numerically and print output statistics",
                         description="Push stimulus to every host input queue and ram, run the program(s), pop "
                                     "every output queue and print per-queue statistics.")
    run.add_argument("netlist", help="netlist YAML file")
    run.add_argument("--random", action="store_true",
                     help="random stimulus for every input queue and ram (required: the only stimulus mode)")
    run.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    run.add_argument("--program", default=None, help="program to run (default: every program in file order)")
    run.add_argument("--param", type=_param, action="append", default=[], metavar="K=V",
                     help="program parameter, e.g. --param p_loop_count=2 (missing params are 1)")
    run.add_argument("--device", default=None, help="device name (e75, e150, n150, n300); default from the arch")
    run.set_defaults(func=cmd_run, handler=lambda args, _console: cmd_run(args))

    perf = sub.add_parser("perf", help="estimate performance (no numerics) and print a summary",
                          description="Per-op kernel and bandwidth cycles, epoch pipelines and throughput of a "
                                      "netlist's program.")
    perf.add_argument("netlist", help="netlist YAML file")
    perf.add_argument("--csv", default=None, metavar="FILE", help="also write the per-op CSV report")
    perf.add_argument("--device", default=None, help="device name (e75, e150, n150, n300); default from the arch")
    perf.add_argument("--program", default=None, help="program to estimate (default: the first)")
    perf.add_argument("--param", type=_param, action="append", default=[], metavar="K=V",
                      help="program parameter (missing params count as 1)")
    perf.add_argument("--top", type=int, default=10, help="slowest ops to list (default 10, 0 for none)")
    perf.add_argument("--rich", action="store_true", help="print rich tables instead of plain text")
    perf.set_defaults(func=cmd_perf, handler=lambda args, _console: cmd_perf(args))
    return sim


def _fmt(v: float) -> str:
    if v != v:  # NaN
        return "nan"
    return f"{v:.6g}"


def cmd_run(args: argparse.Namespace) -> int:
    from pybuda.backend_sim import SimulatorError
    from pybuda.backend_sim.stimulus import run_random

    if not args.random:
        print("error: pybuda sim run needs --random (the only stimulus mode; use the Python API "
              "pybuda.backend_sim.Simulator to push your own data)", file=sys.stderr)
        return 2
    params = dict(args.param)
    try:
        start = time.perf_counter()
        sim, stats = run_random(args.netlist, seed=args.seed, program=args.program, params=params,
                                device=args.device)
        elapsed = time.perf_counter() - start
    except (SimulatorError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"netlist {args.netlist}  arch {sim.arch}  device {sim.device.name}  seed {args.seed}")
    print(f"executed {len(sim.executed)} epoch(s): {', '.join(dict.fromkeys(sim.executed))}  in {elapsed:.2f} s")
    header = ["queue", "entries", "shape (t, R, C)", "mean", "std", "min", "max", "nan", "inf"]
    rows = [[s.queue, str(s.entries), "x".join(map(str, s.shape)), _fmt(s.mean), _fmt(s.std), _fmt(s.min),
             _fmt(s.max), str(s.nan), str(s.inf)] for s in stats.values()]
    if not rows:
        print("no output queues (no queue is written by an op and read by none)")
        return 0
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths)).rstrip())
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return 0


def cmd_perf(args: argparse.Namespace) -> int:
    from pybuda.backend_sim import SimulatorError, estimate

    try:
        start = time.perf_counter()
        report = estimate(args.netlist, args.device, program=args.program, params=dict(args.param))
        elapsed = time.perf_counter() - start
        if args.csv:
            report.to_csv(args.csv)
    except (SimulatorError, ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    if args.rich:
        output_console().print(report.to_rich(top_ops=args.top))
    else:
        print(report.to_text(top_ops=args.top))
    print(f"\nestimated in {elapsed:.3f} s" + (f"; per-op CSV written to {args.csv}" if args.csv else ""))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pybuda", description="pybuda command line (sim commands only)")
    subparsers = parser.add_subparsers(dest="command", metavar="{sim}")
    subparsers.required = True
    add_sim_commands(subparsers)
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
