"""`pybuda perf`: the legacy perf analyzer's views of a netlist or a TTI image from the simulator's estimate
(per-epoch table, slowest ops and what limits them, math utilisation) and, with `--vs OTHER`, a comparison with a
second one (e.g. ours against a legacy netlist).

    pybuda perf FILE [--vs OTHER] [--device D] [--vs-device D] [--program P] [--top N] [--part K]
"""
from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from ..errors import UserInputError


def _source(path: str, part: int, console: Console):
    """The netlist to estimate: the file itself, or netlist `part` of a TTI image."""
    from ..runtime.tti import netlist_sources
    sources = netlist_sources(path)
    if not 0 <= part < len(sources):
        raise UserInputError(f"{path} holds {len(sources)} netlist(s); --part {part} is not one of "
                             f"0..{len(sources) - 1}")
    if len(sources) > 1:
        console.print(f"{path}: {len(sources)} netlists (host ops between them); this is netlist {part} (--part)")
    return sources[part][1]


def _table(title: str, header: list[str], rows: list[list[str]]) -> Table:
    table = Table(title=title, title_justify="left")
    for k, h in enumerate(header):
        table.add_column(h, justify="left" if k == 0 else "right")
    for r in rows:
        table.add_row(*r)
    return table


def _perf(args, console: Console) -> int:
    from ..backend_sim import SimulatorError, estimate
    from ..backend_sim.perf_compare import limiter_rows, op_type_rows, summary_rows
    from ..runtime.tti import TTIError

    try:
        report = estimate(_source(args.file, args.part, console), args.device, program=args.program)
        other = None
        if args.vs:
            other = estimate(_source(args.vs, args.part, console), args.vs_device or args.device,
                             program=args.vs_program or args.program)
    except (SimulatorError, TTIError, ValueError, OSError) as e:
        console.print(f"[red]error: {e}[/red]")
        return 1
    console.print(report.to_rich(top_ops=args.top))
    if other is None:
        return 0
    console.print(f"\nA = {Path(args.file).name} ({report.device}, {report.program}), "
                  f"B = {Path(args.vs).name} ({other.device}, {other.program})")
    console.print(_table("Totals", ["", "A", "B", "A/B"], summary_rows(report, other)))
    console.print(_table("Epoch time by what limits the epoch's slowest op", ["limited by", "A", "B"],
                         limiter_rows(report, other)))
    console.print(_table("Ops by type", ["type", "ops A", "ops B", "cores A", "cores B"],
                         op_type_rows(report, other)))
    return 0


def add_perf_commands(subparsers) -> None:
    p = subparsers.add_parser("perf", help="perf-analyzer views of a netlist or TTI image, optionally against "
                                           "another (--vs)")
    p.add_argument("file", metavar="FILE", help="netlist YAML file or TTI image (.tti)")
    p.add_argument("--vs", metavar="OTHER", help="a second netlist or TTI image to compare with")
    p.add_argument("--device", help="device (e75, e150, n150, n300); default from the netlist's arch")
    p.add_argument("--vs-device", help="device of OTHER (default: --device, else from its arch)")
    p.add_argument("--program", help="program to estimate (default: the first)")
    p.add_argument("--vs-program", help="program of OTHER (default: --program, else its first)")
    p.add_argument("--top", type=int, default=10, help="slowest ops to list (default 10, 0 for none)")
    p.add_argument("--part", type=int, default=0, help="netlist of a TTI image with host ops between netlists")
    p.set_defaults(handler=_perf)
