"""The compiler keeps what the backend builds within its per-core and per-op stream limits: fan-out NOPs for an op
with more data users than the backend allows (`passes/fan_out.py`), and plans whose cores stay within their
stream resources (`PlanCoster.overuse`; an op short of stream phases gets the extended overlay blob where its L1
has room), the netlist validating against the same device description."""
from __future__ import annotations

import dataclasses
import sys

import pytest
import torch

import pybuda
from pybuda.arch.movement import EXTENDED_OVERLAY_BYTES, CoreBudget, CoreStreams, Overuse, overuses
from pybuda.balancer import planner
from pybuda.balancer.op_model import OpModel, with_overlay
from pybuda.device import get_device
from pybuda.ir import Graph
from pybuda.netlist import check
from pybuda.passes.fan_out import data_users, split_fan_out
from pybuda.verify import pcc


class ManyReaders(torch.nn.Module):
    """One activation read by `n` linear layers (matmuls: not fused), summed."""

    def __init__(self, n: int):
        super().__init__()
        self.first = torch.nn.Linear(64, 64)
        self.heads = torch.nn.ModuleList(torch.nn.Linear(64, 64) for _ in range(n))

    def forward(self, x):
        h = self.first(x)
        out = self.heads[0](h)
        for head in self.heads[1:]:
            out = out + head(h)
        return out


def _compile(model, x, tmp_path, device="e150"):
    return pybuda.compile(model, x, device=device, config=pybuda.CompilerConfig(), output_dir=tmp_path)


def _read_edge(tmp_path, epoch_solvers: list) -> tuple:
    """ManyReaders(2) compiled on e150: its planner's solver and the schedule's first edge inside the device, as
    (solver, producer, consumer, producer's position, consumer's position)."""
    torch.manual_seed(0)
    _compile(ManyReaders(2).eval(), torch.randn(2, 128, 64), tmp_path)
    solver = epoch_solvers[-1]
    schedule = solver.table.schedule
    consumer = next(n for n in schedule if any(o.src in schedule for o in solver.graph.operands(n)))
    producer = next(o.src for o in solver.graph.operands(consumer) if o.src in schedule)
    return solver, producer, consumer, schedule.index(producer), schedule.index(consumer)


def test_an_op_with_more_users_than_the_backend_allows_feeds_some_through_a_nop(tmp_path):
    torch.manual_seed(0)
    model, x = ManyReaders(10).eval(), torch.randn(2, 32, 64)
    compiled = _compile(model, x, tmp_path)
    nl = compiled.netlist
    users = {name: {o for o, op in g.ops.items() if name in op.inputs} | {q for q, queue in nl.queues.items()
                                                                          if queue.input == name}
             for g in nl.graphs.values() for name in g.ops}
    nops = [n for g in nl.graphs.values() for n, op in g.ops.items() if n.startswith("fanout_") and op.type == "nop"]
    assert nops, "no fan-out NOP inserted"
    assert max(map(len, users.values())) <= get_device("e150").op_consumers
    with torch.no_grad():
        expected = model(x).numpy()
    assert pcc(compiled(x).numpy(), expected) >= 0.99


def test_a_chain_of_fan_out_nops_is_named_after_the_op_it_starts_at():
    """100 readers at 4 per op: a chain of NOPs, each `fanout_<op>_<k>` (nested names grew past the 1,024
    characters a YAML key may have, Falcon-7B's netlist)."""
    graph = Graph()
    graph.add_input("x", (1, 32, 32))
    graph.add_op("src", "exp", ["x"], shape=(1, 32, 32))
    for k in range(100):
        graph.add_op(f"reader{k}", "exp", ["src"], shape=(1, 32, 32))
        graph.add_output(f"out{k}", f"reader{k}")
    split_fan_out(graph, 4)
    nops = [n.name for n in graph.nodes("op") if n.op_type == "nop"]
    assert nops == ["fanout_src", *(f"fanout_src_{k}" for k in range(1, len(nops)))] and len(nops) > 20
    assert all(len(data_users(graph, n)) <= 4 for n in ["src", *nops])
    readers = {r for n in ["src", *nops] for r in data_users(graph, n) if r.startswith("reader")}
    assert readers == {f"reader{k}" for k in range(100)}


