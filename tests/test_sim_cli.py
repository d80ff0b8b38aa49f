"""`pybuda sim run|perf` (pybuda/tools/cli_sim.py)."""
from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys

import pytest

from pybuda.tools.cli_sim import add_sim_commands, main

from corpus import REAL  # noqa: E402
MHA = REAL + "graph_tests__netlists__netlist_bert_mha.yaml"
MUL = REAL + "op_tests__netlists__bh_test_plan_netlists__hlk_functional_tests__netlist_binary_fp16_mul_op.yaml"
TRAIN = REAL + "graph_tests__netlists__netlist_train.yaml"
FF = REAL + "graph_tests__netlists__pybuda_pregenerated__feedforward__grayskull__ff_1_32_128_netlist.yaml"


def test_sim_run_random_prints_output_statistics(capsys):
    assert main(["sim", "run", MHA, "--random", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "mha.output_mha_0_output.bias" in out and "1x128x128" in out
    for column in ("mean", "std", "min", "max", "nan"):
        assert column in out
    assert "executed 1 epoch(s): fwd_0" in out


def test_sim_run_program_and_params(capsys):
    assert main(["sim", "run", TRAIN, "--random", "--program", "run_fwd", "--param", "p_microbatch_count=2"]) == 0
    out = capsys.readouterr().out
    assert "executed 2 epoch(s): fwd_0" in out
    line = next(l for l in out.splitlines() if l.startswith("verify_module.output_add"))
    assert line.split()[1] == "2"  # two microbatches popped
    # the same seed gives the same statistics
    main(["sim", "run", TRAIN, "--random", "--program", "run_fwd", "--param", "p_microbatch_count=2"])
    assert line in capsys.readouterr().out


def test_sim_run_errors(capsys):
    assert main(["sim", "run", MHA]) == 2
    assert "--random" in capsys.readouterr().err
    assert main(["sim", "run", "/no/such.yaml", "--random"]) == 1
    assert "cannot read /no/such.yaml" in capsys.readouterr().err
    assert main(["sim", "run", MHA, "--random", "--program", "nope"]) == 1
    assert "no program 'nope'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["sim", "run", MHA, "--random", "--param", "novalue"])


def test_sim_perf_summary_and_csv(tmp_path, capsys):
    path = tmp_path / "ops.csv"
    assert main(["sim", "perf", MHA, "--csv", str(path), "--top", "3"]) == 0
    out = capsys.readouterr().out
    assert "samples/s" in out and "pipeline cyc" in out and "math util" in out and "mm cores" in out
    assert "Slowest ops" in out and "limited by" in out
    rows = list(csv.DictReader(open(path)))
    assert len(rows) == 16
    row = rows[0]
    for col in ("OP NAME", "OP TYPE", "EPOCH", "GRID", "CORE COUNT", "KERNEL CYCLES", "BW LIMITED CYCLES", "LIMITER",
                "MATH FIDELITY", "INPUT_0_Z", "INPUT_0_Y", "INPUT_0_X", "INPUT_0_DATATYPE", "OUTPUT_0_X",
                "OUTPUT_0_DATATYPE", "OUTPUT_0_MEMORY"):
        assert col in row and row[col] != "", col
    assert main(["sim", "perf", MUL, "--device", "e75", "--rich"]) == 0
    out = capsys.readouterr().out
    assert "e75" in out and "Epochs" in out
    assert main(["sim", "perf", FF, "--device", "n150"]) == 1  # a grayskull-only netlist
    assert "not wormhole_b0" in capsys.readouterr().err


def test_add_sim_commands_plugs_into_another_parser(capsys):
    parser = argparse.ArgumentParser(prog="pybuda")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("netlist")  # e.g. the group another module adds
    add_sim_commands(sub)
    args = parser.parse_args(["sim", "perf", MUL, "--top", "0"])
    assert args.command == "sim" and args.sim_command == "perf" and args.func(args) == 0
    assert "samples/s" in capsys.readouterr().out


def test_module_entry_point():
    env = dict(os.environ, PYTHONPATH=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    res = subprocess.run([sys.executable, "-m", "pybuda.tools.cli_sim", "sim", "perf", MUL, "--top", "1"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 0, res.stderr
    assert "samples/s" in res.stdout


def test_sim_group_is_wired_into_the_pybuda_command(capsys):
    from pybuda.tools.cli import main
    netlist = REAL + "graph_tests__netlists__netlist_module_direct_1x1.yaml"
    assert main(["sim", "perf", netlist]) == 0
    assert "samples/s" in capsys.readouterr().out.lower().replace("samples/second", "samples/s")
