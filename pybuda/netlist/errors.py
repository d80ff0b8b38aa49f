"""Netlist violations and the error that carries them."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import InternalError, UserInputError


@dataclass(frozen=True)
class NetlistViolation:
    """One broken rule: where (file, line, object), which rule, and what was expected versus found."""

    file: str | None
    line: int
    obj: str
    rule: str
    expected: Any
    actual: Any
    message: str

    def __str__(self) -> str:
        where = f"{self.file or '<netlist>'}:{self.line}" if self.line else (self.file or "<netlist>")
        detail = ""
        if self.expected is not None or self.actual is not None:
            detail = f" (expected {_fmt(self.expected)}, got {_fmt(self.actual)})"
        return f"{where}: {self.obj}: [{self.rule}] {self.message}{detail}"


def _fmt(v: Any) -> str:
    if isinstance(v, str):
        return v
    return repr(v)


def violations_text(errors: list, header: str | None = None) -> str:
    """A header line and one line per violation (the first 200)."""
    n = len(errors)
    lines = [header or f"netlist is invalid: {n} violation{'s' if n != 1 else ''}"]
    lines += [f"  {e}" for e in errors[:200]]
    if n > 200:
        lines.append(f"  ... and {n - 200} more")
    return "\n".join(lines)


class NetlistError(UserInputError):
    """A netlist breaks the backend's rules; `.errors` lists every violation found."""

    def __init__(self, errors: list[NetlistViolation], header: str | None = None):
        self.errors = list(errors)
        self.header = header
        super().__init__(violations_text(self.errors, header))

    @property
    def rules(self) -> set[str]:
        return {e.rule for e in self.errors}

    def __str__(self) -> str:
        return violations_text(self.errors, self.header)

    def __reduce__(self):
        return (type(self), (self.errors, self.header))


class CompiledNetlistError(InternalError):
    """A netlist pybuda compiled breaks the backend's rules (a compiler bug); `.errors` lists the violations."""

    def __init__(self, errors: list[NetlistViolation], model: str = ""):
        self.errors = list(errors)
        self.model = model
        super().__init__(violations_text(self.errors, f"the netlist compiled for model {model!r} breaks "
                                                      f"{len(self.errors)} backend rule(s)"))

    @property
    def rules(self) -> set[str]:
        return {e.rule for e in self.errors}

    def __reduce__(self):
        return (type(self), (self.errors, self.model))
