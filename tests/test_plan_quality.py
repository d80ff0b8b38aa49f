"""Plan quality of the default (CP-SAT) policy, all from our simulator: the BERT-base encoder stack against the
backend team's v3 netlist of it, the planner's fork cuts (`planner._cut_forks`) and its third split, cut where
the lower bound's own split starts epochs.

Fork cuts: where a fork-join stall that buffering cannot remove sets an epoch's pace, the split is planned again
with an epoch ending at the fork, so the join reads the short path from a DRAM queue that holds the microbatch;
the cut plan is kept only when it is cheaper (for these layers under the data-movement model it is not: the
DRAM round trip costs more than the stall). Three ViT-B/16 layers on e150 (microbatch 64, Bfp8_b, LoFi) have such
stalls: a layer's residual add (the fork) whose output the layer's last op adds back (the join) holds fewer inputs
of the residual than the path between them needs. (Two layers stalled before layernorm's constants were kernel
broadcast; now their plan has none.)"""
from __future__ import annotations


import pytest
import torch

import pybuda
from pybuda.backend_sim import estimate
from pybuda.balancer import background, planner
from pybuda.balancer.fork_join import pace
from pybuda.netlist import load
from pybuda.tools.models import BertEncoderStack
from pybuda.tools.shared import CALIBRATION_NETLISTS

V3_BERT = CALIBRATION_NETLISTS / "perf_lib__graph_tests__grayskull__inference__bert_base_lofi_bfp8b_v3.yaml"


@pytest.mark.slow
@pytest.mark.skipif(not V3_BERT.is_file(), reason="netlist corpus not available")
def test_bert_base_stack_beats_the_legacy_v3_netlist(tmp_path):
    """The backend's own v3 netlist of the stack (12 encoder layers, sequence 128, e150, input_count 128, Bfp8_b,
    LoFi, inputs in DRAM), both under the one backend model (`benchmarks/bert_encoder.py` prints both and their
    epochs' limiters). The issue's target was 1.25x; ours is 1.06x (3,249 vs 3,051 samples/s, 1.19x its lower
    bound; 3,250 and 1.17x before layernorm's constants were kernel broadcast, which lowered the bound more than
    the plan) and the plan's own lower bound is 1.27x, so no plan of this graph reaches the target under this
    model (`docs/balancer.md`, "Against the legacy compiler", says what limits it). Asserted: ours faster than v3
    by at least 5 %, and within 1.22x of its lower bound."""
    torch.manual_seed(0)
    config = pybuda.CompilerConfig(default_df_override="Bfp8_b", default_math_fidelity="LoFi",
                                   input_queues_on_host=False)
    with torch.no_grad():
        compiled = pybuda.compile(BertEncoderStack().eval(), torch.randn(128, 128, 768), torch.zeros(128, 1, 128),
                                  device="e150", config=config, output_dir=tmp_path)
    legacy = estimate(load(str(V3_BERT)))
    assert legacy.samples == compiled.perf.samples == 128
    assert compiled.perf.samples_per_second >= 1.05 * legacy.samples_per_second
    placement = compiled.placement
    assert placement.estimated_cycles <= 1.22 * placement.lower_bound_cycles


def _stalls(placement) -> list[tuple[str, str]]:
    """(fork, join) of every fork-join stall that sets its epoch's pipeline."""
    return [(op.fork, op.name) for timing in placement.epoch_timings for op in timing.ops
            if op.limiter == "fork_join" and op.limiter_cycles > pace(timing)]


@pytest.mark.slow
def test_a_stalled_fork_join_is_planned_again_cut_after_the_fork_and_the_cheaper_plan_kept(monkeypatch):
    """ResNet-50 on e150 at its published configuration (microbatch 64, Float16_b): the first epoch of the split
    that plans cheapest stalls on a residual's fork-join; planned again cut after those forks it plans cheaper,
    and that plan is kept."""
    from pybuda.tools.zoo import compile_zoo_model

    planned = []

    def record(*args, **kwargs):
        plan = planned_split(*args, **kwargs)
        planned.append(plan)
        return plan
    planned_split = planner._finished      # every plan of a split is finished through it
    monkeypatch.setattr(planner, "_finished", record)
    compiled = compile_zoo_model("resnet50", "e150", 64, "Float16_b", "HiFi3")
    uncut = min((p for p in planned if not p.cuts), key=lambda p: p.placement.estimated_cycles)
    stalls = _stalls(uncut.placement)
    assert stalls, "the plan without fork cuts should stall on the residual's fork-join"
    cut = next(p for p in planned if p.cuts)
    graph = compiled.device_graph
    for fork, join in stalls:     # every reader of the fork, the join included, reads it from a DRAM queue
        readers = [u for u, _ in graph.users(fork) if graph.node(u).kind == "op"]
        assert all(cut.placement.placed[u].epoch > cut.placement.placed[fork].epoch for u in [*readers, join])
    assert not _stalls(cut.placement)
    kept = compiled.placement      # the cheaper of the two (or the greedy plan, cheaper still)
    assert kept.estimated_cycles <= min(uncut.placement.estimated_cycles, cut.placement.estimated_cycles)
    assert kept.lower_bound_cycles is not None and kept.lower_bound_cycles <= kept.estimated_cycles
    # the estimate the planner compared is the simulator's for the netlist written
    assert estimate(compiled.netlist).total_cycles == kept.estimated_cycles


