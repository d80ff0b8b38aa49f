"""The one error hierarchy: every error pybuda raises on purpose is a `PyBudaError`.

    PyBudaError
    ├── UserInputError (also a ValueError): something the user gave is wrong (a model, an input, a config option,
    │   │   an override, a netlist or TTI file): the message names it and what would be legal
    │   ├── UserTypeError (also a TypeError): an argument of the wrong type
    │   └── UsageError (also a RuntimeError): a call the object cannot serve (training an inference model, ...)
    └── InternalError (also a RuntimeError): pybuda itself went wrong (a pass broke a contract, the compiler wrote a
        netlist the backend would reject, verification failed): the message says it is a compiler bug and what
        to report

`except pybuda.PyBudaError` catches both; any other exception escaping pybuda is a bug too (a compile stage
notes that on it).
"""
from __future__ import annotations


class PyBudaError(Exception):
    """Base of every error pybuda raises on purpose."""


class UserInputError(PyBudaError, ValueError):
    """Something the user gave is wrong; the message names it and what would be legal."""


class UserTypeError(UserInputError, TypeError):
    """An argument of the wrong type; the message names it and the types that would be legal."""


class UsageError(UserInputError, RuntimeError):
    """A call the object cannot serve as compiled or loaded (training an inference model, running a CompileOnly
    model, ...); the message says what to do instead."""


class InternalError(PyBudaError, RuntimeError):
    """A pybuda bug: the message says so and what to report with it."""

    REPORT = ("this is a pybuda bug: please report it on the project's issue tracker with this message, the model "
              "(or a script that builds it), the compile call and its config")

    def __init__(self, message: str):
        self.detail = message
        super().__init__(f"{message}\n({self.REPORT})")

    def __reduce__(self):
        return (type(self), (self.detail,))
