"""Rewrites as a pattern plus a function, and the one driver that applies them (TVM Relax's DFPattern rewrites and
torch.fx's subgraph rewriter, reduced to what the passes need).

A `Pattern` says which nodes a rewrite looks at; a `Rewrite` pairs it with a function `fn(graph, node) -> bool` that
edits the graph at a match (with the `Graph` primitives: `replace`, `set_operand`, `rename`) and returns whether it
did. `sweep` visits the graph once per rewrite, in the declared order; `fixpoint` sweeps until nothing changes.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Collection, Sequence

from ..ir import Graph, Node
from ..ops import registry


@dataclasses.dataclass(frozen=True)
class Pattern:
    """A node to match; every condition given must hold.

    `op`: its op type, or one of several (None: any op); `op_kind`: its op's registry kind ("unary", "binary",
    ...); `node_kinds`: its node kinds (default: an op); `operands`: patterns for the producers of its first
    operands, each read without edge TMs (None: any producer, any TMs); `all_operands`: a pattern every producer
    matches, read without edge TMs; `users`: a pattern every user matches, reading the node without edge TMs (and
    there is at least one); `single_user`: exactly one user; `where(graph, node)`: anything else."""

    op: str | Collection[str] | None = None
    op_kind: str | None = None
    node_kinds: tuple = ("op",)
    operands: tuple = ()
    all_operands: Pattern | None = None
    users: Pattern | None = None
    single_user: bool = False
    where: Callable[[Graph, Node], bool] | None = None

    def __post_init__(self):
        if isinstance(self.op, str):
            object.__setattr__(self, "op", frozenset({self.op}))
        elif self.op is not None:
            object.__setattr__(self, "op", frozenset(self.op))
        object.__setattr__(self, "operands", tuple(self.operands))

    def admits(self, node: Node) -> bool:
        """The conditions on the node alone that need no lookup: its kind and op type (most nodes fail them)."""
        return node.kind in self.node_kinds and (node.kind != "op" or self.op is None or node.op_type in self.op)

    def matches(self, graph: Graph, node: Node) -> bool:
        if not self.admits(node):
            return False
        if node.kind == "op" and self.op_kind is not None and registry.get(node.op_type).kind != self.op_kind:
            return False
        if self.single_user and len(graph.users(node.name)) != 1:
            return False
        operands = graph.operands(node.name)
        if len(operands) < len(self.operands):
            return False
        for operand, pattern in zip(operands, self.operands):
            if pattern is not None and (operand.tms or not pattern.matches(graph, graph.node(operand.src))):
                return False
        if self.all_operands is not None and \
                any(o.tms or not self.all_operands.matches(graph, graph.node(o.src)) for o in operands):
            return False
        if self.users is not None:
            users = graph.users(node.name)
            if not users or any(graph.operands(user)[port].tms or not self.users.matches(graph, graph.node(user))
                                for user, port in users):
                return False
        return self.where is None or self.where(graph, node)


ANY = Pattern(node_kinds=("input", "parameter", "constant", "op"))
CONSTANT = Pattern(node_kinds=("parameter", "constant"), where=lambda graph, node: not node.mutable)


@dataclasses.dataclass(frozen=True)
class Rewrite:
    """`fn` applied at every node that matches `pattern`; calling a Rewrite runs one sweep of it alone.

    With `sweep_state`, `fn(graph, node, state)` also gets the object `sweep_state()` made for the current sweep
    (e.g. a memo of facts that the sweep's own edits leave true)."""

    name: str
    pattern: Pattern
    fn: Callable[..., bool]
    sweep_state: Callable[[], Any] | None = None

    def __call__(self, graph: Graph) -> bool:
        return sweep(graph, [self])


def rewrite(pattern: Pattern, sweep_state: Callable[[], Any] | None = None) -> Callable[[Callable[..., bool]], Rewrite]:
    """Decorator: the function becomes a Rewrite of `pattern`, named after it."""
    return lambda fn: Rewrite(fn.__name__, pattern, fn, sweep_state)


def sweep(graph: Graph, rewrites: Sequence[Rewrite]) -> bool:
    """Apply each rewrite in turn at every node that matches its pattern, visiting the nodes in the topological
    order of the graph as the rewrite's sweep starts (nodes removed meanwhile are skipped; a name given to a new node
    is visited as that node). True if any application changed the graph."""
    changed = False
    for rw in rewrites:
        state = () if rw.sweep_state is None else (rw.sweep_state(),)
        for name in graph.topo_order():
            node = graph.get(name)      # None: removed by an earlier application
            if node is not None and rw.pattern.admits(node) and rw.pattern.matches(graph, node):
                changed |= bool(rw.fn(graph, node, *state))
    return changed


def fixpoint(graph: Graph, rewrites: Sequence[Rewrite], between: Callable[[Graph], None] | None = None) -> None:
    """Sweep until no rewrite changes the graph; `between(graph)` runs after every sweep that changed it."""
    while sweep(graph, rewrites):
        if between is not None:
            between(graph)
