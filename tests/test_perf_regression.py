"""The performance regression runner (`pybuda.tools.perf_regression`): its comparison flags a slower plan and
only that, and the fast tier on e150 holds its checked-in baseline (`benchmarks/perf_baseline.json`), with the
default (CP-SAT) plan never worse than the greedy policy's."""
from pathlib import Path

import pytest

from pybuda.tools import perf_regression as pr

E150_FAST = [case for case in pr.cases("fast") if case.device == "e150"]


def _figures(cycles: int) -> dict:
    return {"estimated_cycles": cycles}


def test_compare_flags_only_slower_plans():
    baseline = {"a": _figures(1000), "b": _figures(1000), "c": _figures(1000)}
    measured = {"a": _figures(1004), "b": _figures(1010), "c": _figures(900), "d": _figures(5)}
    regressions, notes = pr.compare(baseline, measured)
    assert [line.split(":")[0] for line in regressions] == ["b"]             # 1 % slower; 0.4 % is within tolerance
    assert any(line.startswith("c:") and "improved" in line for line in notes)
    assert any(line.startswith("d:") and "no baseline" in line for line in notes)


def test_compare_flags_compiles_slower_in_reference_units():
    was = {**_figures(1000), "compile_units": 100.0, "compile_s": 30.0}
    baseline = {"a": was, "b": was, "c": {**was, "compile_s": 2.0}}
    measured = {"a": {**_figures(1000), "compile_units": 124.0, "compile_s": 37.0},
                "b": {**_figures(1000), "compile_units": 130.0, "compile_s": 39.0},
                "c": {**_figures(1000), "compile_units": 200.0, "compile_s": 4.0}}
    regressions, _ = pr.compare(baseline, measured)
    # 30 % slower; 24 % is within tolerance; a 2-second compile is not compared
    assert [line.split(":")[0] for line in regressions] == ["b"]
    assert pr.compare(baseline, measured, compile_time=False)[0] == []


def test_compare_notes_a_netlist_whose_bytes_changed():
    baseline = {k: {**_figures(1000), "netlist_sha256": k * 64} for k in ("a", "b")}
    measured = {k: {**_figures(1000), "netlist_sha256": d * 64} for k, d in (("a", "a"), ("b", "c"))}
    regressions, notes = pr.compare(baseline, measured)
    assert regressions == [] and notes == ["b: the netlist's bytes changed (sha256 bbbbbbbbbbbb -> cccccccccccc)"]


def test_unknown_tier_is_refused():
    with pytest.raises(ValueError, match="legal: fast, full, published"):
        pr.cases("medium")


def test_baseline_covers_the_fast_tier():
    baseline = pr.load_baseline()
    assert {case.key for case in pr.cases("fast")} <= set(baseline)


def test_baseline_covers_the_published_rows_and_the_docs_show_them():
    """Every configuration of the published benchmark table is in the baseline (or, if it does not compile, listed
    as not measured), and docs/models.md holds the table `benchmarks/published_table.py` makes from it."""
    import importlib.util
    root = Path(__file__).resolve().parents[1]
    spec = importlib.util.spec_from_file_location("published_table", root / "benchmarks" / "published_table.py")
    published_table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(published_table)
    baseline = pr.load_baseline()
    assert all(case.key in baseline for case in pr.cases("published"))
    assert published_table.table(baseline) in (root / "docs" / "models.md").read_text()


@pytest.mark.parametrize("case", E150_FAST, ids=lambda c: c.key)
def test_fast_tier_holds_its_baseline_and_beats_greedy(case):
    measured = {case.key: pr.measure(case)}
    regressions, _ = pr.compare(pr.load_baseline(), measured, compile_time=False)   # timing: not in unit tests
    assert not regressions, regressions
    figures = measured[case.key]
    assert figures["lower_bound_cycles"] <= figures["estimated_cycles"]
    greedy = pr.measure(case, policy="Greedy")
    assert greedy["policy"] == "Greedy" and figures["estimated_cycles"] <= greedy["estimated_cycles"]
