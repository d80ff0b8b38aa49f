"""Fusion (pybuda-passes.md §8): groups of small Buda ops become one `fused_op` running them as scheduled sub-ops
on one core grid, so an epoch holds fewer ops and their intermediate results stay in the dest register and L1
instead of crossing the NoC.

Which ops fuse: the registry's group "fusable" (binary add/subtract/multiply/maximum, SFPU unary ops, nop, the Buda
reduce and matmul), a reduce only along c (a row reduce) and a matmul only when its second operand is a constant one
tile column wide (row sums and means, the in-tile column broadcast); not ops named by `dont_fuse` (only those named
by `manual_fuse` when it is given), by a balancer or placer override, an epoch or chip break, a schedule
constraint, a nop insertion, a queue insertion or `op_intermediates_to_save`.

How groups grow (in topological order, deterministic): an op joins the group of one of its operands when
- the edge between them carries no TM;
- it has the group's output shape, data format, math fidelity and accumulation format. A group never mixes widths: a row
  reduction (one tile column) fused with the ops of the full rows around it would pin them all to one grid column
  (the reduction needs whole rows per core), so a layernorm or softmax becomes a few fused ops, narrow and wide
  ones (the legacy compiler, which leaves reductions out of fusion by default, ends up alike); fusion never costs
  an op its parallelism;
- the group stays convex: no operand of the op outside the group depends on the group;
- the group still builds (`build_group`): at most 8 inputs (a fused op may start an epoch, and then reads every
  input from a DRAM queue: a core has 8 DRAM reader streams; a 3x3 max pool's nine taps in one op fit no epoch
  alone; the kernel's own 16 inputs follow), at most 8 intermediate buffers.
A group then keeps a single output: the first member (in topological order) read outside the group, with its
input cone; the members it drops form groups of their own in another round. Groups of one op are dropped.

Schedules (`build_group`): members in topological order; a schedule ends after each matmul or reduce (an op of the
registry's group "inner_dim": its result is needed whole). A value goes to the dest register when only the next
sub-op of its schedule reads it, once, without a broadcast (not into a matmul or maximum, not from a relu, maximum or
quantisation op; only when the accumulation format is the value's own format; on grayskull only as that sub-op's
first operand, srcA: operands are never swapped for it, since srcA keeps fewer bits than srcB and a swap would
change the result), else to an intermediate buffer freed after its last reader (`pop_last`), in the members'
format. So fusion never changes a value: every value a sub-op hands on is stored in the format its op wrote it in
unfused, and a fused model computes bit for bit what the unfused one does (`tests/test_fusion.py`). An outside value
becomes one fused-op input per (value, edge TMs, schedule): each schedule streams its inputs anew, as the legacy
compiler does; an outside value arriving through a transpose or pad TM cannot (the backend takes neither on a fused
op's input).
"""
from __future__ import annotations

import dataclasses

from ..arch.optypes import SFPU_OPS
from ..errors import InternalError
from ..ir import Graph, Node, Operand, gradient_ops
from ..ops import registry
from ..ops.fused import DEST, OUTPUT, FusedGroup, Ref, SubOp
from ..query import pattern_matches

FUSED_PREFIX = "_fused_op_"
# a fused op an epoch starts at reads every input from a DRAM queue, and a core has 8 DRAM reader streams (the
# devices' `dram_reader_streams`); the kernel's own limits (16 inputs, inputs + output < 17) are then met too
MAX_INPUTS = 8
MAX_INTERMEDIATES = 8


class FusionError(InternalError):
    """A group of ops that cannot be one fused op; the message says which limit or rule it breaks."""


def fusable(graph: Graph, name: str) -> bool:
    """Whether an op may become a fused sub-op (its type and operands; not the config's exclusions): an op of the
    registry's group "fusable" that meets the rule of its type, if its type has one (`_SUB_OP_RULES`)."""
    node = graph.node(name)
    if not registry.belongs(node.op_type, "fusable") or registry.belongs(node.framework_op_type, "kept_apart"):
        return False
    rule = _SUB_OP_RULES.get(node.op_type)
    return rule is None or rule(graph, node)


def _row_reduce(graph: Graph, node: Node) -> bool:
    """A reduce fuses along c only (a row reduce)."""
    return node.attrs.get("dim") == "c"