def test_plans_stay_within_the_devices_fan_out_limit(tmp_path, monkeypatch):
    """With a device whose cores feed at most 2 destinations, the plan the default device gets would break the
    limit; the balancer plans around it and the netlist validates against that device."""
    torch.manual_seed(0)
    model, x = ManyReaders(3).eval(), torch.randn(2, 128, 64)
    tight = dataclasses.replace(get_device("e150"), fan_out_streams=2)
    plain = _compile(model, x, tmp_path / "plain")
    assert any(e.rule == "streams.fan_out" for e in check(plain.netlist, device=tight))
    monkeypatch.setattr(sys.modules["pybuda.compile"], "get_device", lambda name: tight)
    guarded = _compile(model, x, tmp_path / "guarded")
    assert check(guarded.netlist, device=tight) == []
    with torch.no_grad():
        expected = model(x).numpy()
    assert pcc(guarded(x).numpy(), expected) >= 0.99


def test_plans_leave_l1_for_the_stream_buffers_pipegen_adds(tmp_path, monkeypatch):
    """On a device with no L1 margin beyond the balancer's usable L1, the plan that ignores stream buffers (DRAM
    receive, gather relays, multicast) puts the fused op's 166,400 B of buffers beside 91,520 B of them, over
    250,000 B; the balancer counts them (`CoreBudget.l1_bytes`), plans another model and the netlist validates."""
    torch.manual_seed(0)
    model, x = ManyReaders(3).eval(), torch.randn(2, 512, 64)
    e150 = get_device("e150")
    tight = dataclasses.replace(e150, l1_usable=250_000, l1_data_buffer_base=e150.l1_size - 250_000)
    monkeypatch.setattr(sys.modules["pybuda.compile"], "get_device", lambda name: tight)
    compiled = _compile(model, x, tmp_path)
    assert check(compiled.netlist, device=tight) == []
    with torch.no_grad():
        expected = model(x).numpy()
    assert pcc(compiled(x).numpy(), expected) >= 0.99


def test_an_op_over_the_l1_its_buffers_leave_its_stream_buffers_is_an_overuse():
    e150 = get_device("e150")
    usage = {("op", (0, 0)): CoreStreams(buffer_bytes=30_000)}
    fits = CoreBudget(l1_bytes=e150.l1_data_buffer_bytes - 30_000)
    over = CoreBudget(l1_bytes=e150.l1_data_buffer_bytes - 29_999)
    assert overuses(e150, usage, lambda _: fits) == [] and overuses(e150, usage) == []
    found, = overuses(e150, usage, lambda _: over)
    assert (found.resource, found.count, found.limit) == ("buffer_bytes", 30_000, 29_999)
    assert "30000 B of stream buffers beside its op buffers; a core has 29999" in str(found)


def test_an_op_short_of_stream_phases_gets_the_extended_overlay_blob(tmp_path, monkeypatch):
    """With a device whose default overlay blob holds 8 phases per side, ops that need more get the 128 KiB blob
    the legacy compiler gives them (`overlay_size`, 1,724 phases, 64 KiB of L1 counted in their footprint) instead
    of being planned around; the netlist validates against that device and computes the same."""
    torch.manual_seed(0)
    model, x = ManyReaders(3).eval(), torch.randn(2, 128, 64)
    tight = dataclasses.replace(get_device("e150"), overlay_blob_bytes=8 * 2 * 38)
    plain = _compile(model, x, tmp_path / "plain")
    assert any(e.rule == "overlay.phases" for e in check(plain.netlist, device=tight))
    monkeypatch.setattr(sys.modules["pybuda.compile"], "get_device", lambda name: tight)
    extended = _compile(model, x, tmp_path / "extended")
    assert check(extended.netlist, device=tight) == []
    ops = {name: op for g in extended.netlist.graphs.values() for name, op in g.ops.items()}
    granted = {name for name, op in ops.items() if op.overlay_size}
    assert granted and {ops[name].overlay_size for name in granted} == {EXTENDED_OVERLAY_BYTES}
    models = extended.placement.models
    assert all(models[name].overlay_size == EXTENDED_OVERLAY_BYTES for name in granted)
    assert extended.placement.epochs == plain.placement.epochs
    with torch.no_grad():
        expected = model(x).numpy()
    assert pcc(extended(x).numpy(), expected) >= 0.99


