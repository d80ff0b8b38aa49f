"""Which t-streamings an op of the Buda graph may take (pybuda-passes.md §7) and which producer/consumer pairs
of them may share an epoch; the TMs themselves are `pybuda.arch.streaming`'s.

An op may stream along rows ("r") or columns ("c") by a factor that, times its grid rows (columns), divides its
tile rows (columns). Not at all: ops outside the registry's group "streamable" (eltwise ops, dense matmuls, column
reductions and fused ops; not sparse matmuls: their lowering already cuts their output into t slices); fused ops
other than of eltwise sub-ops of one width without internal broadcasts (a fused op holding a matmul or reduce, an
"inner_dim" sub-op, or narrower sub-ops, runs whole rows: the legacy compiler's rule); ops read by a graph output
(the host reads the queue as it is); a row reduce does not stream along its reduced dimension.
`enable_t_streaming` False: nothing streams; `manual_t_streaming`: only ops with `override_t_stream_shape`;
`override_t_stream_dir` "n" keeps an op unstreamed, "r"/"c" limits its direction.
"""
from __future__ import annotations

from ..arch.streaming import DIRECTIONS, Stream, in_epoch_problem
from ..ir import Graph
from ..ops import registry
from .op_model import BalancerError, fused_roles


def direction_problems(graph: Graph, name: str) -> dict[str, str]:
    """Why op `name` cannot stream in each direction ("r", "c"); a direction missing from the result is legal."""
    node = graph.node(name)
    whole = None
    if not registry.belongs(node.op_type, "streamable"):
        whole = f"{node.op_type} ops do not stream"
    elif node.op_type == "matmul" and node.attrs.get("accumulate"):
        whole = "a z-accumulating matmul does not stream"
    elif node.op_type == "fused_op" and any(registry.belongs(s.op_type, "inner_dim")
                                            for s in node.attrs["fused"].sub_ops):
        whole = "a fused op with a matmul or reduce sub-op does not stream (the legacy compiler's rule)"
    elif any(graph.node(u).kind == "output" and graph.node(u).loopback is not None for u, _ in graph.users(name)):
        whole = "it writes a parameter or accumulator in place, which keeps its unstreamed layout"
    if whole:
        return {d: whole for d in DIRECTIONS}
    if node.op_type == "reduce":
        return {"c" if node.attrs.get("dim") == "c" else "r": "a reduce does not stream along its reduced dimension"}
    return {}


def factors(extent: int, grid: int) -> list[int]:
    """Streaming factors f >= 2 with grid * f dividing `extent` tiles."""
    per_core = extent // grid if extent % grid == 0 else 0
    return [f for f in range(2, per_core + 1) if per_core % f == 0]


def op_streams(graph: Graph, name: str, config, grid_rows: int, grid_cols: int, rt: int, ct: int) -> list[Stream]:
    """The streamings op `name` may take on a grid_rows x grid_cols grid ((): none), under the config's
    switches and overrides: `override_t_stream_shape` gives its one streaming where the grid admits it (none
    elsewhere; `check_stream_override` says when no grid does); an override the op cannot take at all is a
    BalancerError naming the op, what was asked and why."""
    override = config.balancer_op_overrides.get(name)
    shape = getattr(override, "t_stream_shape", None)
    direction = getattr(override, "t_stream_dir", None)
    if not config.enable_t_streaming and (shape not in (None, (1, 1)) or direction not in (None, "n")):
        asked = f"override_t_stream_shape({name!r}, {tuple(shape)})" if shape is not None else \
            f"override_t_stream_dir({name!r}, {direction!r})"
        raise BalancerError(f"{asked} has no effect with enable_t_streaming=False: enable t-streaming or remove the "
                            "override")
    if not config.enable_t_streaming or direction == "n" or (config.manual_t_streaming and shape is None):
        return [()]
    if direction in ("rz", "cz"):
        raise BalancerError(f"override_t_stream_dir({name!r}, {direction!r}): z-major streaming is not supported "
                            "by this compiler; legal: 'r', 'c', 'n' (or None)")
    problems = direction_problems(graph, name)
    if shape is not None:
        stream = forced_stream(name, shape, direction, problems)
        if not stream:
            return [()]
        extent, grid = (rt, grid_rows) if stream[0] == "r" else (ct, grid_cols)
        return [stream] if stream[1] in factors(extent, grid) else []
    streams: list[Stream] = [()]
    for d in (direction,) if direction else DIRECTIONS:
        if d in problems:
            continue
        streams += [(d, f) for f in factors(rt if d == "r" else ct, grid_rows if d == "r" else grid_cols)]
    return streams


def forced_stream(name: str, shape: tuple, direction: str | None, problems: dict) -> Stream:
    """The streaming `override_t_stream_shape(name, shape)` asks for (BalancerError if the op cannot stream that
    way at all)."""
    r, c = shape
    if r == c == 1:
        return ()
    d, f = ("r", r) if c == 1 else ("c", c)
    asked = f"override_t_stream_shape({name!r}, {tuple(shape)})"
    if direction not in (None, d):
        raise BalancerError(f"{asked} streams along {'rows' if d == 'r' else 'columns'}, but "
                            f"override_t_stream_dir({name!r}, {direction!r}) asks for another direction")
    if d in problems:
        raise BalancerError(f"{asked}: op {name!r} cannot stream along {'rows' if d == 'r' else 'columns'}: "
                            f"{problems[d]}")
    return (d, f)


def stream_override_error(name: str, shape: tuple, rt: int, ct: int, grids: list[tuple]) -> BalancerError:
    """The error for an `override_t_stream_shape` no grid of the op admits, with the factors each grid does."""
    d, f = ("r", shape[0]) if shape[1] == 1 else ("c", shape[1])
    extent = rt if d == "r" else ct
    legal = {g: factors(extent, g[0] if d == "r" else g[1]) for g in grids}
    listing = "; ".join(f"{g[0]}x{g[1]}: {', '.join(map(str, fs))}" for g, fs in legal.items() if fs)
    return BalancerError(f"override_t_stream_shape({name!r}, {tuple(shape)}): no grid of op {name!r} fits a factor "
                         f"of {f} along its {extent} tile {'rows' if d == 'r' else 'columns'} (grid "
                         f"{'rows' if d == 'r' else 'columns'} x factor must divide them, and the streamed op must fit "
                         f"L1); legal factors per grid: {listing or 'none'}")


def edge_problem(graph: Graph, consumer: str, index: int, producer_stream: Stream,
                 consumer_stream: Stream) -> str | None:
    """Why operand `index` of `consumer` cannot read its producer (streaming as `producer_stream`) in the same
    epoch when the consumer streams as `consumer_stream` (None: it can)."""
    node = graph.node(consumer)
    operand = graph.operands(consumer)[index]
    role = "both"
    if node.op_type == "fused_op":
        roles = fused_roles(node.attrs["fused"])
        role = roles[index] if index < len(roles) else "both"
    return in_epoch_problem(producer_stream, tuple(operand.tms), consumer_stream, node.op_type, index,
                            identity=node.op_type == "sparse_matmul", reduce_dim=node.attrs.get("dim"), role=role)
