"""The scheduler policies (`scheduler_policy`): each gives an order of the ops that keeps their dependencies and
the `add_schedule_constraint` orderings, and each orders a two-branch graph its own way."""
from __future__ import annotations

import pytest
import torch

import pybuda
from pybuda.balancer.schedule import op_schedule
from pybuda.config import SCHEDULER_POLICIES
from pybuda.ir import Graph
from pybuda.verify import pcc

SHAPE = (1, 1, 32, 32)


def _two_branches() -> Graph:
    """Input x feeds a chain a1 -> a2 -> a3, input y a chain b1 -> b2; j joins a3 and b2 (the a chain is
    added first: the longest path runs x -> a1 -> a2 -> a3 -> j)."""
    g = Graph()
    g.add_input("x", SHAPE)
    g.add_input("y", SHAPE)
    for name, src in (("a1", "x"), ("a2", "a1"), ("a3", "a2"), ("b1", "y"), ("b2", "b1")):
        g.add_op(name, "nop", [src], shape=SHAPE)
    g.add_op("j", "add", ["a3", "b2"], shape=SHAPE)
    g.add_output("out", "j")
    return g


@pytest.mark.parametrize("policy, expected", [
    ("Topological", ["a1", "a2", "a3", "b1", "b2", "j"]),
    ("ModuleInputsBFS", ["a1", "b1", "a2", "b2", "a3", "j"]),
    ("LongestPath", ["a1", "a2", "a3", "b1", "b2", "j"]),
])
def test_each_policy_orders_two_branches_its_way(policy, expected):
    assert op_schedule(_two_branches(), [], policy) == expected


def test_longest_path_pulls_in_a_branch_just_before_its_reader():
    """With the b chain added first, Topological runs it first; LongestPath still runs the long a chain first
    and b just before the join that reads it."""
    g = Graph()
    g.add_input("x", SHAPE)
    g.add_input("y", SHAPE)
    for name, src in (("b1", "y"), ("a1", "x"), ("a2", "a1"), ("a3", "a2")):
        g.add_op(name, "nop", [src], shape=SHAPE)
    g.add_op("j", "add", ["a3", "b1"], shape=SHAPE)
    g.add_output("out", "j")
    assert op_schedule(g, [], "Topological") == ["b1", "a1", "a2", "a3", "j"]
    assert op_schedule(g, [], "LongestPath") == ["a1", "a2", "a3", "b1", "j"]


@pytest.mark.parametrize("policy", SCHEDULER_POLICIES)
def test_every_policy_keeps_the_schedule_constraints(policy):
    schedule = op_schedule(_two_branches(), [["b2", "a1"]], policy)
    assert schedule.index("b2") < schedule.index("a1")
    assert schedule.index("b1") < schedule.index("b2") < schedule.index("j")


@pytest.mark.parametrize("policy", SCHEDULER_POLICIES)
def test_a_compile_under_each_policy_matches_torch(tmp_path, policy):
    """The policy reaches the balancer (its schedule is the netlist's op order) and the outputs stay right."""
    class TwoBranches(torch.nn.Module):
        def forward(self, x, y):
            return torch.relu(torch.exp(x) * 2) + torch.sigmoid(y)

    x, y = torch.randn(1, 32, 32), torch.randn(1, 32, 32)
    compiled = pybuda.compile(TwoBranches(), x, y, config=pybuda.CompilerConfig(scheduler_policy=policy,
                                                                                enable_auto_fusing=False),
                              output_dir=tmp_path)
    ops = [name for graph in compiled.netlist.graphs.values() for name in graph.ops]
    assert ops == op_schedule(compiled.device_graph, [], policy)
    assert len({tuple(op_schedule(compiled.device_graph, [], p)) for p in SCHEDULER_POLICIES}) == 2  # LongestPath:
    # the exp branch is the longer one and was built first, so it orders as Topological does
    assert pcc(compiled(x, y).numpy(), TwoBranches()(x, y).numpy()) >= 0.99
