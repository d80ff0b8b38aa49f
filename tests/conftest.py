import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import pybuda  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh_global_config():
    """Every test starts from the default global config, and options with no effect yet warn again."""
    pybuda.reset_configuration()
    pybuda.config.reset_ineffective_warnings()
    yield
    pybuda.reset_configuration()


@pytest.fixture
def epoch_solvers(monkeypatch):
    """The CP-SAT planner's epoch solvers (`planner._EpochSolver`) the test's compiles make, in order."""
    from pybuda.balancer import planner

    solvers = []
    init = planner._EpochSolver.__init__

    def record(self, *args):
        init(self, *args)
        solvers.append(self)
    monkeypatch.setattr(planner._EpochSolver, "__init__", record)
    return solvers
