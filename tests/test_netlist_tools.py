"""Reader/writer details, inspection API and the `pybuda netlist ...` command line."""
from __future__ import annotations

import io
import subprocess
import sys

import pytest
import yaml
from rich.console import Console

from pybuda.dataformat import DataFormat
from pybuda.netlist import (diff, draw_grid, dump_netlist, epoch_summaries, load, summary,
                            write_netlist)
from pybuda.tools.cli import main

from test_netlist_rules import BASE

from corpus import REAL_DIR as REAL  # noqa: E402
MODULE = REAL / "graph_tests__netlists__netlist_module_direct_1x1.yaml"
SOFTMAX_V1 = REAL / "graph_tests__netlists__netlist_softmax_v1.yaml"
TRAIN = REAL / "graph_tests__netlists__netlist_train.yaml"
needs_corpus = pytest.mark.skipif(not REAL.is_dir(), reason="netlist corpus not available")


def run_cli(*argv) -> tuple[int, str]:
    buf = io.StringIO()
    status = main(list(map(str, argv)), console=Console(file=buf, width=200, color_system=None))
    return status, buf.getvalue()


# --- reader / writer ------------------------------------------------------------------------------------------

def test_model_is_typed_and_keeps_lines():
    n = load(BASE, file="base.yaml")
    q = n.queues["act"]
    assert q.df is DataFormat.Float16_b and q.grid_size == (1, 1) and q.dram == [(0, 0x30000000)]
    assert q.shape == (1, 2, 4) and q.line == 5
    op = n.ops["add"]
    assert op.graph == "fwd_1" and op.input_tms == {1: [("broadcast", "r", 2)]}
    assert n.ops["mm"].attributes.m_k == 2 and n.ops["mm"].geometry.k_tiles == 4
    ex = n.programs[0].instructions[4]
    assert ex.graph_name == "fwd_0" and ex.queue_settings["act"].rd_ptr_local == "$lptr" and ex.line == 36
    assert n.fused_ops["0"].schedules[0][1].output == "output"
    assert n.arch == "grayskull" and n.archs == ["grayskull", "wormhole_b0"]


def test_writer_uses_legacy_layout_and_hex_addresses():
    n = load(BASE)
    text = dump_netlist(n)
    lines = text.splitlines()
    assert lines[:2] == ["devices:", "  arch: [grayskull, wormhole_b0]"]
    assert text.index("queues:") < text.index("graphs:") < text.index("programs:") < text.index("fused_ops:")
    act = next(line for line in lines if line.strip().startswith("act:"))
    assert act.strip().startswith("act: {input: HOST, type: queue, entries: 4, grid_size: [1, 1], t: 1,")
    assert "dram: [[0, 0x30000000]]" in act and "host: [0x0]" in text
    mm = text[text.index("    mm: {"):text.index("  fwd_1:")]
    assert mm.strip().count("\n") == 2   # the legacy three lines: placement, blocking and formats, attributes
    assert mm.index("type:") < mm.index("grid_loc:") < mm.index("inputs:") < mm.index("t:") < mm.index("mblock:") \
        < mm.index("buf_size_mb:") < mm.index("ublock_order:") < mm.index("in_df:") < mm.index("math_fidelity:") \
        < mm.index("attributes:")
    assert "{m_k: 2, min_buffer_input: 0, u_kt: 2}" in mm
    assert load(text) == n


def test_to_dict_is_plain_yaml_data():
    n = load(BASE)
    data = n.to_dict()
    assert data["queues"]["act"]["df"] == "Float16_b" and data["queues"]["act"]["dram"] == [[0, 0x30000000]]
    assert yaml.safe_load(yaml.safe_dump(data, sort_keys=False)) == yaml.safe_load(dump_netlist(n))
    assert data["fused_ops"][0]["schedules"][0][0]["mul"]["output"] == "dest"
    assert load(data) == n


