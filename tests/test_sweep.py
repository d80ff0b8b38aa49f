"""Sweeps on Ray (pybuda.tools.sweep): local Ray, a started head node reached through RAY_ADDRESS, resuming,
failed points, the table, the plot and the batch-size tuning."""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from pybuda.tools.sweep import SweepPoint, best_per_model, read_table, run_point, run_sweep, sweep_points, tune_batch
from pybuda.tools.zoo import ZOO

RAY = Path(sys.executable).with_name("ray")


@pytest.fixture(scope="module")
def local_ray():
    import ray
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()


def test_sweep_on_local_ray_records_failures_resumes_and_tunes_the_batch(local_ray, tmp_path):
    points = sweep_points(["mnist_cnn"], ["e150"], [1, 4, 16], ["Float16_b", "Bfp8_b"], ["HiFi3"])
    points.append(SweepPoint("no_such_model", "e150", 1, "Float16_b", "HiFi3"))
    rows = run_sweep(points, tmp_path)
    assert [r["status"] for r in rows] == ["ok"] * 6 + ["error"]
    assert "unknown zoo model 'no_such_model'" in rows[-1]["error"]
    direct = run_point(points[2])          # the same point outside Ray: the same estimate
    assert rows[2]["samples_per_s"] == direct["samples_per_s"] > 0
    table = read_table(tmp_path / "results.csv")
    assert [(r["microbatch"], r["df"], r["status"]) for r in table] == \
        [(str(p.microbatch), p.df, "ok" if p.model == "mnist_cnn" else "error") for p in points]
    assert (tmp_path / "samples_per_s.png").stat().st_size > 5_000
    assert best_per_model(rows)["mnist_cnn"]["microbatch"] == 16
    # resume: only the point whose result is gone runs again
    finished = {p.key: (tmp_path / "points" / f"{p.key}.json").stat().st_mtime_ns for p in points}
    (tmp_path / "points" / f"{points[0].key}.json").unlink()
    again = run_sweep(points, tmp_path)
    assert [r["samples_per_s"] for r in again[:6]] == [r["samples_per_s"] for r in rows[:6]]
    now = {p.key: (tmp_path / "points" / f"{p.key}.json").stat().st_mtime_ns for p in points}
    assert [k for k in finished if now[k] != finished[k]] == [points[0].key]
    # batch-size tuning over the Float16_b points: all finished here already, so nothing runs again
    result = tune_batch("mnist_cnn", "e150", [1, 4, 16], "Float16_b", "HiFi3", tmp_path)
    assert {p.key: (tmp_path / "points" / f"{p.key}.json").stat().st_mtime_ns for p in points} == now
    speeds = {int(r["microbatch"]): float(r["samples_per_s"]) for r in result["rows"]}
    assert int(result["best"]["microbatch"]) == max(speeds, key=speeds.get)
    small = int(result["smallest_within_knee"]["microbatch"])
    assert speeds[small] >= 0.95 * max(speeds.values())
    assert all(speeds[m] < 0.95 * max(speeds.values()) for m in speeds if m < small)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.sweep     # about a minute (a Ray head node started and stopped): the sweep tier
def test_sweep_through_ray_address_on_a_started_head_node(tmp_path):
    port = _free_port()
    # token authentication on both sides, as on a cluster (the head writes the token to ~/.ray/auth_token)
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token"}
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")   # short: Ray's socket paths must fit in 107 characters
    head = subprocess.Popen([str(RAY), "start", "--head", "--block", "--node-ip-address=127.0.0.1", f"--port={port}",
                             "--num-cpus=2",
                             "--include-dashboard=false", f"--temp-dir={temp}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, start_new_session=True)
    try:
        address = f"127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while subprocess.run([str(RAY), "status", f"--address={address}"], capture_output=True,
                             env=env).returncode != 0:
            assert head.poll() is None and time.monotonic() < deadline, "the Ray head node did not start"
            time.sleep(1)
        run = subprocess.run([sys.executable, "-m", "pybuda", "sweep", "--models", "mnist_cnn", "--microbatches",
                              "1,4", "--dfs", "Float16_b,Bfp8_b", "--out", str(tmp_path / "out")],
                             capture_output=True, text=True, timeout=300, env={**env, "RAY_ADDRESS": address})
        assert run.returncode == 0, run.stdout + run.stderr
        rows = read_table(tmp_path / "out" / "results.csv")
        assert len(rows) == 4 and all(r["status"] == "ok" and float(r["samples_per_s"]) > 0 for r in rows)
        assert "Best configuration per model" in run.stdout and "mnist_cnn" in run.stdout
    finally:   # the head node and every process it started (one session) stop together
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()
        shutil.rmtree(temp, ignore_errors=True)


@pytest.mark.sweep
def test_sweep_of_the_fast_tier_zoo(local_ray, tmp_path):
    models = [name for name, m in ZOO.items() if not m.full_size]
    rows = run_sweep(sweep_points(models, ["e150"], [1, 4, 16], ["Float16_b", "Bfp8_b"], ["HiFi3"]), tmp_path)
    assert len(rows) == len(models) * 6
    assert all(r["status"] == "ok" and r["samples_per_s"] > 0 for r in rows), [r["error"] for r in rows]
    assert set(best_per_model(rows)) == set(models)
