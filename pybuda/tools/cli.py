"""The `pybuda` command line.

    pybuda netlist validate FILE... [--arch A]     check the backend's rules; exit 1 if any file is invalid
    pybuda netlist summary FILE... [--queues]      ops, cores, tensor shapes, data formats, DRAM bytes, e2e queues
    pybuda netlist epochs FILE...                  one row per epoch
    pybuda netlist grid FILE... [--epoch N]        each epoch's core grid with op labels
    pybuda netlist diff OLD NEW                    ops and queues added, removed and changed field by field
    pybuda netlist rules                           the validator's rules (the table of docs/netlist.md)
    pybuda config fields|env                       the compiler options' tables of docs/config.md
    pybuda sim run|perf NETLIST                    the backend simulator (pybuda.tools.cli_sim)
    pybuda perf FILE [--vs OTHER]                  perf-analyzer views, and a comparison (pybuda.tools.cli_perf)
    pybuda report FILE [-o OUT.html]               the HTML report of a netlist or TTI image (pybuda.tools.cli_report)
    pybuda sweep ..., pybuda tune-batch MODEL      configurations on Ray (pybuda.tools.cli_sweep)

Each command group is one `add_<group>_commands(subparsers)` function registered in GROUPS; a handler takes the
parsed arguments and a rich Console and returns the exit status.
"""
from __future__ import annotations

import argparse
import sys

from rich.console import Console
from rich.table import Table

from .cli_perf import add_perf_commands
from .cli_report import add_report_commands
from .cli_sim import add_sim_commands
from .cli_sweep import add_sweep_commands
from .console import output_console


# --- netlist group ------------------------------------------------------------------------------------------------

def _load(path: str, console: Console):
    from ..netlist import NetlistError, load
    try:
        return load(path)
    except NetlistError as e:
        _print_violations(console, path, e.errors)
    except OSError as e:
        console.print(f"[red]{path}: {e}[/red]")
    return None


def _print_violations(console: Console, path: str, errors: list) -> None:
    table = Table(title=f"{path}: {len(errors)} violation{'s' if len(errors) != 1 else ''}", show_lines=False)
    for col in ("line", "object", "rule", "message", "expected", "actual"):
        table.add_column(col, overflow="fold")
    for e in errors:
        table.add_row(str(e.line or ""), e.obj, e.rule, e.message, _cell(e.expected), _cell(e.actual))
    console.print(table)


def _cell(v) -> str:
    return "" if v is None else str(v)


def _validate(args, console: Console) -> int:
    from ..netlist import check
    status = 0
    for path in args.files:
        n = _load(path, console)
        if n is None:
            status = 1
            continue
        errors = check(n, arch=args.arch)
        if errors:
            _print_violations(console, path, errors)
            status = 1
        else:
            console.print(f"[green]OK[/green] {path} ({args.arch or n.arch}: {len(n.graphs)} graphs, "
                          f"{sum(len(g.ops) for g in n.graphs.values())} ops, {len(n.queues)} queues)")
    return status


def _shape(s: tuple) -> str:
    return "x".join(str(v) for v in s)


def _summary(args, console: Console) -> int:
    from ..netlist import summary
    status = 0
    for path in args.files:
        n = _load(path, console)
        if n is None:
            status = 1
            continue
        s = summary(n, args.arch)
        head = Table(title=f"{path}", show_header=False)
        head.add_column("key")
        head.add_column("value", overflow="fold")
        head.add_row("arch", f"{s.arch} (listed: {', '.join(s.archs)})")
        head.add_row("graphs / epochs", str(s.graphs))
        head.add_row("programs", ", ".join(s.programs))
        head.add_row("ops", f"{s.ops} ({s.fused_ops} fused op definitions)")
        head.add_row("queues", str(s.queues))
        head.add_row("cores per epoch", ", ".join(map(str, s.cores_per_epoch)))
        head.add_row("op types", ", ".join(f"{k} {v}" for k, v in s.ops_by_type.items()))
        head.add_row("data formats", ", ".join(f"{k} {v}" for k, v in s.data_formats.items()))
        head.add_row("math fidelity", ", ".join(f"{k} {v}" for k, v in s.math_fidelities.items()))
        head.add_row("DRAM bytes", f"{s.dram_bytes:,}")
        head.add_row("host bytes", f"{s.host_bytes:,}")
        head.add_row("e2e queues", str(len(s.e2e_queues)))
        console.print(head)
        dram = Table(title="DRAM bytes per channel")
        dram.add_column("device", justify="right")
        dram.add_column("channel", justify="right")
        dram.add_column("bytes", justify="right")
        for (dev, ch), b in s.dram_bytes_per_channel.items():
            dram.add_row(str(dev), str(ch), f"{b:,}")
        console.print(dram)
        queues = s.queue_infos if args.queues else s.e2e_queues
        if queues:
            qt = Table(title="queues" if args.queues else "epoch-to-epoch queues")
            for col in ("name", "role", "type", "loc", "entries", "tiles t x rt x ct", "elements t x r x c", "df",
                        "bytes", "producer", "consumers"):
                qt.add_column(col, overflow="fold")
            for q in queues:
                qt.add_row(q.name, q.role, q.kind, q.loc, str(q.entries), _shape(q.shape_tiles),
                           _shape(q.shape_elements), q.df, f"{q.bytes:,}", q.producer, ", ".join(q.consumers))
            console.print(qt)
    return status


