"""Reports of a PerfReport: perf-analyzer-style summary (text or rich tables) and the per-op CSV.

The CSV columns follow the naming of the device profiler's per-op report (upper case, units in brackets,
INPUT_<k>_* / OUTPUT_0_* groups with W, Z, Y, X = samples per execute, t, rows, columns in elements).
"""
from __future__ import annotations

import csv
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from .timing import OpPerf, PerfReport

BASE_COLUMNS = [
    "OP NAME", "OP TYPE", "GRAPH", "EPOCH", "DEVICE ID", "GRID", "CORE COUNT", "MATH FIDELITY", "T", "MBLOCK",
    "UBLOCK", "M_K", "U_KT", "KERNEL CYCLES", "BW LIMITED CYCLES", "LIMITER CYCLES", "LIMITER", "NOC LINK CYCLES",
    "NOC LINK", "DRAM IN CYCLES", "PCIE IN CYCLES", "DRAM OUT CYCLES", "PCIE OUT CYCLES", "DRAM CHANNEL CYCLES",
    "KERNEL DURATION [ns]", "LIMITER DURATION [ns]", "PROLOGUE BYTES PER CORE", "EPILOGUE BYTES PER CORE",
    "PM FPU UTIL (%)",
]
TENSOR_FIELDS = ["W", "Z", "Y", "X", "DATATYPE", "MEMORY", "NAME"]


def csv_columns(report: "PerfReport") -> list[str]:
    n_in = max((len(o.inputs) for o in report.ops), default=0)
    cols = list(BASE_COLUMNS)
    for k in range(n_in):
        cols += [f"INPUT_{k}_{f}" for f in TENSOR_FIELDS]
    cols += [f"OUTPUT_0_{f}" for f in TENSOR_FIELDS]
    cols.append("ATTRIBUTES")
    return cols


def _tensor_cells(prefix: str, info, w: int) -> dict:
    if info is None:
        return {}
    t, r, c = info.shape
    return {f"{prefix}_W": w, f"{prefix}_Z": t, f"{prefix}_Y": r, f"{prefix}_X": c, f"{prefix}_DATATYPE": info.df,
            f"{prefix}_MEMORY": info.memory, f"{prefix}_NAME": info.name}


def csv_rows(report: "PerfReport") -> list[dict]:
    ns_per_cycle = 1e9 / report.clock_hz
    rows = []
    for o in report.ops:
        row = {
            "OP NAME": o.name, "OP TYPE": o.type, "GRAPH": o.graph, "EPOCH": o.epoch, "DEVICE ID": o.device,
            "GRID": f"{o.grid[0]}x{o.grid[1]}", "CORE COUNT": o.cores, "MATH FIDELITY": o.math_fidelity,
            "T": o.t, "MBLOCK": f"{o.mblock[0]}x{o.mblock[1]}", "UBLOCK": f"{o.ublock[0]}x{o.ublock[1]}",
            "M_K": o.m_k, "U_KT": o.u_kt, "KERNEL CYCLES": o.kernel_cycles,
            "BW LIMITED CYCLES": round(o.bw_cycles, 1), "LIMITER CYCLES": round(o.limiter_cycles, 1),
            "LIMITER": o.limiter, "NOC LINK CYCLES": round(o.terms.get("noc_link", 0.0), 1), "NOC LINK": o.link,
            "DRAM IN CYCLES": round(o.terms.get("dram_in", 0.0), 1),
            "PCIE IN CYCLES": round(o.terms.get("pcie_in", 0.0), 1),
            "DRAM OUT CYCLES": round(o.terms.get("dram_out", 0.0), 1),
            "PCIE OUT CYCLES": round(o.terms.get("pcie_out", 0.0), 1),
            "DRAM CHANNEL CYCLES": round(o.terms.get("dram_channel", 0.0), 1),
            "KERNEL DURATION [ns]": round(o.kernel_cycles * ns_per_cycle, 1),
            "LIMITER DURATION [ns]": round(o.limiter_cycles * ns_per_cycle, 1),
            "PROLOGUE BYTES PER CORE": o.prologue_bytes_per_core, "EPILOGUE BYTES PER CORE": o.epilogue_bytes_per_core,
            "PM FPU UTIL (%)": "" if o.math_utilization is None else round(100 * o.math_utilization, 2),
            "ATTRIBUTES": "; ".join(f"{k}={v}" for k, v in o.attributes.items()),
        }
        for k, info in enumerate(o.inputs):
            row.update(_tensor_cells(f"INPUT_{k}", info, o.input_count))
        row.update(_tensor_cells("OUTPUT_0", o.output, o.input_count))
        rows.append(row)
    return rows


