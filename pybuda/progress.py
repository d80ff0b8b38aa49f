"""Progress of a compile on a terminal: the stage running (with a spinner) and each finished stage with its time.
Quiet when stderr is not a terminal (CI logs, pipes, notebooks' captured output)."""
from __future__ import annotations

from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn


class StageProgress:
    """`with StageProgress(model_name) as p:` then `p.start(stage_name)` before a stage and `p.done(stage_name,
    seconds)` after it."""

    def __init__(self, model: str, console: Console | None = None):
        self.console = console or Console(stderr=True)
        self.model = model
        self._progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                                  console=self.console, transient=True, disable=not self.console.is_terminal)
        self._task = None

    def __enter__(self) -> "StageProgress":
        self._progress.__enter__()
        self._task = self._progress.add_task(f"compiling {self.model}")
        return self

    def __exit__(self, *exc) -> None:
        self._progress.__exit__(*exc)

    def start(self, stage: str) -> None:
        self._progress.update(self._task, description=f"compiling {self.model}: {stage}")

    def done(self, stage: str, seconds: float) -> None:
        if self.console.is_terminal:
            self._progress.console.print(f"  {self.model}: {stage} {seconds:.2f} s", highlight=False)