def test_the_extended_overlay_blob_is_counted_in_l1_and_refused_without_room():
    e150 = get_device("e150")
    model = OpModel((1, 1), 1, (1, 1), (1, 1), l1_bytes=e150.l1_usable - 64 * 1024)
    granted = with_overlay(model, e150, EXTENDED_OVERLAY_BYTES)
    assert granted.overlay_size == EXTENDED_OVERLAY_BYTES and granted.l1_bytes == e150.l1_usable
    assert with_overlay(dataclasses.replace(model, l1_bytes=model.l1_bytes + 1), e150, EXTENDED_OVERLAY_BYTES) is None


@pytest.mark.parametrize("resource, paired", [("producer_phases", True), ("fan_out", False),
                                              ("consumer_phases", True)])
def test_an_overuse_rules_out_the_pair_of_candidates_where_the_reader_sets_it(tmp_path, monkeypatch, epoch_solvers,
                                                                              resource, paired):
    """A producer core's stream phases count the runs of tiles each reader takes, so an overuse of them rules out
    the pair of producer and consumer candidates (the producer keeps its candidate for other readers), as a
    consumer core's resources do, and the producer's candidate once it overused with `READER_TRIES` reader
    candidates in the epoch; a producer core's fan-out rules out the producer's candidate."""
    solver, producer, consumer, first, last = _read_edge(tmp_path, epoch_solvers)
    choice = tuple(1 if k in (0, last - first) else 0 for k in range(last - first + 1))
    overusing = consumer if resource.startswith("consumer") else producer
    found = Overuse(overusing, (0, 0), resource, 900, 862)
    monkeypatch.setattr(solver.table.coster, "overuse", lambda *args: (found, producer, consumer))
    solver._forbidden.clear()
    solver._banned.clear()
    solver._paired.clear()
    assert solver._avoid_overuse(first, last, choice)
    assert solver._forbidden == ({(producer, 1, consumer, 1)} if paired else set())
    assert solver._banned == ({} if paired else {(first, last): {(producer, 1)}})
    tries = planner.READER_TRIES
    for reader in range(2, tries + 2):      # other reader candidates, the same producer candidate
        assert solver._avoid_overuse(first, last, tuple(reader if k == last - first else c
                                                        for k, c in enumerate(choice)))
    if resource == "producer_phases":
        assert solver._forbidden == {(producer, 1, consumer, r) for r in range(1, tries + 1)}
        assert solver._banned == {(first, last): {(producer, 1)}}
    elif paired:
        assert solver._forbidden == {(producer, 1, consumer, r) for r in range(1, tries + 2)} and not solver._banned


def test_a_producer_candidate_no_reader_candidate_may_pair_with_is_replaced_not_cut(tmp_path, epoch_solvers):
    """Where overuses ruled out every pair of a producer's chosen candidate with its reader's candidates, the
    epoch's compatible choice moves the producer to a candidate the reader can pair with (`_repartnered`); the
    walk used to cut the epoch there (an unstreamed producer had nowhere to move)."""
    solver, producer, consumer, first, last = _read_edge(tmp_path, epoch_solvers)
    epoch = solver._epoch_data(first, last)
    hint = tuple(next(j for j, c in enumerate(solver.candidates[n]) if not c.model.t_stream) for n in epoch.names)
    solver._forbidden.clear()

    def choose():
        return solver._compatible_choice(epoch.names, epoch.cycles, hint, epoch.edges, set())
    assert choose()[0] == hint[0]
    solver._forbidden.update((producer, hint[0], consumer, k) for k in range(len(solver.candidates[consumer])))
    choice = choose()
    assert isinstance(choice, list) and choice[0] != hint[0]
    reads = [compatible for p, c, compatible in epoch.edges if (p, c) == (0, last - first)]
    assert reads and all(compatible(choice[0], choice[-1]) for compatible in reads)
