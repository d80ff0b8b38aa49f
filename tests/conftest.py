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
