"""The validator's rule registry: each backend rule is a small function registered with `@rule(id, on=...)`.

    @rule("dest.ublock_limit", on=Op, section="§3.3", needs_device=True)
    def dest_ublock_limit(c: Context, op: Op) -> None:
        \"\"\"ublock_rt x ublock_ct fits the dest register (the device's tiles for the op's acc_df).\"\"\"
        ...
        c.fail(op, "...", expected, actual)

`on` names what the rule looks at, and the runner calls it once per such object: `Netlist` (once), `Queue`,
`Graph`, `Op` (every op of every graph), `Edge` (every input of a sized op whose producer exists), `FusedOp`,
`Program`, `Execute` (every execute instruction), or a tuple of these. `when` filters the objects;
`needs_device` skips the rule when the netlist's arch has no device description (hardware limits come from it).
A violation carries the rule's id; a rule whose ids come from the backend model (the TM and shape rules of
`pybuda.arch`) lists the ids it may report in `ids`. The docstring's first paragraph is the rule's row in the
rule table (`rule_table`, docs/netlist.md). Reader (schema) rules are declared with `declared_rule` for it.
"""
from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, NamedTuple

from ...device import DeviceSpec
from ...errors import InternalError
from ..errors import NetlistViolation
from ..model import Execute, FusedOp, Graph, Netlist, Op, Program, Queue, QueueAlloc


class Edge(NamedTuple):
    """Input `index` of `op` (a sized op), read from `producer` (a Queue or an Op, never None) through `tms`."""

    op: Op
    index: int
    src: str
    producer: Any
    graph: Graph

    @property
    def tms(self) -> list:
        return self.op.tms(self.index)


@dataclasses.dataclass(frozen=True)
class Rule:
    id: str
    on: Any       # Netlist, Queue, Graph, Op, Edge, FusedOp, Program, Execute, a tuple of them, or "schema"
    check: Callable | None
    doc: str
    section: str
    when: Callable | None = None
    ids: tuple = ()
    needs_device: bool = False

    @property
    def reports(self) -> tuple:
        """Every rule id this rule may report: its `ids` if it declares them (a family such as the shape rules,
        whose ids come from the backend model), else its own id."""
        return self.ids or (self.id,)


RULES: dict[str, Rule] = {}


def _register(r: Rule) -> None:
    if r.id in RULES:
        raise InternalError(f"netlist rule {r.id!r} is registered twice")
    RULES[r.id] = r


