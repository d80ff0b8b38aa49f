"""Two performance estimates side by side (`pybuda perf A --vs B`, as the legacy perf analyzer's comparison):
totals, where the time goes by what limits each epoch's slowest op, and the ops by type."""
from __future__ import annotations

import collections

from .report import limiter_text
from .timing import PerfReport


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "-"


def _epoch_time(report: PerfReport) -> dict[str, float]:
    """Cycles spent in epochs by the limiter of their slowest op (an epoch's cycles times its executions)."""
    out: dict[str, float] = collections.defaultdict(float)
    for e in report.epochs:
        slow = next((o for o in e.ops if o.name == e.slowest_op), None)
        out[limiter_text(slow) if slow else "no op"] += e.epoch_cycles * e.executions
    return out


def _math_utilization(report: PerfReport) -> float:
    """The epochs' math utilisation weighted by the time spent in each."""
    weights = [e.epoch_cycles * e.executions for e in report.epochs]
    total = sum(weights)
    return sum(e.math_utilization * w for e, w in zip(report.epochs, weights)) / total if total else 0.0


def summary_rows(a: PerfReport, b: PerfReport) -> list[list[str]]:
    """metric, A, B, A/B for the totals of the two estimates."""
    def cores(r: PerfReport) -> float:
        return sum(e.cores for e in r.epochs) / len(r.epochs) if r.epochs else 0.0

    def cycles(r: PerfReport, field: str) -> float:
        return sum(getattr(e, field) * e.executions for e in r.epochs)

    rows = [["samples/s", f"{a.samples_per_second:,.1f}", f"{b.samples_per_second:,.1f}",
             _ratio(a.samples_per_second, b.samples_per_second)],
            ["total ms", f"{a.seconds * 1e3:,.3f}", f"{b.seconds * 1e3:,.3f}", _ratio(a.seconds, b.seconds)],
            ["samples", str(a.samples), str(b.samples), _ratio(a.samples, b.samples)],
            ["epochs", str(len(a.epochs)), str(len(b.epochs)), _ratio(len(a.epochs), len(b.epochs))],
            ["ops", str(len(a.ops)), str(len(b.ops)), _ratio(len(a.ops), len(b.ops))],
            ["cores per epoch", f"{cores(a):.1f}", f"{cores(b):.1f}", _ratio(cores(a), cores(b))],
            ["math utilisation", f"{_math_utilization(a):.1%}", f"{_math_utilization(b):.1%}",
             _ratio(_math_utilization(a), _math_utilization(b))]]
    for label, field in (("pipeline cycles", "pipeline_cycles"), ("fill cycles", "fill_cycles"),
                         ("prologue cycles", "prologue_cycles")):
        rows.append([label, f"{cycles(a, field):,.0f}", f"{cycles(b, field):,.0f}",
                     _ratio(cycles(a, field), cycles(b, field))])
    switches = (a.epoch_switches * a.epoch_switch_cycles, b.epoch_switches * b.epoch_switch_cycles)
    rows.append(["epoch switch cycles", f"{switches[0]:,}", f"{switches[1]:,}", _ratio(*switches)])
    return rows


def limiter_rows(a: PerfReport, b: PerfReport) -> list[list[str]]:
    """What limits the slowest op of the epochs the time is spent in: its share of each estimate's epoch time."""
    ta, tb = _epoch_time(a), _epoch_time(b)
    sa, sb = sum(ta.values()) or 1.0, sum(tb.values()) or 1.0
    return [[k, f"{ta.get(k, 0.0) / sa:.1%}", f"{tb.get(k, 0.0) / sb:.1%}"]
            for k in sorted(set(ta) | set(tb), key=lambda k: -(ta.get(k, 0.0) / sa + tb.get(k, 0.0) / sb))]


def op_type_rows(a: PerfReport, b: PerfReport) -> list[list[str]]:
    """Per op type: ops and cores in each estimate."""
    def count(r: PerfReport) -> dict[str, tuple[int, int]]:
        out: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
        for o in r.ops:
            out[o.type][0] += 1
            out[o.type][1] += o.cores
        return {k: (v[0], v[1]) for k, v in out.items()}

    ca, cb = count(a), count(b)
    return [[t, str(ca.get(t, (0, 0))[0]), str(cb.get(t, (0, 0))[0]), str(ca.get(t, (0, 0))[1]),
             str(cb.get(t, (0, 0))[1])] for t in sorted(set(ca) | set(cb))]