def write_csv(report: "PerfReport", path: str) -> None:
    cols = csv_columns(report)
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols, restval="")
        w.writeheader()
        for row in csv_rows(report):
            w.writerow(row)


def _fmt_int(v: float) -> str:
    return f"{v:,.0f}"


def limiter_text(o: "OpPerf") -> str:
    """What limits an op, in words."""
    if o.limiter == "kernel":
        return "kernel (math)"
    if o.limiter == "fork_join":
        return f"fork-join stall (fork {o.fork})"
    if o.limiter == "noc_link":
        return f"noc_link {o.link}" if o.link else "noc_link"
    return {"dram_in": "DRAM read", "pcie_in": "PCIe read", "dram_out": "DRAM write",
            "pcie_out": "PCIe write", "dram_channel": "DRAM channel"}.get(o.limiter, o.limiter)


def epoch_rows(report: "PerfReport") -> tuple[list[str], list[list[str]]]:
    header = ["epoch", "graph", "dev", "execs", "inputs", "cores", "mm cores", "pipeline cyc", "fill cyc",
              "epoch cyc", "samples/s", "math util", "slowest op", "type", "limited by"]
    rows = []
    for e in report.epochs:
        slow = next((o for o in e.ops if o.name == e.slowest_op), None)
        rows.append([str(e.index), e.graph, str(e.device), str(e.executions), str(e.input_count), str(e.cores),
                     str(e.matmul_cores), _fmt_int(e.pipeline_cycles), _fmt_int(e.fill_cycles),
                     _fmt_int(e.epoch_cycles), f"{e.samples_per_second:,.1f}", f"{e.math_utilization:.1%}",
                     e.slowest_op, slow.type if slow else "", limiter_text(slow) if slow else ""])
    return header, rows


def op_rows(report: "PerfReport", top: int) -> tuple[list[str], list[list[str]]]:
    header = ["op", "type", "epoch", "grid", "kernel cyc", "bw cyc", "limiter cyc", "limited by", "fidelity",
              "out df", "fpu util"]
    ops = sorted(report.ops, key=lambda o: o.limiter_cycles, reverse=True)[:top]
    rows = [[o.name, o.type, str(o.epoch), f"{o.grid[0]}x{o.grid[1]}", _fmt_int(o.kernel_cycles),
             _fmt_int(o.bw_cycles), _fmt_int(o.limiter_cycles), limiter_text(o), o.math_fidelity,
             o.output.df if o.output else "", "" if o.math_utilization is None else f"{o.math_utilization:.1%}"]
            for o in ops]
    return header, rows


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]
    out = ["  ".join(c.ljust(w) for c, w in zip(header, widths)).rstrip()]
    out.append("  ".join("-" * w for w in widths))
    for r in rows:
        out.append("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip())
    return out


def headline(report: "PerfReport") -> list[str]:
    return [
        f"device {report.device} ({report.arch}, {report.clock_hz / 1e9:.2f} GHz)  program {report.program}  "
        f"params {report.params or {}}",
        f"total {report.total_cycles:,} cycles = {report.seconds * 1e3:.3f} ms  samples {report.samples}  "
        f"-> {report.samples_per_second:,.1f} samples/s  (epoch switches {report.epoch_switches} x "
        f"{report.epoch_switch_cycles:,} cycles)",
    ]


def summary_text(report: "PerfReport", top_ops: int = 10) -> str:
    lines = headline(report)
    lines += ["", "Epochs (one execute of a graph; pipeline = slowest op per input):"]
    lines += _table(*epoch_rows(report))
    if top_ops and report.ops:
        lines += ["", f"Slowest ops (per core, per input; top {min(top_ops, len(report.ops))} of {len(report.ops)}):"]
        lines += _table(*op_rows(report, top_ops))
    return "\n".join(lines)


def rich_summary(report: "PerfReport", top_ops: int = 10):
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    parts = [Text("\n".join(headline(report)))]
    header, rows = epoch_rows(report)
    t = Table(title="Epochs", title_justify="left")
    for h in header:
        t.add_column(h, justify="right" if h.endswith(("cyc", "/s", "util", "cores", "execs", "inputs")) else "left")
    for r in rows:
        t.add_row(*r)
    parts.append(t)
    if top_ops and report.ops:
        header, rows = op_rows(report, top_ops)
        t = Table(title=f"Slowest ops (top {len(rows)} of {len(report.ops)})", title_justify="left")
        for h in header:
            t.add_column(h, justify="right" if h.endswith(("cyc", "util")) else "left")
        for r in rows:
            t.add_row(*r)
        parts.append(t)
    return Group(*parts)
