"""A compile's progress: stage names and times on a terminal, nothing otherwise."""
from __future__ import annotations

import io

import torch
from rich.console import Console

import pybuda
from pybuda.progress import StageProgress
from models import MLP


def _run(console: Console) -> str:
    with StageProgress("mlp", console=console) as p:
        for stage, seconds in (("decompose", 0.25), ("lower", 1.5)):
            p.start(stage)
            p.done(stage, seconds)
    return console.file.getvalue()


def test_progress_on_a_terminal_names_each_stage_and_its_time():
    out = _run(Console(file=io.StringIO(), force_terminal=True, width=100))
    assert "mlp: decompose 0.25 s" in out and "mlp: lower 1.50 s" in out


def test_progress_is_quiet_off_a_terminal(tmp_path, capsys):
    assert _run(Console(file=io.StringIO(), force_terminal=False)) == ""
    pybuda.compile(MLP(), torch.randn(2, 16, 64), output_dir=tmp_path)
    assert capsys.readouterr().err == ""
