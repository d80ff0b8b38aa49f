"""`pybuda perf`: the perf-analyzer views of a netlist or TTI image and the comparison with a second one (--vs)."""
from __future__ import annotations

import io

import pytest
import torch
from rich.console import Console

import pybuda
from pybuda.backend_sim import estimate
from pybuda.backend_sim.perf_compare import limiter_rows, op_type_rows, summary_rows
from pybuda.tools.cli import main
from pybuda.tools.models import MNISTCNN
from pybuda.tools.shared import real_netlist

LEGACY_BERT = real_netlist("graph_tests__netlists__bert_base_inference.yaml")
needs_corpus = pytest.mark.skipif(not LEGACY_BERT.is_file(), reason="netlist corpus not available")


def run_cli(*argv) -> tuple[int, str]:
    buf = io.StringIO()
    status = main(list(map(str, argv)), console=Console(file=buf, width=220, color_system=None))
    return status, buf.getvalue()


@pytest.fixture(scope="module")
def mnist_tti(tmp_path_factory):
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("perf") / "mnist.tti"
    compiled = pybuda.compile(MNISTCNN().eval(), torch.randn(8, 1, 28, 28), device="e150",
                              output_dir=path.parent / "out")
    compiled.save(path)
    return path, compiled


def _row(out: str, label: str) -> list[str]:
    line = next(l for l in out.splitlines() if l.strip("│┃ ").startswith(label))
    return [c.strip() for c in line.strip("│┃").split("│")]


@needs_corpus
def test_perf_vs_a_legacy_netlist(mnist_tti):
    path, compiled = mnist_tti
    status, out = run_cli("perf", path, "--vs", LEGACY_BERT, "--top", "3")
    assert status == 0, out
    ours, legacy = compiled.perf, estimate(str(LEGACY_BERT))
    assert "Slowest ops (top 3" in out and "math util" in out and "limited by" in out
    label, a, b, ratio = _row(out, "samples/s")
    assert a == f"{ours.samples_per_second:,.1f}" and b == f"{legacy.samples_per_second:,.1f}"
    assert ratio == f"{ours.samples_per_second / legacy.samples_per_second:.2f}x"
    assert _row(out, "epochs")[1:3] == [str(len(ours.epochs)), str(len(legacy.epochs))]
    assert "DRAM channel" in out and "Ops by type" in out


def test_perf_compare_of_a_netlist_with_itself(mnist_tti):
    _, compiled = mnist_tti
    report = estimate(compiled.netlist_path, "e150")
    assert all(r[3] in ("1.00x", "-") for r in summary_rows(report, report))
    shares = limiter_rows(report, report)
    assert sum(float(r[1].rstrip("%")) for r in shares) == pytest.approx(100.0, abs=0.2)
    assert all(r[1] == r[2] and r[3] == r[4] for r in op_type_rows(report, report))
    assert sum(int(r[1]) for r in op_type_rows(report, report)) == len(report.ops)


def test_perf_errors_name_the_part_and_the_file(mnist_tti, tmp_path):
    path, compiled = mnist_tti
    from pybuda.runtime.tti import netlist_sources, read_tti
    assert netlist_sources(path) == [(path.name, compiled.runtime.netlist_texts[0])]
    assert read_tti(path, arrays=False)[2] == {} and read_tti(path)[2]
    status, out = run_cli("perf", path, "--part", "3")
    assert status == 1 and "holds 1 netlist(s); --part 3 is not one of 0..0" in out
    status, out = run_cli("perf", tmp_path / "missing.yaml")
    assert status == 1 and "missing.yaml" in out
