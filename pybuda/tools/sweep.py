"""Sweeps on Ray: every point of models x devices x microbatches x data formats x fidelities x balancer policies is
a compile and its estimate (and, if asked, the numerics check of `verify=True`), run as a Ray task.

`ray.init()` starts Ray on this machine (its cores) unless an address is given (or `RAY_ADDRESS` is set: a
cluster's head node). Each finished point is written at once (`<out>/points/<key>.json`, atomically), so an
interrupted sweep run again resumes from what finished; a point that fails is recorded with its error and does not
stop the sweep. At the end: `<out>/results.csv` (one row per point, in sweep order), `<out>/samples_per_s.png`
(samples/s against microbatch per configuration, one panel per model) and the best configuration per model."""
from __future__ import annotations

import csv
import dataclasses
import io
import itertools
import json
import os
import time
import traceback
from pathlib import Path
from typing import Iterable, Sequence

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..errors import UserInputError
from ..files import write_atomically

COLUMNS = ("model", "device", "microbatch", "df", "fidelity", "policy", "status", "samples_per_s",
           "estimated_cycles", "epochs", "cores", "bound_ratio", "compile_s", "pcc", "error")


@dataclasses.dataclass(frozen=True)
class SweepPoint:
    """One configuration of one model."""

    model: str
    device: str
    microbatch: int
    df: str
    fidelity: str
    policy: str = "default"

    @property
    def key(self) -> str:
        return f"{self.model}__{self.device}__mb{self.microbatch}__{self.df}__{self.fidelity}__{self.policy}"

    @property
    def configuration(self) -> str:
        """Everything but the model and the microbatch: one line of the plot."""
        return f"{self.device} {self.df} {self.fidelity} {self.policy}"


def sweep_points(models: Sequence[str], devices: Sequence[str], microbatches: Sequence[int], dfs: Sequence[str],
                 fidelities: Sequence[str], policies: Sequence[str] = ("default",)) -> list[SweepPoint]:
    """The product of the axes, in a fixed order (model slowest)."""
    return [SweepPoint(*axes) for axes in itertools.product(models, devices, microbatches, dfs, fidelities, policies)]


def run_point(point: SweepPoint, verify: bool = False) -> dict:
    """Compile and estimate one point; its row (status "error" with the error's text if anything failed)."""
    from .zoo import compile_zoo_model
    row = {**dataclasses.asdict(point), "status": "ok", "error": ""}
    start = time.perf_counter()
    try:
        compiled = compile_zoo_model(point.model, point.device, point.microbatch, point.df, point.fidelity,
                                     point.policy, verify=verify)
        placement, perf = compiled.placement, compiled.perf
        row.update(samples_per_s=round(perf.samples_per_second, 2), estimated_cycles=perf.total_cycles,
                   epochs=len(perf.epochs), cores=sum(e.cores for e in perf.epochs),
                   bound_ratio=round(placement.bound_ratio, 4) if placement and placement.bound_ratio else "")
        if verify:
            row["pcc"] = round(min(c.pcc for c in compiled.checks), 6)
    except Exception as e:   # noqa: BLE001 -- a failed point is a result of the sweep, not its end
        row.update(status="error", error=f"{type(e).__name__}: {e}".strip()[:2000],
                   trace=traceback.format_exc(limit=6))
    row["compile_s"] = round(time.perf_counter() - start, 3)
    return row


def _finished(points_dir: Path) -> dict[str, dict]:
    rows = {}
    for path in sorted(points_dir.glob("*.json")):
        try:
            rows[path.stem] = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue   # written atomically, so only a foreign file: run the point again
    return rows


def _init_ray(address: str | None):
    import ray
    if not ray.is_initialized():
        address = address or os.environ.get("RAY_ADDRESS") or None
        ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
    return ray