def test_write_is_atomic_and_leaves_no_temporaries(tmp_path):
    n = load(BASE)
    path = write_netlist(n, tmp_path / "sub" / "x.yaml", header="# hello")
    assert path.read_text().startswith("# hello\n") and load(path) == n
    assert sorted(p.name for p in path.parent.iterdir()) == ["x.yaml"]
    bad = load(BASE)
    bad.queues["act"].dram = [(0,)]   # the writer fails: the old file stays, no temporary is left behind
    with pytest.raises(ValueError):
        write_netlist(bad, path)
    assert load(path) == n and sorted(p.name for p in path.parent.iterdir()) == ["x.yaml"]


def test_strings_that_look_like_other_types_are_quoted():
    n = load(BASE)
    q = n.queues.pop("act")
    q.name = "true"
    n.queues["true"] = q
    for op in n.ops.values():
        op.inputs = ["true" if i == "act" else i for i in op.inputs]
    text = dump_netlist(n)
    assert '"true": {' in text
    assert list(load(text).queues)[-1] == "true"


def test_unknown_top_level_sections_are_kept_verbatim():
    text = BASE + "\ntest-config:\n  comparison-config: {type: AllCloseHw, atol: 0.01}\n"
    n = load(text)
    assert n.extra_sections == {"test-config": {"comparison-config": {"type": "AllCloseHw", "atol": 0.01}}}
    assert load(dump_netlist(n)) == n


def test_load_accepts_path_text_and_dict(tmp_path):
    p = tmp_path / "n.yaml"
    p.write_text(BASE)
    a, b, c = load(p), load(str(p)), load(BASE)
    d = load(yaml.safe_load(BASE))
    assert a == b == c == d and a.source == str(p) and c.source is None


def test_c_loader_is_used():
    from pybuda.netlist import reader
    if yaml.__with_libyaml__:
        assert reader._Loader is yaml.CSafeLoader


# --- inspection -----------------------------------------------------------------------------------------------

def test_summary_and_epochs_of_the_base_netlist():
    n = load(BASE)
    s = summary(n)
    assert s.ops == 4 and s.queues == 5 and s.graphs == 2 and s.fused_ops == 1
    assert s.ops_by_type == {"matmul": 1, "add": 1, "fused_op": 1, "nop": 1}
    assert s.cores_per_epoch == [1, 3]
    assert [q.name for q in s.e2e_queues] == ["e2e_mm"]
    act = next(q for q in s.queue_infos if q.name == "act")
    assert act.shape_tiles == (1, 2, 4) and act.shape_elements == (1, 64, 128) and act.role == "input"
    assert act.bytes == 4 * 8 * 2080 + 32
    assert s.dram_bytes_per_channel[(0, 0)] == act.bytes and s.host_bytes > 0
    e0, e1 = epoch_summaries(n)
    assert (e0.graph, e0.e2e_out, e1.e2e_in) == ("fwd_0", ["e2e_mm"], ["e2e_mm"])
    assert e1.output_queues == ["out"] and e1.grid == (10, 12)
    assert e1.tensors[0].shape_tiles == (1, 2, 2) and e1.tensors[0].elements == 64 * 64


def test_grid_drawing_labels_each_core():
    n = load(BASE)
    text = draw_grid(n, "fwd_1")
    rows = text.splitlines()
    assert rows[1].split()[:5] == ["0", "A", "B", "C", "."]
    assert len(rows[1].split()) == 13                   # row label + 12 grayskull columns
    assert "A  add  (add, 1x1 @ [0, 0])" in text and "C  out_nop" in text
    assert len(draw_grid(n, "fwd_1", arch="wormhole_b0").splitlines()[1].split()) == 9


