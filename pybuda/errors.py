"""The one error hierarchy: every error pybuda raises on purpose is a `PyBudaError`.

    PyBudaError
    ├── UserInputError (also a ValueError): something the user gave is wrong (a model, an input, a config option,
    │   an override, a netlist or TTI file): the message names it and what would be legal
    └── InternalError (also a RuntimeError): pybuda itself went wrong (a pass broke a contract, the compiler wrote a
        netlist the backend would reject, verification failed): the message says it is a compiler bug and what
        to report

`except pybuda.PyBudaError` catches both; a bare traceback of any other exception is a bug too.
"""
from __future__ import annotations

ISSUES_URL = "https://github.com/pybuda/pybuda/issues"


class PyBudaError(Exception):
    """Base of every error pybuda raises on purpose."""


class UserInputError(PyBudaError, ValueError):
    """Something the user gave is wrong; the message names it and what would be legal."""


class InternalError(PyBudaError, RuntimeError):
    """A pybuda bug: the message says so and what to report with it."""

    REPORT = ("this is a pybuda bug, not a problem with your model: please report it at " + ISSUES_URL +
              " with this message, the model (or a script that builds it), the compile call and its config")

    def __init__(self, message: str):
        self.detail = message
        super().__init__(f"{message}\n({self.REPORT})")

    def __reduce__(self):
        return (type(self), (self.detail,))