def test_the_bound_splits_epochs_are_planned_as_a_third_split_and_the_cheapest_plan_kept(monkeypatch):
    """MobileNetV2-tiny on n150 (microbatch 4): the split along chains with epochs also starting where the lower
    bound's own split (before its fill is tightened) starts them plans cheaper than both splits the estimate picks,
    and it is the plan kept."""
    from pybuda.tools.zoo import compile_zoo_model

    planned, bound_splits = [], []
    plan_split, bound_split = planner._finished, planner.SegmentTable.split   # every split's plan is finished

    def record_plan(*args, **kwargs):
        planned.append(plan_split(*args, **kwargs))
        return planned[-1]

    def record_bound(table, bound, *args, **kwargs):
        split = bound_split(table, bound, *args, **kwargs)
        if bound and not kwargs.get("tighten", True):
            bound_splits.append(split)
        return split
    monkeypatch.delattr(background.os, "fork", raising=False)     # every split planned in this process, seen
    monkeypatch.setattr(planner, "_finished", record_plan)
    monkeypatch.setattr(planner.SegmentTable, "split", record_bound)
    kept = compile_zoo_model("mobilenetv2_tiny", "n150", 4).placement
    (bound,) = bound_splits
    starts = frozenset(s.first for s in bound.segments[1:])
    uncut = [p for p in planned if not p.cuts]
    assert starts and sorted(p.chains for p in uncut) == [False, True]
    third = next(p for p in planned if p.cuts == starts and p.chains)
    assert [p.cuttable for p in uncut] == [True, True] and not third.cuttable
    assert third.placement.estimated_cycles < min(p.placement.estimated_cycles for p in uncut)
    assert kept.policy == "CP-SAT" and kept.estimated_cycles <= third.placement.estimated_cycles


def test_epochs_of_different_plans_that_meet_end_to_start_are_spliced_into_one_plan(epoch_solvers):
    """`_spliced` chains the cheapest epochs of several plans where one ends right before another starts: priced
    so that one plan's epochs are cheap before position a and another's from a on, the spliced plan is exactly
    those epochs, each op at the model and epoch its source plan gave it, finished into an exact estimate; a chain
    whose epochs all come from one plan is not spliced."""
    import dataclasses

    from pybuda.tools.zoo import compile_zoo_model

    compile_zoo_model("mobilenetv2_tiny", "n150", 4)
    solver = epoch_solvers[-1]
    graph, coster, n = solver.graph, solver.table.coster, len(solver.table.schedule)
    a = n // 2
    early = planner._planned(graph, coster, solver, True, frozenset({a}))
    late = planner._planned(graph, coster, solver, True, frozenset({a, (a + n) // 2}))

    def priced(plan, cheap) -> planner._Plan:
        timings = list(plan.placement.epoch_timings)
        for (first, last), (epoch, _, _) in plan.epochs.items():
            timings[epoch] = dataclasses.replace(timings[epoch], epoch_cycles=1e3 if cheap(first, last) else 1e9)
        return plan._replace(placement=dataclasses.replace(plan.placement, epoch_timings=tuple(timings),
                                                           estimated_cycles=int(sum(t.epoch_cycles
                                                                                    for t in timings))))
    before = priced(early, lambda first, last: last < a)
    after = priced(late, lambda first, last: first >= a)
    spliced = planner._spliced(graph, coster, solver, [before, after])
    wanted = sorted([e for e in early.epochs if e[1] < a] + [e for e in late.epochs if e[0] >= a])
    assert spliced is not None and sorted(spliced.epochs) == wanted
    schedule = solver.table.schedule
    for index, (first, last) in enumerate(wanted):
        source = early if last < a else late
        for name in schedule[first:last + 1]:
            assert spliced.placement.placed[name].epoch == index
            assert spliced.placement.models[name].grid == source.placement.models[name].grid
    assert 0 < spliced.placement.estimated_cycles < 1e9
    assert planner._spliced(graph, coster, solver, [before, before]) is None
