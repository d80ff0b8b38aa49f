"""`pybuda report FILE [-o OUT.html] [--device D]`: the HTML report of a netlist YAML file or a TTI image
(placement, epoch timeline, per-op table; the stages and the balancer's plan need the compiled model:
`compiled.report(path)`)."""
from __future__ import annotations

from pathlib import Path

from rich.console import Console


def _report(args, console: Console) -> int:
    from ..backend_sim import SimulatorError
    from ..netlist import NetlistError
    from ..report import from_file, write_report
    from ..runtime.tti import TTIError

    out = Path(args.output or Path(args.file).with_suffix(".html").name)
    try:
        path = write_report(from_file(args.file, args.device), out)
    except (NetlistError, SimulatorError, TTIError, ValueError, OSError) as e:
        console.print(f"[red]error: {e}[/red]")
        return 1
    console.print(f"report written to {path}")
    return 0


def add_report_commands(subparsers) -> None:
    p = subparsers.add_parser("report", help="the HTML report of a netlist or TTI image (one self-contained file)")
    p.add_argument("file", metavar="FILE", help="netlist YAML file or TTI image (.tti)")
    p.add_argument("-o", "--output", help="the HTML file to write (default: FILE's name with .html, here)")
    p.add_argument("--device", help="device (e75, e150, n150, n300); default from the netlist's arch")
    p.set_defaults(handler=_report)
