"""The report as one self-contained HTML file (jinja2 template, inline CSS, JS and SVG; nothing fetched when it is
viewed), written atomically."""
from __future__ import annotations

from pathlib import Path

import jinja2
from matplotlib import colormaps
from matplotlib.colors import to_hex

from ..files import write_atomically
from .data import ReportData
from .timeline import timeline_svg

CELL = 34   # pixels per core in the placement grids

_ENV = jinja2.Environment(loader=jinja2.PackageLoader("pybuda.report", "templates"),
                          autoescape=jinja2.select_autoescape(["html.j2", "html"]), undefined=jinja2.StrictUndefined,
                          trim_blocks=True, lstrip_blocks=True)


def op_colours(data: ReportData) -> dict[str, str]:
    """A colour per op type (tab20, in sorted type order)."""
    types = sorted({op.type for part in data.parts for e in part.epochs for op in e.ops})
    palette = colormaps["tab20"]
    return {t: to_hex(palette(k % palette.N)) for k, t in enumerate(types)}


def render(data: ReportData) -> str:
    """The HTML text of the report."""
    return _ENV.get_template("report.html.j2").render(
        data=data, cell=CELL, colours=op_colours(data), timelines=[timeline_svg(p) for p in data.parts])


def write_report(data: ReportData, path: str | Path) -> Path:
    """Write the report to `path` (atomically); the path."""
    text = render(data).encode()
    return write_atomically(path, lambda f: f.write(text))
