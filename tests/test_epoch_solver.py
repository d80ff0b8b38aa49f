"""The CP-SAT epoch model (`pybuda.balancer.epoch_solver`): what it chooses on a small hand-made epoch, and the
debug export of every epoch model the CP-SAT policy solves (`balancer_export_models`), replayed."""
from __future__ import annotations

import torch

import pybuda
from pybuda.balancer.epoch_solver import EpochOp, build_model, replay, solve_epoch


def test_two_ops_take_the_fastest_candidates_that_fit_side_by_side():
    """On a 2x4 grid: op a's fast 2x3 candidate leaves op b one column, so b takes its 2x1; their pipeline is the
    slower of the two; the solver proves it optimal."""
    ops = [EpochOp("a", ((2, 3), (1, 1)), (100.0, 400.0)), EpochOp("b", ((2, 1), (2, 2)), (300.0, 150.0))]
    solution = solve_epoch(ops, [], rows=2, cols=4)
    assert solution.choice == (0, 0) and solution.pipeline == 300.0 and solution.optimal
    a, b = solution.locations
    assert {a[1], b[1]} == {0, 3}      # a in columns 0-2 and b in column 3, or b first
    assert build_model([EpochOp("big", ((3, 5),), (1.0,), transpose=False)], [], rows=2, cols=4) is None


def test_an_edge_the_producer_cannot_stream_to_forbids_the_pair():
    """The consumer's faster candidate cannot read the producer's only one in the epoch: it takes the other."""
    ops = [EpochOp("p", ((1, 1),), (10.0,)), EpochOp("c", ((1, 1), (1, 2)), (50.0, 80.0))]
    solution = solve_epoch(ops, [(0, 1, lambda kp, kc: kc == 1)], rows=1, cols=4)
    assert solution.choice == (0, 1) and solution.pipeline == 80.0


def test_exported_epoch_models_replay_deterministically(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(), torch.nn.Linear(1024, 256)).eval()
    config = pybuda.CompilerConfig(balancer_export_models=str(tmp_path / "models"))
    pybuda.compile(model, torch.randn(16, 128, 256), config=config, output_dir=tmp_path / "out")
    files = sorted((tmp_path / "models").glob("*.pb.txt"))
    assert files, "the CP-SAT policy solved no epoch model"
    assert files[0].name.startswith("000_")
    for path in files:
        replayed = replay(path)
        assert replayed.status in ("OPTIMAL", "FEASIBLE") and replayed.bound <= replayed.objective
        assert replay(path) == replayed          # one worker, a fixed seed, a deterministic time limit
        assert 'name: "P"' in path.read_text()
