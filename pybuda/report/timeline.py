"""The epoch timeline of one netlist as an inline SVG (matplotlib): per epoch a bar of its epoch switch, fill,
pipeline, parameter reload and epilogue cycles (they add up to the epoch's), the slowest op named at its end."""
from __future__ import annotations

import io

import matplotlib

matplotlib.use("Agg")
from matplotlib.figure import Figure  # noqa: E402  (after choosing the backend)

from .data import PartView  # noqa: E402

SEGMENTS = (("switch", "epoch switch", "#9e9e9e"), ("fill", "fill", "#f2b134"), ("pipeline", "pipeline", "#3c7dc4"),
            ("reload", "parameter reload", "#c0504d"), ("epilogue", "epilogue", "#8064a2"))


def timeline_svg(part: PartView) -> str:
    """The SVG text (deterministic: no date, fixed ids) of `part`'s epoch timeline."""
    epochs = part.epochs
    fig = Figure(figsize=(10, 1.2 + 0.32 * max(len(epochs), 1)))
    ax = fig.add_subplot()
    labels = [f"{e.index}: {e.graph}" for e in epochs]
    lefts = [0.0] * len(epochs)
    for field, label, colour in SEGMENTS:
        widths = [getattr(e, field) for e in epochs]
        ax.barh(labels, widths, left=lefts, color=colour, label=label, height=0.7)
        lefts = [a + b for a, b in zip(lefts, widths)]
    for k, e in enumerate(epochs):
        ax.text(e.total, k, f"  {e.slowest_op}", va="center", fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("cycles")
    ax.set_xlim(0, max((e.total for e in epochs), default=1) * 1.35)
    ax.legend(loc="lower center", bbox_to_anchor=(0.5, 1.0), fontsize=7, ncols=len(SEGMENTS), frameon=False)
    ax.tick_params(labelsize=7)
    fig.tight_layout()
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": "pybuda", "svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    text = buf.getvalue()
    return text[text.index("<svg"):]