def _column_matmul(graph: Graph, node: Node) -> bool:
    """A matmul fuses only by a constant one tile column wide (row sums and means, the in-tile column broadcast)."""
    operands = graph.operands(node.name)
    if len(operands) != 2 or node.attrs:
        return False
    rhs = operands[1]
    return (graph.node(rhs.src).kind == "constant" and all(tm[0] == "broadcast" and tm[1] == "z" for tm in rhs.tms)
            and node.shape[-1] == 32)


# what a fusable op of these types must meet besides its type
_SUB_OP_RULES = {"reduce": _row_reduce, "matmul": _column_matmul}


def excluded_ops(config, op_names: list[str]) -> set[str]:
    """Ops the config keeps out of fusion: those `dont_fuse` names (names or legacy regular expressions, among
    `op_names`) and every op an override or graph edit names."""
    names = {n for n in op_names if any(pattern_matches(p, n) for p in config.op_names_dont_fuse)}
    names |= set(config.balancer_op_overrides)
    names |= {op for op, _ in config.placer_op_overrides}
    names |= set(config.op_intermediates_to_save)
    for entries in (config.op_names_to_epoch_break, config.op_names_to_chip_break, config.scheduler_constraints):
        for entry in entries:
            names |= {entry} if isinstance(entry, str) else set(entry)
    for nop in config.buffering_nops_to_insert.values():
        names |= {nop.src, nop.dest}
    for producer, consumer, _ in config.insert_queues:
        names |= {producer, consumer}
    return names


def _internal_edge(tms: tuple) -> bool:
    """An edge inside a group carries no TM (members share one shape)."""
    return not tms


def _key(graph: Graph, name: str) -> tuple:
    """What every member of a group shares: its output shape (z, rows and width: a group of ops of several widths
    would need whole rows on every core, so its wide ops would lose the grid columns they have alone), math
    fidelity and accumulation format."""
    node = graph.node(name)
    return tuple(node.shape), node.df, node.math_fidelity, node.acc_df


# --- building one group ----------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Built:
    """A group as one fused op: its program and the operands (producer and edge TMs) of its inputs, in order."""

    group: FusedGroup
    operands: tuple


def build_group(graph: Graph, members: list[str], arch: str) -> Built:
    """The fused op of `members` (in topological order, the last one the output): schedules, dest and
    intermediate routing, inputs. FusionError if it breaks a limit."""
    member_set = set(members)
    schedule_of = _schedules(graph, members)
    operand_lists = {m: list(graph.operands(m)) for m in members}
    readers = {m: [u for u, _ in graph.users(m) if u in member_set] for m in members}
    in_dest = {p for p, m in zip(members, members[1:]) if p != members[-1]
               and _to_dest(graph, p, m, operand_lists[m], schedule_of, readers, arch)}
    last_read = {o.src: m for m in members for o in operand_lists[m] if o.src in member_set}
    buffer_of, buffers = _buffers(members, in_dest, operand_lists, schedule_of, last_read)
    inputs: dict[tuple, int] = {}
    operands: list[Operand] = []
    subs: list[list[SubOp]] = [[] for _ in range(schedule_of[members[-1]] + 1)]
    for m in members:
        refs, tms = [], []
        for o in operand_lists[m]:
            if o.src in member_set:
                refs.append(DEST if o.src in in_dest else Ref("intermed", buffer_of[o.src]))
                tms.append(tuple(o.tms))
                continue
            if any(tm[0] in ("transpose", "pad") for tm in o.tms):
                raise FusionError(f"operand {o.src!r} of {m!r} arrives with a {tm_kinds(o.tms)} TM, which fused-op "
                                  "inputs cannot take")
            key = (o.src, tuple(o.tms), schedule_of[m])
            if key not in inputs:
                inputs[key] = len(inputs)
                operands.append(o)
            refs.append(Ref("input", inputs[key]))
            tms.append(())
        out = OUTPUT if m == members[-1] else DEST if m in in_dest else Ref("intermed", buffer_of[m])
        pops = tuple(dict.fromkeys(Ref("intermed", buffer_of[o.src]) for o in operand_lists[m]
                                   if o.src in buffer_of and last_read.get(o.src) == m))
        node = graph.node(m)
        subs[schedule_of[m]].append(SubOp(m, node.op_type, tuple(sorted(_sub_attrs(graph, m).items())),
                                          tuple(refs), tuple(tms), out, tuple(node.shape), pops))
    if len(inputs) > MAX_INPUTS:
        raise FusionError(f"{len(inputs)} inputs (limit {MAX_INPUTS}: the op may start an epoch, reading each from "
                          "a DRAM queue, and a core has that many DRAM reader streams)")
    if buffers > MAX_INTERMEDIATES:
        raise FusionError(f"{buffers} intermediate buffers (limit {MAX_INTERMEDIATES})")
    return Built(FusedGroup(inputs=len(inputs), intermediates=buffers, schedules=tuple(tuple(x) for x in subs)),
                 tuple(operands))


