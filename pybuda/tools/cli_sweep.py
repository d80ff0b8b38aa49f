"""`pybuda sweep` and `pybuda tune-batch` (pybuda.tools.sweep): configurations of zoo models compiled and estimated
as Ray tasks, the table, the plot and the best configuration per model.

    pybuda sweep [--models M,...] [--devices D,...] [--microbatches N,...] [--dfs F,...] [--fidelities F,...]
                 [--policies P,...] [--out DIR] [--address HOST:PORT] [--verify]
    pybuda tune-batch MODEL [--device D] [--microbatches N,...] [--df F] [--fidelity F] [--out DIR]
"""
from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table


def _names(text: str) -> list[str]:
    return [t for t in text.split(",") if t]


def _ints(text: str) -> list[int]:
    return [int(t) for t in _names(text)]


def _sweep(args, console: Console) -> int:
    from .sweep import best_per_model, run_sweep, sweep_points
    from .zoo import ZOO
    models = _names(args.models) if args.models else [n for n, m in ZOO.items() if not m.full_size]
    unknown = [m for m in models if m not in ZOO]
    if unknown:
        console.print(f"[red]error: unknown zoo model(s) {', '.join(unknown)}; the zoo has {', '.join(ZOO)}[/red]")
        return 2
    points = sweep_points(models, _names(args.devices), _ints(args.microbatches), _names(args.dfs),
                          _names(args.fidelities), _names(args.policies))
    rows = run_sweep(points, args.out, address=args.address, verify=args.verify, console=console)
    failed = [r for r in rows if r["status"] != "ok"]
    table = Table(title=f"Best configuration per model ({len(rows) - len(failed)} of {len(rows)} points compiled)")
    for col in ("model", "device", "microbatch", "df", "fidelity", "policy", "samples/s"):
        table.add_column(col)
    for model, r in best_per_model(rows).items():
        table.add_row(model, r["device"], str(r["microbatch"]), r["df"], r["fidelity"], r["policy"],
                      f"{float(r['samples_per_s']):,.1f}")
    console.print(table)
    for r in failed:
        console.print(f"[yellow]failed: {r['model']} {r['device']} mb{r['microbatch']} {r['df']} "
                      f"{r['fidelity']} {r['policy']}: {r['error']}[/yellow]")
    out = Path(args.out)
    console.print(f"table {out / 'results.csv'}, plot {out / 'samples_per_s.png'}")
    return 0


def _tune_batch(args, console: Console) -> int:
    from .sweep import tune_batch
    try:
        result = tune_batch(args.model, args.device, _ints(args.microbatches), args.df, args.fidelity, args.out,
                            address=args.address, knee=args.knee, console=console)
    except (RuntimeError, ValueError) as e:
        console.print(f"[red]error: {e}[/red]")
        return 1
    best, small = result["best"], result["smallest_within_knee"]
    console.print(f"{args.model} on {args.device} ({args.df}, {args.fidelity}): the most samples/s at microbatch "
                  f"{best['microbatch']} ({float(best['samples_per_s']):,.1f}); microbatch {small['microbatch']} "
                  f"already reaches {float(small['samples_per_s']):,.1f} (>= {args.knee:.0%} of it)")
    return 0


def add_sweep_commands(subparsers) -> None:
    p = subparsers.add_parser("sweep", help="compile and estimate configurations of zoo models as Ray tasks")
    p.add_argument("--models", help="zoo models, comma-separated (default: the fast tier)")
    p.add_argument("--devices", default="e150")
    p.add_argument("--microbatches", default="1,4,16")
    p.add_argument("--dfs", default="Float16_b,Bfp8_b")
    p.add_argument("--fidelities", default="HiFi3")
    p.add_argument("--policies", default="default", help="balancer policies (default = CP-SAT, Greedy, ...)")
    p.add_argument("--out", default="pybuda_sweep", help="results directory (a run again resumes it)")
    p.add_argument("--address", help="Ray cluster address (default: RAY_ADDRESS, else Ray on this machine)")
    p.add_argument("--verify", action="store_true", help="also check each point's numerics (slower)")
    p.set_defaults(handler=_sweep)
    t = subparsers.add_parser("tune-batch", help="the microbatch with the most samples/s for a zoo model")
    t.add_argument("model")
    t.add_argument("--device", default="e150")
    t.add_argument("--microbatches", default="1,2,4,8,16,32,64,128")
    t.add_argument("--df", default="Float16_b")
    t.add_argument("--fidelity", default="HiFi3")
    t.add_argument("--knee", type=float, default=0.95, help="report the smallest microbatch within this share of "
                                                           "the best samples/s (default 0.95)")
    t.add_argument("--out", default="pybuda_tune_batch")
    t.add_argument("--address", help="Ray cluster address (default: RAY_ADDRESS, else Ray on this machine)")
    t.set_defaults(handler=_tune_batch)
