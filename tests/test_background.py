"""The planner's background work (`pybuda.balancer.background.Background`): run beside the caller, in a forked
process where the platform forks; its value, or its exception, comes back."""
from __future__ import annotations

import os

import pytest

from pybuda.balancer.background import Background
from pybuda.balancer.op_model import BalancerError


def test_the_work_runs_in_another_process_and_its_value_comes_back():
    parent = os.getpid()
    work = Background(lambda: (os.getpid(), sum(range(1000)), {"plan": [1, 2]}))
    pid, total, plan = work.result()
    assert pid != parent and total == 499500 and plan == {"plan": [1, 2]}


def test_the_works_exception_is_raised_by_result():
    def fails():
        raise BalancerError("op 'x' fits no epoch")
    work = Background(fails)
    with pytest.raises(BalancerError, match="fits no epoch"):
        work.result()


def test_a_result_that_cannot_be_sent_back_says_so():
    work = Background(lambda: (lambda: None))      # a lambda does not pickle
    with pytest.raises(RuntimeError, match="could not be sent back"):
        work.result()


def test_without_fork_the_work_runs_in_a_thread(monkeypatch):
    monkeypatch.delattr(os, "fork")
    parent = os.getpid()
    work = Background(lambda: os.getpid())
    assert work.result() == parent


def test_without_fork_work_that_shares_the_callers_state_runs_when_its_result_is_taken(monkeypatch):
    """Work that reads state the caller's search changes must not run beside it in a thread: it runs after."""
    monkeypatch.delattr(os, "fork")
    log = []
    with Background(lambda: log.append("work") or len(log), shares_state=True) as work:
        log.append("caller")
        assert work.result() == 2 and log == ["caller", "work"]


def test_a_process_whose_result_is_not_taken_is_stopped_on_exit():
    import time
    with Background(lambda: time.sleep(60)) as work:
        process = work._process
        assert process.is_alive()
    assert not process.is_alive()