def _schedules(graph: Graph, members: list[str]) -> dict[str, int]:
    """The schedule of each member: a new one after each matmul or reduce (its result is needed whole)."""
    schedule_of: dict[str, int] = {}
    for prev, m in zip([None, *members], members):
        k = 0 if prev is None else schedule_of[prev]
        schedule_of[m] = k + (prev is not None and registry.belongs(graph.node(prev).op_type, "inner_dim"))
    return schedule_of


def _buffers(members: list[str], in_dest: set, operand_lists: dict, schedule_of: dict,
             last_read: dict) -> tuple[dict[str, int], int]:
    """The intermediate buffer of every member that needs one (not the output, not in dest), and how many
    buffers: a buffer whose value its own schedule has read for the last time is free for a later member (a buffer
    read by a later schedule is never reused, as the legacy compiler's allocator keeps them)."""
    buffer_of: dict[str, int] = {}
    free: list[int] = []
    count = 0
    for m in members:
        for src in dict.fromkeys(o.src for o in operand_lists[m]):
            if src in buffer_of and last_read.get(src) == m and schedule_of[src] == schedule_of[m]:
                free.append(buffer_of[src])
        if m == members[-1] or m in in_dest:
            continue
        free.sort()
        if free:
            buffer_of[m] = free.pop(0)
        else:
            buffer_of[m] = count
            count += 1
    return buffer_of, count


def tm_kinds(tms) -> str:
    return "/".join(dict.fromkeys(tm[0] for tm in tms))


def _sub_attrs(graph: Graph, name: str) -> dict:
    """A member's attributes as a sub-op: matmuls read their whole inner dimension at once (m_k 1)."""
    node = graph.node(name)
    attrs = dict(node.attrs)
    if registry.belongs(node.op_type, "inner_dim"):
        k = graph.operand_shape(graph.operands(name)[0])[-1] // 32
        attrs.update(m_k=1, u_kt=k)
    return attrs


def _to_dest(graph: Graph, producer: str, consumer: str, operands: list, schedule_of: dict, readers: dict,
             arch: str) -> bool:
    """Whether `producer`'s result can reach the next sub-op `consumer` in the dest register."""
    ports = [k for k, o in enumerate(operands) if o.src == producer]
    if len(ports) != 1 or operands[ports[0]].tms or readers[producer] != [consumer]:
        return False
    if schedule_of[producer] != schedule_of[consumer]:
        return False
    p, c = graph.node(producer), graph.node(consumer)
    if c.op_type in ("matmul", "maximum") or p.op_type in ("maximum", "reduce", "matmul") or p.attrs.get("relu_en"):
        return False
    if (p.acc_df or p.df) != p.df:
        return False   # dest would hold the value in another format than unfused (Bfp8_b, Float32 on grayskull)
    return arch != "grayskull" or ports[0] == 0


# --- growing groups ---------------------------------------------------------------------------------------------

def find_groups(graph: Graph, candidates: set[str], arch: str) -> list[list[str]]:
    """Groups of `candidates` (each in topological order, output last) that become fused ops."""
    order = [n for n in graph.topo_order() if graph.node(n).kind == "op"]
    final: list[list[str]] = []
    free = [n for n in order if n in candidates]
    while free:
        groups = _grow(graph, order, set(free), arch)
        released: list[str] = []
        for members in groups:
            kept = _single_output(graph, members)
            released += [m for m in members if m not in kept]
            if len(kept) >= 2 and _builds(graph, kept, arch):
                final.append(kept)
        if set(released) == set(free):
            break
        free = [n for n in order if n in set(released)]
    position = {n: i for i, n in enumerate(order)}
    return sorted(final, key=lambda g: position[g[-1]])


