"""Netlist violations and the error that carries them."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any


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


class NetlistError(ValueError):
    """A netlist breaks the backend's rules; `.errors` lists every violation found."""

    def __init__(self, errors: list[NetlistViolation], header: str | None = None):
        self.errors = list(errors)
        self.header = header
        super().__init__(self._text())

    @property
    def rules(self) -> set[str]:
        return {e.rule for e in self.errors}

    def _text(self) -> str:
        n = len(self.errors)
        head = self.header or f"netlist is invalid: {n} violation{'s' if n != 1 else ''}"
        lines = [head]
        shown = self.errors[:200]
        lines += [f"  {e}" for e in shown]
        if n > len(shown):
            lines.append(f"  ... and {n - len(shown)} more")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self._text()
