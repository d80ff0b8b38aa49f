"""The HTML report of a compile (`compiled.report(path)`, `pybuda report FILE`): one self-contained file with the
model summary, each stage's graph, the placement of every epoch, the epoch timeline, the per-op table and the
balancer's plan against its lower bound (docs/user_guide.md, "Report")."""
from .data import ReportData, from_compiled, from_file, from_netlists
from .render import render, write_report

__all__ = ["ReportData", "from_compiled", "from_file", "from_netlists", "render", "write_report"]
