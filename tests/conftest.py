import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import pybuda  # noqa: E402


@pytest.fixture(autouse=True)
def _fresh_global_config():
    """Every test starts from the default global config."""
    pybuda.reset_configuration()
    yield
    pybuda.reset_configuration()
