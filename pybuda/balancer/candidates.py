"""Candidate op models per op: the legal ones (`op_model.legal_op_models`, with the streamings the config allows),
reduced to a small Pareto set on (cores, limiter cycles of the op alone in an epoch of the microbatch, L1 bytes),
together with the Pareto set of the unstreamed ones (any consumer can read an unstreamed op in its epoch), both of
the models with the largest u_kt of their grid; with `enable_enumerate_u_kt`, a few smaller-u_kt models that hold
more of the op's parameters in L1 than any of those join them (docs/balancer.md, "Candidates").

Ops with one signature (type, attributes, shapes, formats, operand kinds and TMs, whether a graph output reads
it: everything the enumeration and the stand-alone cost read) share one enumeration: a BERT's layers are
enumerated once. A model's prologued operands are kept by operand index there and named per op.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Hashable

from ..device import DeviceSpec
from ..ir import Graph
from ..ops import registry
from .op_model import BalancerError, ModelRequest, OpModel, divisors, input_names, legal_op_models, op_dims
from .plan_cost import PlanCoster
from .streaming import op_streams, stream_override_error

MAX_CANDIDATES = 16
MAX_SMALLER_U_KT = 4     # candidates with a smaller u_kt that holds more parameters in L1 (`enable_enumerate_u_kt`)


@dataclasses.dataclass(frozen=True)
class Candidate:
    """An op model with the cost the balancer ranks it by: its limiter cycles per input alone in an epoch of the
    microbatch (`PlanCoster.standalone`, prologue amortised)."""

    model: OpModel
    standalone: float

    @property
    def cores(self) -> int:
        return self.model.cores


def op_signature(graph: Graph, name: str) -> Hashable:
    """What the enumeration and the stand-alone cost of op `name` depend on, without names."""
    node = graph.node(name)
    attrs = dict(node.attrs)
    if "fused" in attrs:
        group = attrs.pop("fused")
        attrs["fused"] = tuple(tuple(dataclasses.replace(s, name="") for s in sched) for sched in group.schedules)
    operands = tuple((graph.node(o.src).kind, graph.node(o.src).shape, graph.node(o.src).df, tuple(o.tms))
                     for o in graph.operands(name))
    # model outputs and in-place writes (loopbacks) stream differently (`streaming.direction_problems`, `_enumerate`)
    to_output = tuple(sorted(graph.node(u).loopback is None for u, _ in graph.users(name)
                             if graph.node(u).kind == "output"))
    return (node.op_type, repr(sorted(attrs.items(), key=lambda kv: kv[0])), node.shape, node.df,
            node.intermed_df, node.acc_df, node.math_fidelity, operands, to_output)


class CandidateTable:
    """Candidates of every op of a Buda graph on one device under one config (computed on first use)."""

    def __init__(self, graph: Graph, device: DeviceSpec, config, coster: PlanCoster,
                 grid_overrides: dict[str, tuple]):
        self.graph, self.device, self.config, self.coster = graph, device, config, coster
        self.grid_overrides = grid_overrides
        self._by_signature: dict[Hashable, list[Candidate]] = {}
        self._per_op: dict[str, list[Candidate]] = {}

    def __call__(self, name: str) -> list[Candidate]:
        if name not in self._per_op:
            self._per_op[name] = self._candidates(name)
        return self._per_op[name]

    def _candidates(self, name: str) -> list[Candidate]:
        key = (op_signature(self.graph, name), name if name in self.config.balancer_op_overrides else None)
        inputs = input_names(self.graph, name)
        if key not in self._by_signature:
            self._by_signature[key] = self._front(name, [Candidate(_indexed(m, inputs), self.coster.standalone(name, m))
                                                         for m in self._enumerate(name)])
        return [Candidate(_named(c.model, inputs), c.standalone) for c in self._by_signature[key]]

    def _front(self, name: str, models: list[Candidate]) -> list[Candidate]:
        """The op's candidates among its legal models: those of its grid override, reduced to the Pareto sets."""
        override = self.grid_overrides.get(name)
        if override is not None:
            chosen = [c for c in models if c.model.grid == override]
            if not chosen:
                dims = op_dims(self.graph, name)
                legal = sorted({c.model.grid for c in models})
                raise BalancerError(
                    f"override_op_size({name!r}, {override}): no legal op model with grid {override}; the op's "
                    f"output is {dims['rt']}x{dims['ct']} tiles (a grid must divide it and fit the "
                    f"{self.device.grid_rows}x{self.device.grid_cols} cores of {self.device.name}); legal grids: "
                    f"{', '.join(f'{r}x{c}' for r, c in legal)}")
            models = chosen
        largest = _largest_u_kt(models)
        unstreamed = pareto([c for c in largest if not c.model.t_stream], limit=MAX_CANDIDATES // 2)
        front = pareto(largest)
        chosen = {id(c): c for c in unstreamed + front}
        held = max((len(c.model.prologue) for c in largest), default=0)    # a smaller u_kt must hold more
        smaller = [c for c in pareto(models, limit=len(models)) if len(c.model.prologue) > held]
        chosen.update((id(c), c) for c in sorted(smaller, key=lambda c: c.standalone)[:MAX_SMALLER_U_KT])
        return sorted(chosen.values(),
                      key=lambda c: (c.cores, c.standalone, len(c.model.t_stream), c.model.grid, c.model.t_stream))

    def _enumerate(self, name: str) -> list[OpModel]:
        graph, dims = self.graph, op_dims(self.graph, name)
        request = model_request(graph, name, self.config)

        def streams(gr: int, gc: int) -> list:
            return op_streams(graph, name, self.config, gr, gc, dims["rt"], dims["ct"])
        models = legal_op_models(graph, name, self.device, streams, request)
        shape = getattr(self.config.balancer_op_overrides.get(name), "t_stream_shape", None)
        if shape is None and any(graph.node(u).kind == "output" for u, _ in graph.users(name)):
            # the host restacks a streamed output's slices (work the estimate does not time): only where no
            # unstreamed model fits L1 (the U-Net's 65,536 x 1 sigmoid output)
            models = [m for m in models if not m.t_stream] or models
        if not models and shape is not None and shape != (1, 1):
            raise stream_override_error(name, shape, dims["rt"], dims["ct"],
                                        [m.grid for m in legal_op_models(graph, name, self.device)])
        if not models and _describe(name, request):
            raise BalancerError(f"op {name!r} ({graph.node(name).op_type}): no legal op model fits the "
                                f"{self.device.l1_usable} B of usable L1 on {self.device.name} with "
                                f"{_describe(name, request)}; without it the op has "
                                f"{len(legal_op_models(graph, name, self.device))} legal models")
        if not models:
            single = [] if request.single_buffer_fallback else legal_op_models(
                graph, name, self.device, streams, dataclasses.replace(request, single_buffer_fallback=True))
            raise BalancerError(f"op {name!r} ({graph.node(name).op_type}): no legal op model fits the "
                                f"{self.device.l1_usable} B of usable L1 on {self.device.name} (output {dims['t']}x"
                                f"{dims['rt']}x{dims['ct']} tiles)" + (
                                    f"; with a single-buffered output (enable_single_buffer_fallback=True) it has "
                                    f"{len(single)} legal model(s)" if single else ""))
        return models


def model_request(graph: Graph, name: str, config) -> ModelRequest:
    """What `config`'s balancer overrides of op `name` ask of its models (BalancerError for an override the op
    cannot take, naming the legal values)."""
    o = config.balancer_op_overrides.get(name)
    everywhere = config.default_dram_parameters is True     # `default_dram_parameters`: every op's in DRAM
    allowed = {"enumerate_u_kt": config.enable_enumerate_u_kt,
               "single_buffer_fallback": config.enable_single_buffer_fallback}
    if o is None:
        return ModelRequest(dram_parameters=everywhere, **allowed)
    node, inputs = graph.node(name), input_names(graph, name)
    if o.u_kt is not None:
        legal = divisors(op_dims(graph, name)["k"]) if registry.belongs(node.op_type, "inner_dim") else ()
        if o.u_kt not in legal:
            raise BalancerError(f"override_u_kt({name!r}, {o.u_kt}): " + (
                f"u_kt must divide the op's inner dimension of {op_dims(graph, name)['k']} tiles; legal: "
                f"{', '.join(map(str, legal))}" if legal else
                f"a {node.op_type} op has no inner dimension; u_kt applies to matmul and reduce ops"))
    for index in o.input_buffer_multiplier:
        if index >= len(inputs):
            raise BalancerError(f"override_input_buffer_multiplier({name!r}, {index}): the op has {len(inputs)} "
                                f"inputs; legal operand_index: 0-{len(inputs) - 1}")
    in_dram = everywhere if o.force_dram_parameters is None else bool(o.force_dram_parameters)
    return ModelRequest(o.u_kt, tuple(sorted(o.input_buffer_multiplier.items())), in_dram,
                        o.output_buffer_multiplier or 1, **allowed)


def _describe(name: str, request: ModelRequest) -> str:
    """The overrides behind `request`, as the user wrote them."""
    parts = [f"override_u_kt({name!r}, {request.u_kt})"] if request.u_kt is not None else []
    parts += [f"override_input_buffer_multiplier({name!r}, {k}, multiplier={m})" for k, m in request.buffer_multipliers]
    parts += [f"parameters in DRAM (override_dram_parameters({name!r}, True) or default_dram_parameters=True)"] \
        if request.dram_parameters else []
    m = request.output_buffer_multiplier
    parts += [f"internal_override_output_buffer_multiplier({name!r}, multiplier={m}) (buf_size_mb {2 * m}; the "
              f"backend also needs {m} and the op's t to divide one another)"] if m > 1 else []
    return " and ".join(parts)


def _largest_u_kt(candidates: list[Candidate]) -> list[Candidate]:
    """The candidates with the largest u_kt of their grid, streaming, ublock and output buffer (those the
    enumeration keeps without `enable_enumerate_u_kt`)."""
    best: dict[tuple, Candidate] = {}
    for c in candidates:
        m = c.model
        key = (m.grid, m.t_stream, m.ublock, m.buf_size_mb)
        if key not in best or m.u_kt > best[key].model.u_kt:
            best[key] = c
    return list(best.values())


def _indexed(model: OpModel, inputs: list[str]) -> OpModel:
    return dataclasses.replace(model, prologue=frozenset(inputs.index(q) for q in model.prologue))


def _named(model: OpModel, inputs: list[str]) -> OpModel:
    return dataclasses.replace(model, prologue=frozenset(inputs[k] for k in model.prologue))


def pareto(candidates: list[Candidate], limit: int = MAX_CANDIDATES,
           key: Callable[[Candidate], tuple] | None = None) -> list[Candidate]:
    """The candidates no other one beats on cores, stand-alone cycles and L1 at once (one per such triple, the
    unstreamed first), thinned to `limit` spread over their core counts; ordered by cores, then cycles."""
    key = key or (lambda c: (c.cores, c.standalone, c.model.l1_bytes))
    ranked = sorted(((key(c), c) for c in candidates),
                    key=lambda kc: (*kc[0], len(kc[1].model.t_stream), kc[1].model.grid, kc[1].model.t_stream))
    front: list[Candidate] = []
    keys: list[tuple] = []
    for k, c in ranked:
        if not any(all(a <= b for a, b in zip(f, k)) for f in keys):
            front.append(c)
            keys.append(k)
    if len(front) > limit:
        step = (len(front) - 1) / (limit - 1)
        front = [front[round(i * step)] for i in range(limit)]
    return front
