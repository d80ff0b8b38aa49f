"""Op predicates for the overrides that take op names (legacy `pybuda.query`): `name_regex`, `layer_regex`, `op_type`,
combined with `&`, `|` and `negate()`. `set_epoch_break`, `set_chip_break` and `override_op_placement` accept one
where they accept an op name; the compile resolves it to the ops of the device graph it matches (before fusion)
and fails, naming the predicate, when it matches none. A name regex must match the whole op name (the legacy
compiler's `std::regex_match`)."""
from __future__ import annotations

import dataclasses
import re

from typing import Any

from .errors import UserInputError


@dataclasses.dataclass(frozen=True)
class NodePredicate:
    """A predicate over ops: `kind` is "name_regex", "layer_regex" or "op_type" (with `value`), or "not", "and",
    "or" (over `operands`)."""

    kind: str
    value: str = ""
    operands: tuple = ()

    def matches(self, node: Any) -> bool:
        """Whether op `node` (a graph Node) satisfies the predicate (an op type matches the op's own type or
        the framework op it was lowered from)."""
        if self.kind == "name_regex":
            return re.fullmatch(self.value, node.name) is not None
        if self.kind == "layer_regex":
            return bool(node.layer) and re.fullmatch(self.value, node.layer) is not None
        if self.kind == "op_type":
            return self.value in (node.op_type, node.framework_op_type)
        if self.kind == "not":
            return not self.operands[0].matches(node)
        if self.kind == "and":
            return all(p.matches(node) for p in self.operands)
        return any(p.matches(node) for p in self.operands)

    def negate(self) -> "NodePredicate":
        return NodePredicate("not", operands=(self,))

    def __and__(self, other: "NodePredicate") -> "NodePredicate":
        return NodePredicate("and", operands=(self, _predicate(other)))

    def __or__(self, other: "NodePredicate") -> "NodePredicate":
        return NodePredicate("or", operands=(self, _predicate(other)))

    def __str__(self) -> str:
        if self.kind in ("name_regex", "layer_regex", "op_type"):
            return f"{self.kind}({self.value!r})"
        if self.kind == "not":
            return f"{self.operands[0]}.negate()"
        return "(" + f" {'&' if self.kind == 'and' else '|'} ".join(map(str, self.operands)) + ")"


NodePredicateBuilder = NodePredicate        # the legacy class name


def _predicate(value) -> NodePredicate:
    if not isinstance(value, NodePredicate):
        raise UserInputError(f"pybuda.query: cannot combine a predicate with {value!r}; legal: another predicate "
                             "(name_regex, op_type)")
    return value


def name_regex(regex: str) -> NodePredicate:
    """The ops whose whole name matches `regex` (Python `re` syntax, which reads the legacy ECMAScript patterns
    alike for names)."""
    _check_regex("name_regex", regex)
    return NodePredicate("name_regex", regex)


def _check_regex(kind: str, regex: str) -> None:
    try:
        re.compile(regex)
    except re.error as e:
        raise UserInputError(f"pybuda.query.{kind}({regex!r}): not a regular expression ({e})") from None


def op_type(name: str) -> NodePredicate:
    """The ops of type `name` (a Buda op type such as "matmul", or the framework op they come from)."""
    return NodePredicate("op_type", name)


def layer_regex(regex: str) -> NodePredicate:
    """The ops whose whole layer matches `regex`: the names of the PyBudaModules whose forward traced the op,
    outermost first, joined by "." ("model.encoder"). Ops of a torch model, and those the compiler adds between
    layers, have no layer."""
    _check_regex("layer_regex", regex)
    return NodePredicate("layer_regex", regex)


def select(predicate: NodePredicate, nodes) -> list[str]:
    """The names of the ops among `nodes` (in their order) that `predicate` matches."""
    return [n.name for n in nodes if n.kind == "op" and predicate.matches(n)]


def pattern_matches(pattern: str, name: str) -> bool:
    """Whether op name `name` is named by `pattern`, an op name or a legacy regular expression over whole names
    (`dont_fuse`, `manual_fuse`); a pattern that is no regular expression is a plain name."""
    if pattern == name:
        return True
    try:
        return re.fullmatch(pattern, name) is not None
    except re.error:
        return False