def _epochs(args, console: Console) -> int:
    from ..netlist import epoch_summaries
    status = 0
    for path in args.files:
        n = _load(path, console)
        if n is None:
            status = 1
            continue
        table = Table(title=f"{path}: epochs")
        for col in ("#", "graph", "device", "inputs", "ops", "cores", "util", "op types", "formats", "e2e in",
                    "e2e out"):
            table.add_column(col, overflow="fold")
        for e in epoch_summaries(n, args.arch):
            table.add_row(str(e.index), e.graph, str(e.target_device), str(e.input_count), str(e.ops), str(e.cores),
                          f"{e.utilization:.0%}", ", ".join(f"{k} {v}" for k, v in e.ops_by_type.items()),
                          ", ".join(f"{k} {v}" for k, v in e.data_formats.items()), ", ".join(e.e2e_in),
                          ", ".join(e.e2e_out))
        console.print(table)
        if args.ops:
            for e in epoch_summaries(n, args.arch):
                ot = Table(title=f"epoch {e.index}: {e.graph}")
                for col in ("op", "tiles t x rt x ct", "elements t x r x c", "df"):
                    ot.add_column(col, overflow="fold")
                for t in e.tensors:
                    ot.add_row(t.name, _shape(t.shape_tiles), _shape(t.shape_elements), t.df)
                console.print(ot)
    return status


def _grid(args, console: Console) -> int:
    from ..netlist import draw_grid
    status = 0
    for path in args.files:
        n = _load(path, console)
        if n is None:
            status = 1
            continue
        order = n.epoch_order()
        picked = range(len(order)) if args.epoch is None else [args.epoch]
        for i in picked:
            if not 0 <= i < len(order):
                console.print(f"[red]{path}: no epoch {i} (the netlist has {len(order)})[/red]")
                status = 1
                continue
            g = n.graphs[order[i]]
            console.rule(f"{path}: epoch {i}: {g.name} (device {g.target_device})")
            console.print(draw_grid(n, g.name, args.arch), markup=False, highlight=False)
    return status


def _diff(args, console: Console) -> int:
    from ..netlist import diff
    a, b = _load(args.old, console), _load(args.new, console)
    if a is None or b is None:
        return 2
    changes = diff(a, b)
    if not changes:
        console.print(f"no differences between {args.old} and {args.new}")
        return 0
    table = Table(title=f"{args.old} -> {args.new}: {len(changes)} change{'s' if len(changes) != 1 else ''}")
    for col in ("", "kind", "name", "field", "before", "after"):
        table.add_column(col, overflow="fold")
    signs = {"added": "[green]+[/green]", "removed": "[red]-[/red]", "changed": "[yellow]~[/yellow]"}
    for c in changes:
        table.add_row(signs[c.kind], c.what, c.name, c.field or "", _cell(c.before), _cell(c.after))
    console.print(table)
    return 1 if args.exit_code else 0


def _rules(args, console: Console) -> int:
    from ..netlist.rules import rule_table
    sys.stdout.write(rule_table())
    return 0


def add_netlist_commands(subparsers) -> None:
    p = subparsers.add_parser("netlist", help="validate, summarise, draw and diff Buda netlists")
    sub = p.add_subparsers(dest="command", required=True)

    def files(sp):
        sp.add_argument("files", nargs="+", metavar="FILE", help="netlist YAML file(s)")
        sp.add_argument("--arch", help="arch to check against (default: the first listed one pybuda supports)")

    sp = sub.add_parser("validate", help="check the backend's rules; exit status 1 if a netlist is invalid")
    files(sp)
    sp.set_defaults(handler=_validate)
    sp = sub.add_parser("summary", help="ops by type, cores, data formats, DRAM bytes per channel, e2e queues")
    files(sp)
    sp.add_argument("--queues", action="store_true", help="list every queue (default: only epoch-to-epoch ones)")
    sp.set_defaults(handler=_summary)
    sp = sub.add_parser("epochs", help="one row per epoch: ops, cores, formats, queues between epochs")
    files(sp)
    sp.add_argument("--ops", action="store_true", help="also list every op's output shape per epoch")
    sp.set_defaults(handler=_epochs)
    sp = sub.add_parser("grid", help="draw each epoch's core grid with op labels")
    files(sp)
    sp.add_argument("--epoch", type=int, help="draw only this epoch (index in execution order)")
    sp.set_defaults(handler=_grid)
    sp = sub.add_parser("diff", help="ops, queues, graphs and programs added, removed and changed")
    sp.add_argument("old", metavar="OLD")
    sp.add_argument("new", metavar="NEW")
    sp.add_argument("--exit-code", action="store_true", help="exit status 1 when the netlists differ")
    sp.set_defaults(handler=_diff)
    sp = sub.add_parser("rules", help="the validator's rules as a markdown table (docs/netlist.md)")
    sp.set_defaults(handler=_rules)


# --- config group -------------------------------------------------------------------------------------------------

def _config_table(args, console: Console) -> int:
    from .. import config
    sys.stdout.write({"fields": config.fields_table, "env": config.env_table}[args.command]())
    return 0


def add_config_commands(subparsers) -> None:
    p = subparsers.add_parser("config", help="the compiler options' tables, generated from their declarations")
    sub = p.add_subparsers(dest="command", required=True)
    sub.add_parser("fields", help="every option as the Fields table of docs/config.md").set_defaults(
        handler=_config_table)
    sub.add_parser("env", help="the options' environment variables as the table of docs/config.md").set_defaults(
        handler=_config_table)


# --- entry point ----------------------------------------------------------------------------------------------

GROUPS = [add_netlist_commands, add_config_commands, add_sim_commands, add_perf_commands, add_report_commands,
          add_sweep_commands]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="pybuda", description="pybuda command line tools")
    sub = parser.add_subparsers(dest="group", required=True)
    for add in GROUPS:
        add(sub)
    return parser


def main(argv: list | None = None, console: Console | None = None) -> int:
    args = build_parser().parse_args(argv)
    console = console or output_console()
    return args.handler(args, console)


if __name__ == "__main__":
    sys.exit(main())