def test_diff_lists_added_removed_and_changed_fields():
    a, b = load(BASE), load(BASE)
    b.ops["mm"].grid_size = (1, 2)
    b.ops["mm"].attributes.u_kt = 4
    del b.queues["out"]
    b.queues["act"].entries = 8
    b.programs[0].instructions.pop(6)
    changes = diff(a, b)
    text = "\n".join(map(str, changes))
    assert "- queue out" in text and "~ queue act: entries: 4 -> 8" in text
    assert "~ op mm: grid_size: [1, 1] -> [1, 2]" in text and "~ op mm: attributes:" in text
    assert any(c.what == "program" and c.kind == "changed" for c in changes)
    assert diff(a, load(BASE)) == []


# --- command line ---------------------------------------------------------------------------------------------

def test_cli_validate_ok_and_invalid(tmp_path):
    good = tmp_path / "good.yaml"
    good.write_text(BASE)
    status, out = run_cli("netlist", "validate", good)
    assert status == 0 and "OK" in out
    bad = tmp_path / "bad.yaml"
    bad.write_text(BASE.replace("m_k: 2, u_kt: 2", "m_k: 1, u_kt: 2"))
    status, out = run_cli("netlist", "validate", good, bad)
    assert status == 1 and "shape.matmul_in0" in out and "op mm" in out
    broken = tmp_path / "broken.yaml"
    broken.write_text(BASE.replace("entries: 4, grid_size", "entries: four, grid_size", 1))
    status, out = run_cli("netlist", "validate", broken)
    assert status == 1 and "schema.type" in out


@needs_corpus
def test_cli_on_corpus_files():
    status, out = run_cli("netlist", "validate", SOFTMAX_V1)
    assert status == 1 and "shape.eltwise" in out and "op exp" in out
    status, out = run_cli("netlist", "summary", MODULE, "--queues")
    assert status == 0 and "e2e_matmul1_0" in out and "DRAM bytes per channel" in out
    status, out = run_cli("netlist", "epochs", TRAIN, "--ops")
    assert status == 0 and "bwd_1" in out and "e2e_sqrt_0" in out
    status, out = run_cli("netlist", "grid", TRAIN, "--epoch", "2")
    assert status == 0 and "opt_2" in out and "opt_in0_verify_module.weights2_multiply_1" in out
    status, out = run_cli("netlist", "grid", TRAIN, "--epoch", "7")
    assert status == 1


def test_cli_diff(tmp_path):
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(BASE)
    b.write_text(BASE.replace("entries: 4, grid_size: [1, 1], t: 1, mblock: [2, 2], ublock: [1, 2]",
                              "entries: 8, grid_size: [1, 1], t: 1, mblock: [2, 2], ublock: [1, 2]", 1))
    status, out = run_cli("netlist", "diff", a, b)
    assert status == 0 and "act" in out and "entries" in out and "8" in out
    status, _ = run_cli("netlist", "diff", a, b, "--exit-code")
    assert status == 1
    status, out = run_cli("netlist", "diff", a, a)
    assert status == 0 and "no differences" in out


@pytest.mark.parametrize("module", ["pybuda", "pybuda.tools.cli"])
def test_console_script_entry_point(tmp_path, module):
    """`python -m pybuda` works like the `pybuda` command (exit status included)."""
    good, bad = tmp_path / "n.yaml", tmp_path / "bad.yaml"
    good.write_text(BASE)
    bad.write_text(BASE.replace("m_k: 2, u_kt: 2", "m_k: 1, u_kt: 2"))
    r = subprocess.run([sys.executable, "-m", module, "netlist", "validate", str(good)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "OK" in r.stdout
    r = subprocess.run([sys.executable, "-m", module, "netlist", "validate", str(bad)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1 and "shape.matmul_in0" in r.stdout


@pytest.mark.parametrize("enabled", [True, False])
def test_load_leaves_the_garbage_collector_as_it_found_it(enabled):
    import gc
    was = gc.isenabled()
    (gc.enable if enabled else gc.disable)()
    try:
        load(BASE)
        with pytest.raises(Exception):
            load("queues: [unclosed")
        assert gc.isenabled() is enabled
    finally:
        (gc.enable if was else gc.disable)()