def run_sweep(points: Sequence[SweepPoint], out_dir: str | Path, *, address: str | None = None,
              verify: bool = False, console: Console | None = None) -> list[dict]:
    """Run every point not finished yet in `out_dir` as a Ray task; all rows in sweep order (module docstring)."""
    out = Path(out_dir)
    points_dir = out / "points"
    points_dir.mkdir(parents=True, exist_ok=True)
    done = _finished(points_dir)
    todo = [p for p in points if p.key not in done]
    console = console or Console(stderr=True)
    if todo:
        ray = _init_ray(address)
        task = ray.remote(num_cpus=1, max_retries=0)(run_point)
        pending = {task.remote(p, verify): p for p in todo}
        with Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.description}"),
                      TimeElapsedColumn(), console=console, disable=not console.is_terminal) as progress:
            bar = progress.add_task("", total=len(points), completed=len(points) - len(todo))
            while pending:
                (ref,), _ = ray.wait(list(pending), num_returns=1)
                point = pending.pop(ref)
                try:
                    row = ray.get(ref)
                except Exception as e:   # noqa: BLE001 -- the task itself died (worker lost, out of memory)
                    row = {**dataclasses.asdict(point), "status": "error", "error": f"{type(e).__name__}: {e}"[:2000]}
                text = json.dumps(row, sort_keys=True).encode()
                write_atomically(points_dir / f"{point.key}.json", lambda f, t=text: f.write(t))
                done[point.key] = row
                progress.update(bar, advance=1, description=f"{point.key}: {row['status']}")
    rows = [done[p.key] for p in points]
    write_table(rows, out / "results.csv")
    if any(r["status"] == "ok" for r in rows):
        plot(rows, out / "samples_per_s.png")
    return rows


def write_table(rows: Iterable[dict], path: Path) -> Path:
    """The rows as CSV (COLUMNS), atomically."""
    buf = io.StringIO()
    writer = csv.DictWriter(buf, COLUMNS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    text = buf.getvalue().encode()
    return write_atomically(path, lambda f: f.write(text))


def read_table(path: str | Path) -> list[dict]:
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def best_per_model(rows: Iterable[dict]) -> dict[str, dict]:
    """The finished point with the most samples/s per model."""
    best: dict[str, dict] = {}
    for r in rows:
        if r["status"] == "ok" and (r["model"] not in best
                                    or float(r["samples_per_s"]) > float(best[r["model"]]["samples_per_s"])):
            best[r["model"]] = r
    return best


def plot(rows: Sequence[dict], path: Path) -> Path:
    """samples/s against microbatch, a line per configuration, a panel per model (PNG, atomically)."""
    import matplotlib
    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    ok = [r for r in rows if r["status"] == "ok"]
    models = list(dict.fromkeys(r["model"] for r in ok))
    fig = Figure(figsize=(4.2 * min(len(models), 3), 3.2 * ((len(models) + 2) // 3)), layout="constrained")
    axes = fig.subplots((len(models) + 2) // 3, min(len(models), 3), squeeze=False).ravel()
    for ax, model in zip(axes, models):
        lines: dict[str, list[tuple[int, float]]] = {}
        for r in ok:
            if r["model"] == model:
                config = SweepPoint(r["model"], r["device"], int(r["microbatch"]), r["df"], r["fidelity"],
                                    r["policy"]).configuration
                lines.setdefault(config, []).append((int(r["microbatch"]), float(r["samples_per_s"])))
        for config, values in lines.items():
            xs, ys = zip(*sorted(values))
            ax.plot(xs, ys, marker="o", label=config)
        ax.set_title(model, fontsize=9)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("microbatch", fontsize=8)
        ax.set_ylabel("samples/s", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6)
    for ax in axes[len(models):]:
        ax.set_visible(False)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, metadata={"Software": None})
    return write_atomically(path, lambda f: f.write(buf.getvalue()))


def tune_batch(model: str, device: str, microbatches: Sequence[int], df: str, fidelity: str, out_dir: str | Path,
               *, address: str | None = None, knee: float = 0.95, console: Console | None = None) -> dict:
    """The seeds' "find the optimal batch size": sweep `microbatches`; the fastest point and the smallest
    microbatch within `knee` of its samples/s (the latency-friendly choice)."""
    rows = run_sweep(sweep_points([model], [device], microbatches, [df], [fidelity]), out_dir, address=address,
                     console=console)
    ok = [r for r in rows if r["status"] == "ok"]
    if not ok:
        raise UserInputError(f"no microbatch of {model} compiled: " + "; ".join(r["error"] for r in rows))
    best = max(ok, key=lambda r: float(r["samples_per_s"]))
    enough = [r for r in ok if float(r["samples_per_s"]) >= knee * float(best["samples_per_s"])]
    return {"best": best, "smallest_within_knee": min(enough, key=lambda r: int(r["microbatch"])), "rows": rows}