def rule(rule_id: str, *, on, section: str, when: Callable | None = None, ids: tuple = (),
         needs_device: bool = False) -> Callable:
    """Register the decorated function as validator rule `rule_id` (see the module docstring)."""
    def register(fn: Callable) -> Callable:
        doc = (fn.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
        if not doc:
            raise InternalError(f"netlist rule {rule_id!r} needs a docstring: its row in the rule table")
        _register(Rule(rule_id, on, fn, " ".join(doc.split()), section, when, tuple(ids), needs_device))
        return fn
    return register


def declared_rule(rule_id: str, doc: str, on: str = "schema", section: str = "§3.1 parse checks") -> None:
    """Declare, for the rule table, a rule that is not a registered check: the reader's (on "schema") or
    `check`'s own arch selection."""
    _register(Rule(rule_id, on, None, doc, section))


def truthy(v) -> bool:
    """A queue setting's boolean as the backend reads it (true, 1, "true", ...)."""
    if isinstance(v, bool):
        return v
    if isinstance(v, int):
        return v != 0
    if isinstance(v, str):
        return v.lower() in ("true", "1")
    return False


def positive(*vals) -> bool:
    """Every value is an int > 0."""
    return all(isinstance(v, int) and v > 0 for v in vals)


def sized(op) -> bool:
    """An op or queue whose t, mblock, ublock and grid are all > 0 (the rules that need its shape)."""
    return positive(op.t, *op.mblock, *op.ublock, *op.grid_size)


def describe(x) -> str:
    """How a violation names the object it is about."""
    if isinstance(x, Op):
        return f"op {x.name}"
    if isinstance(x, Queue):
        return f"queue {x.name}"
    if isinstance(x, Graph):
        return f"graph {x.name}"
    if isinstance(x, Program):
        return f"program {x.name}"
    if isinstance(x, FusedOp):
        return f"fused_op {x.id}"
    return str(x)


class Context:
    """What the rules share: the netlist, the selected arch and its device (`spec`, None without a device
    description), the chip count, maps derived once, and the violations found."""

    def __init__(self, n: Netlist, arch: str, spec: DeviceSpec | None, chips: int | None):
        self.n = n
        self.arch = arch
        self.gs = arch == "grayskull"
        self.spec = spec
        self.chips = chips
        self.errors: list[NetlistViolation] = []
        self.rule: Rule | None = None
        self._memo: dict = {}

    def memo(self, key, compute: Callable):
        """`compute()`, once per key for this netlist (what several rules derive from one object)."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def fail(self, where, message: str, expected=None, actual=None, line: int | None = None,
             rule: str | None = None) -> None:
        """Report a violation of the running rule (or of `rule`, one of the ids it declares) about `where`."""
        rid = rule or self.rule.reports[0]
        if rid not in self.rule.reports:
            raise InternalError(f"netlist rule {self.rule.id!r} reported {rid!r}, which it does not declare")
        ln = line if line is not None else getattr(where, "line", 0)
        self.errors.append(NetlistViolation(self.n.source, ln, describe(where), rid, expected, actual, message))

    # derived maps, computed once --------------------------------------------------------------------------------
    @functools.cached_property
    def ops(self) -> dict:
        """Every op by name (the first one of a duplicated name)."""
        out: dict = {}
        for g in self.n.graphs.values():
            for name, op in g.ops.items():
                out.setdefault(name, op)
        return out

    @functools.cached_property
    def graph_of(self) -> dict:
        """id(op) -> the graph holding the op."""
        return {id(op): g for g in self.n.graphs.values() for op in g.ops.values()}

    @functools.cached_property
    def prologue(self) -> dict:
        """queue -> the graphs in whose executes it is prologued."""
        out: dict = {}
        for _, ex in self.n.executes():
            for q, s in ex.queue_settings.items():
                if truthy(s.prologue):
                    out.setdefault(q, set()).add(ex.graph_name)
        return out

    @functools.cached_property
    def dynamic(self) -> set:
        """Queues some program allocates and deallocates (`allocate_queue`)."""
        return {q for p in self.n.programs for ins in p.instructions if isinstance(ins, QueueAlloc)
                for q in ins.queues}

    @functools.cached_property
    def untilizers(self) -> set:
        return {op.name for g in self.n.graphs.values() for op in g.ops.values() if op.untilize_output}

    @functools.cached_property
    def graph_io(self) -> dict:
        """graph -> the queues its ops read or write."""
        n = self.n
        io = {gname: {x for op in g.ops.values() for x in op.inputs if x in n.queues} for gname, g in n.graphs.items()}
        for qname, q in n.queues.items():
            op = self.ops.get(q.input) if q.fed_by_op else None
            if op is not None and op.graph in io:
                io[op.graph].add(qname)
        return io

    def producer(self, name: str, graph: Graph):
        """The op of `graph`, the queue, or another graph's op called `name` (None if there is none)."""
        op = graph.ops.get(name)
        if op is not None:
            return op
        q = self.n.queues.get(name)
        return q if q is not None else self.ops.get(name)

    def edges(self):
        """Every Edge: inputs of sized ops whose producer exists."""
        for g in self.n.graphs.values():
            for op in g.ops.values():
                if not sized(op):
                    continue
                for i, src in enumerate(op.inputs):
                    prod = self.producer(src, g)
                    if prod is not None:
                        yield Edge(op, i, src, prod, g)


def _subjects(c: Context, on) -> Any:
    n = c.n
    if isinstance(on, tuple):
        return (x for kind in on for x in _subjects(c, kind))
    if on is Netlist:
        return (None,)
    if on is Queue:
        return n.queues.values()
    if on is Graph:
        return n.graphs.values()
    if on is Op:
        return (op for g in n.graphs.values() for op in g.ops.values())
    if on is Edge:
        return c.edges()
    if on is FusedOp:
        return (n.fused_ops or {}).values()
    if on is Program:
        return n.programs
    if on is Execute:
        return (ex for _, ex in n.executes())
    raise InternalError(f"netlist rules cannot be on {on!r}")


def run(c: Context, rules) -> list[NetlistViolation]:
    """Apply `rules` (Rule objects, registry order) to the context's netlist; the violations, by source line."""
    for r in rules:
        if r.check is None or (r.needs_device and c.spec is None):
            continue
        c.rule = r
        for subject in _subjects(c, r.on):
            if subject is None:
                r.check(c)
            elif r.when is None or r.when(subject):
                r.check(c, subject)
    c.rule = None
    return c.errors