def _builds(graph: Graph, members: list[str], arch: str) -> bool:
    try:
        build_group(graph, members, arch)
    except FusionError:
        return False
    return True


def _grow(graph: Graph, order: list[str], free: set[str], arch: str) -> list[list[str]]:
    group_of: dict[str, int] = {}
    groups: list[list[str]] = []
    depends: dict[str, frozenset] = {}        # groups a node depends on through a path leaving them
    for n in order:
        operands = graph.operands(n)
        joined = None
        if n in free:
            for o in operands:
                g = group_of.get(o.src)
                if g is None or g == joined or not _internal_edge(tuple(o.tms)):
                    continue
                if _key(graph, n) != _key(graph, groups[g][0]):
                    continue
                outside = [p.src for p in operands if group_of.get(p.src) != g]
                if any(g in depends.get(p, frozenset()) for p in outside):
                    continue
                if not _internal_edges_ok(graph, n, operands, g, group_of):
                    continue
                if not _builds(graph, groups[g] + [n], arch):
                    continue
                joined = g
                break
            if joined is None:
                joined = len(groups)
                groups.append([])
            groups[joined].append(n)
            group_of[n] = joined
        deps: set = set()
        for o in operands:
            deps |= depends.get(o.src, frozenset())
            g = group_of.get(o.src)
            if g is not None and g != group_of.get(n):
                deps.add(g)
        depends[n] = frozenset(deps)
    return groups


def _internal_edges_ok(graph: Graph, n: str, operands: list, g: int, group_of: dict) -> bool:
    """Every edge from group g into n is a legal internal edge."""
    return all(_internal_edge(tuple(o.tms)) for o in operands if group_of.get(o.src) == g)


def _single_output(graph: Graph, members: list[str]) -> list[str]:
    """The first member read outside the group (or by a graph output) and the members in its input cone, until
    that member is the only one read outside."""
    while True:
        member_set = set(members)
        out = next((m for m in members if any(u not in member_set for u, _ in graph.users(m))), members[-1])
        cone, stack = {out}, [out]
        while stack:
            for o in graph.operands(stack.pop()):
                if o.src in member_set and o.src not in cone:
                    cone.add(o.src)
                    stack.append(o.src)
        kept = [m for m in members if m in cone]
        if kept == members:
            return kept
        members = kept


# --- the stage --------------------------------------------------------------------------------------------------

def fuse(graph: Graph, config, arch: str) -> Graph:
    """Replace fusable groups of ops by fused ops `_fused_op_<k>` (k in topological order of their outputs)."""
    if not config.enable_auto_fusing:
        return graph
    # a gradient op (it sums into a gradient accumulator) stays an op of its own: a datacopy, matmul or multiply
    excluded = excluded_ops(config, graph.op_names()) | gradient_ops(graph)
    manual = config.op_names_manual_fuse
    candidates = {n for n in graph.op_names() if fusable(graph, n) and n not in excluded
                  and (not manual or any(pattern_matches(p, n) for p in manual))}
    for k, members in enumerate(find_groups(graph, candidates, arch)):
        _replace(graph, members, build_group(graph, members, arch), f"{FUSED_PREFIX}{k}")
    return graph


def _replace(graph: Graph, members: list[str], built: Built, name: str) -> None:
    out = graph.node(members[-1])
    approx = all(s.attributes.get("approximate_mode") for s in built.group.sub_ops if s.op_type in SFPU_OPS)
    has_sfpu = any(s.op_type in SFPU_OPS for s in built.group.sub_ops)
    graph.add_op(name, "fused_op", list(built.operands),
                 {"fused": built.group, **({"approximate_mode": True} if approx and has_sfpu else {})},
                 shape=out.shape, df=out.df, intermed_df=out.df, acc_df=out.acc_df,
                 math_fidelity=out.math_fidelity,
                 logical_shape=out.logical_shape, original_op_type="fused_op", large_padding=out.large_padding)
    graph.set_order(name, out.order)
    graph.replace(members[-1], name)
    for m in reversed(members[:-1]):
        graph.remove_node(m)
