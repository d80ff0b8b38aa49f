"""Fracture groups (`insert_fracture_group`, `CompilerConfig.fracture_groups`): each named op of the decomposed
framework graph becomes `factor` ops along one output dim, each over its slice of the operands (a narrow, which
consteval folds for parameters and constants), joined by a concatenation for whatever reads the whole. An op of
the group that reads an op fractured along the same dim by the same factor takes that op's piece directly, so a
chain of fractured ops runs as `factor` independent chains with one gather at the end (the legacy compiler's
fracture pass, on one chip: the pieces are ops of their own that the balancer sizes and places like any other).

Fracturable: unary and binary element-wise ops (a broadcast operand is not sliced) and matmuls (dim -1 slices the
second operand's columns, dim -2 the first operand's rows, a batch dim both where they have it)."""
from __future__ import annotations

import difflib

from ..config import check_fracture_chips
from ..errors import UserInputError
from ..ir import Graph, Node, Operand
from ..ops import registry
from ..ops.common import norm_dim
from ..ops.registry import add_op

FRACTURABLE_KINDS = ("unary", "binary", "matmul")


class FractureError(UserInputError):
    """A fracture group that cannot apply to the graph: an unknown op, an op type that cannot be fractured, a dim
    its factor does not divide."""


def fracture(graph: Graph, groups: list) -> Graph:
    """The graph with every group of `groups` (`fracture_groups` entries: (nodes as (name, [dims], [factors]),
    {name: chip_ids})) fractured, in order."""
    for nodes, chip_ids in groups:
        check_fracture_chips("fracture_groups", chip_ids)     # a list appended to past the config's check
        _fracture_group(graph, _resolved(graph, nodes))
    graph.remove_dead()
    return graph


def _resolved(graph: Graph, nodes: list) -> dict[str, tuple[int, int]]:
    """{op: (negative output dim, factor)} of a group, checked; a bare name takes the group's first explicit dims
    and factors."""
    explicit = next(((dims, factors) for _, dims, factors in nodes if dims), None)
    ops = graph.op_names()
    out = {}
    for name, dims, factors in nodes:
        where = f"insert_fracture_group({name!r})"
        node = graph.get(name)
        if node is None or node.kind != "op":
            close = difflib.get_close_matches(name, ops, n=3, cutoff=0.5)
            raise FractureError(f"{where}: no op named {name!r} in the decomposed graph; "
                                f"{'closest: ' + ', '.join(map(repr, close)) if close else 'no similar op names'}")
        if not dims:
            if explicit is None:
                raise FractureError(f"{where}: no dim and factor given, and no op of its group gives one to infer "
                                    "them from; pass (name, dim, factor)")
            dims, factors = explicit
        if len(dims) != 1:
            raise FractureError(f"{where}: fractures along one dim per op here, got dims {dims}; fracture along "
                                "one of them")
        kind = registry.get(node.op_type).kind
        if kind not in FRACTURABLE_KINDS:
            raise FractureError(f"{where}: a {node.op_type} ({kind}) cannot be fractured; fracturable: element-wise "
                                "unary and binary ops and matmuls")
        dim, factor = norm_dim(dims[0], len(node.shape)), factors[0]
        if node.shape[dim] % factor:
            raise FractureError(f"{where}: dim {dims[0]} of its shape {node.shape} is {node.shape[dim]} long, not "
                                f"a multiple of factor {factor}; legal factors divide {node.shape[dim]}")
        for o in graph.operands(name):
            if o.tms:
                raise FractureError(f"{where}: operand {o.src!r} is read through TMs {o.tms}, which a slice of it "
                                    "would not follow; fracture the op before the TMs become edge TMs")
        out[name] = (dim, factor)
    return out


def _operand_dim(node: Node, port: int, shape: tuple, dim: int) -> int | None:
    """The dim of operand `port` (of `shape`) that output dim `dim` slices (negative), None where the piece reads
    the whole operand (a matmul's other operand, a broadcast)."""
    if node.op_type == "matmul" and dim >= -2:
        return dim if (dim == -1) == (port == 1) else None
    if -dim > len(shape) or shape[dim] == 1:
        return None
    return dim


def _fracture_group(graph: Graph, group: dict[str, tuple[int, int]]) -> None:
    """Fracture the ops of one group in graph order; a gather (`<op>.gather`) takes each op's place."""
    pieces: dict[str, tuple[int, int, list[str]]] = {}   # gather -> (dim, factor, pieces)
    for name in [n for n in graph.topo_order() if n in group]:
        node = graph.node(name)
        dim, factor = group[name]
        operands = graph.operands(name)
        parts = []
        for i in range(factor):
            sliced = [_piece(graph, node, port, o, dim, factor, i, pieces) for port, o in enumerate(operands)]
            parts.append(add_op(graph, graph.unique_name(f"{name}.fracture_{i}"), node.op_type, sliced,
                                dict(node.attrs), df=node.df))
        gather = add_op(graph, graph.unique_name(f"{name}.gather"), "concatenate", parts, {"dim": dim}, df=node.df)
        graph.replace(name, gather, prune=True)
        pieces[gather] = (dim, factor, parts)


def _piece(graph: Graph, node: Node, port: int, operand: Operand, dim: int, factor: int, i: int,
           pieces: dict) -> str:
    """What piece `i` of `node` reads at operand `port`: the whole operand, the producer's own piece where it was
    fractured the same way, else a narrow of it."""
    shape = graph.operand_shape(operand)
    od = _operand_dim(node, port, shape, dim)
    if od is None:
        return operand.src
    if operand.src in pieces and pieces[operand.src][:2] == (od, factor):
        return pieces[operand.src][2][i]
    length = shape[od] // factor
    return add_op(graph, graph.unique_name(f"{node.name}.fracture_{i}.in{port}"), "narrow", [operand.src],
                  {"dim": od, "start": i * length, "length": length})
