"""Exception type shared by every part of the backend simulator."""
from __future__ import annotations

from pybuda.errors import UserInputError


class SimulatorError(UserInputError):
    """A netlist, program or data problem found while parsing, simulating or estimating a netlist."""
