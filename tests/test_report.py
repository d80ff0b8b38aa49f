"""The HTML report (`compiled.report`, `pybuda report`): its content, and the page in a real headless browser
(Debian's chromium; `make test` installs it with apt, the browser tests skip where it is missing)."""
from __future__ import annotations

import io
import re
from html import unescape
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from rich.console import Console

import pybuda
from pybuda.report import from_compiled, render
from pybuda.tools.cli import main
from pybuda.tools.models import MNISTCNN
from pybuda.tools.shared import real_netlist

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="chromium is not installed: `make test` installs Debian's chromium with apt, which "
                             "needs root and the Debian mirror; the browser tests are skipped")
LEGACY = real_netlist("graph_tests__netlists__bert_base_inference.yaml")


@pytest.fixture(scope="module")
def mnist(tmp_path_factory):
    """The demo's MNIST CNN compiled for e150 and its report."""
    torch.manual_seed(0)
    out = tmp_path_factory.mktemp("report")
    compiled = pybuda.compile(MNISTCNN().eval(), torch.randn(8, 1, 28, 28), device="e150", output_dir=out)
    return compiled, compiled.report(out / "mnist.html")


def headless(page: Path, *flags: str, fragment: str = "") -> subprocess.CompletedProcess:
    """Chromium headless on `page`; its console messages go to stderr (`:CONSOLE` lines)."""
    return subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                           "--enable-logging=stderr", "--v=0", *flags, page.resolve().as_uri() + fragment],
                          capture_output=True, text=True, timeout=120)


def console_messages(run: subprocess.CompletedProcess) -> list[str]:
    return [line for line in run.stderr.splitlines() if ":CONSOLE" in line]


def test_report_holds_the_summary_stages_plan_and_every_placed_op(mnist):
    compiled, path = mnist
    html = path.read_text()
    placement = compiled.placement
    assert f"{placement.estimated_cycles:,}" in html and f"{placement.bound_ratio:.2f}x" in html
    for stage in compiled.stage_times:
        assert f"<td>{stage}</td>" in html or f'<a href="#stage-{stage}">{stage}</a>' in html, stage
    for stage in compiled.graphs:
        assert f'id="stage-{stage}"' in html, stage
    for graph in compiled.netlist.graphs.values():
        for op in graph.ops:
            assert f'<g class="op" data-op="{op}"' in html, op
    assert "<svg" in html and not re.search(r'(src|href)="(https?:)?//|url\([^#]|@import', html)   # nothing fetched


def test_report_is_deterministic(mnist):
    compiled, _ = mnist
    assert render(from_compiled(compiled)) == render(from_compiled(compiled))


def test_cli_report_of_a_legacy_netlist(tmp_path):
    if not LEGACY.is_file():
        pytest.skip("netlist corpus not available")
    buf = io.StringIO()
    status = main(["report", str(LEGACY), "-o", str(tmp_path / "bert.html")],
                  console=Console(file=buf, width=200, color_system=None))
    assert status == 0, buf.getvalue()
    html = (tmp_path / "bert.html").read_text()
    assert "No plan: a netlist file alone" in html and 'data-op="matmul_2"' in html
    status = main(["report", str(tmp_path / "missing.yaml"), "-o", str(tmp_path / "m.html")],
                  console=Console(file=buf, width=200, color_system=None))
    assert status == 1 and "missing.yaml" in buf.getvalue() and not (tmp_path / "m.html").exists()


def test_a_noc_link_that_limits_an_epoch_is_drawn_on_its_grid():
    """ResNet-50's calibration netlist (n150): epoch 3's slowest op, add_155, is limited by the NOC0 link from core
    0,2 to core 0,3; the report names it and draws it between those cells."""
    from pybuda.report import from_file
    from pybuda.report.render import CELL
    from pybuda.tools.shared import CALIBRATION_NETLISTS
    path = CALIBRATION_NETLISTS / "perf_lib__graph_tests__wormhole_b0__inference__resnet50_hifi3_fp16b.yaml"
    if not path.is_file():
        pytest.skip("netlist corpus not available")
    data = from_file(path)
    epoch = data.parts[0].epochs[3]
    assert (epoch.slowest_op, epoch.link.label, epoch.link.src, epoch.link.dst) == \
        ("add_155", "noc0 0,2 -> 0,3", (0, 2), (0, 3))
    html = unescape(render(data))
    assert "epoch 3 (" in html and "limited by noc_link noc0 0,2 -> 0,3" in html
    group = re.search(r'<g class="noc-link" data-link="noc0 0,2 -> 0,3">(.*?)</g>', html, re.S).group(1)
    line = re.search(r'<line class="noc-link" x1="([\d.]+)" y1="([\d.]+)" x2="([\d.]+)" y2="([\d.]+)"/>', group)
    centre = [c * CELL + CELL / 2 + 1 for c in (2, 0, 3, 0)]     # cells (row 0, column 2) and (row 0, column 3)
    assert list(map(float, line.groups())) == centre
    assert group.count("<circle") == 2


@needs_chromium
def test_console_check_catches_a_script_error(tmp_path):
    page = tmp_path / "broken.html"
    page.write_text("<html><body><script>undefinedFunction();</script></body></html>")
    assert any("undefinedFunction" in m for m in console_messages(headless(page, "--dump-dom")))


@needs_chromium
def test_report_in_the_browser_loads_searches_sorts_and_shows_the_grid(mnist, tmp_path):
    compiled, path = mnist
    run = headless(path, "--dump-dom", fragment="#search=matmul_11&sort=limiter cycles")
    assert run.returncode == 0 and console_messages(run) == []
    dom = run.stdout
    # the grid of the placement shows every op of the netlist, the searched one marked
    grid = dom[dom.index('<svg class="grid"'):]
    for op in compiled.netlist.graphs["fwd_0_0"].ops:
        assert f'data-op="{op}"' in grid, op
    assert re.search(r'data-op="matmul_11"[^>]*>\s*<rect class="op[^"]*\bhit\b', dom)
    # the op table keeps the searched op and hides the others
    table = dom[dom.index('<table class="ops'):]
    table = table[:table.index("</table>")]
    rows = re.findall(r'<tr data-op="([^"]+)"[^>]*?( hidden="")?>', table)
    assert [op for op, hidden in rows if not hidden] == ["matmul_11"]
    # sorted by limiter cycles, largest first
    cycles = [float(v) for v in re.findall(r'<td class="num" data-value="[^"]*">[^<]*</td>\s*'
                                           r'<td class="num" data-value="([^"]*)">', table)]
    assert cycles == sorted(cycles, reverse=True) and len(cycles) == len(rows)
    shot = tmp_path / "report.png"
    headless(path, f"--screenshot={shot}", "--window-size=1400,1800", fragment="#search=matmul")
    assert shot.stat().st_size > 10_000


def test_report_of_a_training_model_shows_each_program(tmp_path):
    from pybuda.optimizers import SGD
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    compiled = pybuda.compile(model, torch.randn(4, 32), loss=torch.nn.CrossEntropyLoss(), optimizer=SGD(0.1),
                              sample_targets=torch.randint(0, 10, (4,)), output_dir=tmp_path)
    html = compiled.report(tmp_path / "train.html").read_text()
    for program in ("run_fwd", "run_bwd", "run_opt"):
        assert f"program {program}:" in html
    ops = {op for g in compiled.netlist.graphs.values() for op in g.ops}
    assert {op for op in ops if f'<g class="op" data-op="{op}"' in html} == ops
