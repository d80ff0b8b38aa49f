"""Fan-out NOPs (shared/reference/data-movement.md §6: the legacy compiler's kMaxDRAMOutQueues, whose
NodeExceedsMaxOpForks it answers with NOPs): an op of the Buda graph feeds at most `DeviceSpec.op_consumers` data
users, ops and output queues. An op with more keeps its outputs and its first op users, and feeds the others
(outputs too when there are not enough op users to move) through a NOP `fanout_<op>` (split again while it has
too many: `fanout_<op>_1`, `fanout_<op>_2`...). A NOP keeps its producer's data format and takes its first
consumer's math formats, as user-inserted NOPs do (`insert_nops.py`), so the numerics do not change; the balancer
costs it like any op. Counting every op user bounds the netlist's count: users in later epochs read one
epoch-to-epoch queue."""
from __future__ import annotations

from ..ir import Graph, Operand


def data_users(graph: Graph, name: str) -> list[str]:
    """The distinct nodes reading op `name` (ops and outputs), in graph order."""
    return list(dict.fromkeys(user for user, _ in graph.users(name)))


def over_limit(graph: Graph, limit: int) -> list[str]:
    """The ops that feed more than `limit` data users, in topological order."""
    return [n for n in graph.topo_order() if graph.node(n).kind == "op" and len(data_users(graph, n)) > limit]


def split_fan_out(graph: Graph, limit: int) -> Graph:
    """The graph with fan-out NOPs wherever an op feeds more than `limit` data users (module docstring)."""
    for name in over_limit(graph, limit):
        _split(graph, name, limit)
    return graph


def _split(graph: Graph, name: str, limit: int, root: str | None = None) -> None:
    """Move the users of `name` beyond `limit` behind a NOP named after `root`, the op the chain of NOPs starts at
    (a name per NOP, not nested: Falcon-7B's mask feeds 32 layers' worth of readers)."""
    users = data_users(graph, name)
    if len(users) <= limit:
        return
    ops = [u for u in users if graph.node(u).kind == "op"]
    movable = [u for u in users if u not in ops] + ops        # op users move first, outputs only if they must
    moved = movable[len(movable) - (len(users) - limit + 1):]     # the NOP takes the place of these
    producer = graph.node(name)
    first = graph.node(next((u for u in moved if u in ops), name))
    root = root or name
    nop = graph.unique_name(f"fanout_{root}")
    graph.add_op(nop, "nop", [Operand(name)], {}, shape=producer.shape, df=producer.df,
                 intermed_df=first.intermed_df, acc_df=first.acc_df, math_fidelity=first.math_fidelity,
                 logical_shape=producer.logical_shape, original_op_type="nop")
    graph.set_order(nop, producer.order)
    for user in moved:
        for port, operand in enumerate(graph.operands(user)):
            if operand.src == name:
                graph.set_operand(user, port, Operand(nop, operand.tms))
    _split(graph, nop, limit, root)
