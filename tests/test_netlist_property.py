"""Property test: mutants of real netlists either validate or raise NetlistError; nothing else escapes.

Mutations are applied to the parsed YAML data (drop or change fields, wrong types, bad TMs, shape and grid
changes, broken programs), the data is dumped back to text, and the text is loaded and validated."""
from __future__ import annotations

import os

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pybuda.netlist import NetlistError, check, dump_netlist, load

from corpus import REAL  # noqa: E402
from mutants import FILES, SPECIAL_INTS, WORDS, mutate, real_data  # noqa: E402

pytestmark = pytest.mark.skipif(not os.path.isdir(REAL), reason="netlist corpus not available")

WEIRD = st.one_of(
    st.integers(min_value=-3, max_value=70), st.sampled_from(SPECIAL_INTS), st.booleans(), st.none(),
    st.floats(allow_nan=True, allow_infinity=True, width=32), st.text(max_size=6), st.sampled_from(WORDS),
    st.lists(st.integers(min_value=-1, max_value=20), max_size=3), st.dictionaries(st.text(max_size=3),
                                                                                   st.integers(), max_size=2))


class HypothesisChooser:
    """The mutator's choices drawn by Hypothesis (which shrinks a failing mutant)."""

    def __init__(self, draw):
        self.draw = draw

    def pick(self, seq):
        return self.draw(st.sampled_from(seq))

    def integer(self, lo: int, hi: int) -> int:
        return self.draw(st.integers(lo, hi))

    def boolean(self) -> bool:
        return self.draw(st.booleans())

    def weird(self):
        return self.draw(WEIRD)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                     HealthCheck.data_too_large])
@given(st.data())
def test_mutants_validate_or_raise_netlist_error(data):
    chooser = HypothesisChooser(data.draw)
    mutant = mutate(real_data(chooser.pick(FILES)), chooser)
    for _ in range(chooser.integer(0, 2)):
        mutant = mutate(mutant, chooser)
    try:
        text = yaml.safe_dump(mutant, sort_keys=False)
    except yaml.YAMLError:
        return
    try:
        netlist = load(text)
        errors = check(netlist)
    except NetlistError as e:
        assert e.errors and all(v.rule for v in e.errors)
        str(e)
        return
    # a mutant that loads round-trips like any netlist, whether or not it is valid (compared as text: NaN != NaN)
    text = dump_netlist(netlist)
    assert dump_netlist(load(text)) == text
    for e in errors:
        assert e.rule and e.message


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=200) | st.text(max_size=200))
def test_arbitrary_text_never_crashes(blob):
    try:
        load(blob.decode(errors="replace") if isinstance(blob, bytes) else blob)
    except NetlistError:
        pass


def test_negative_address_round_trips():
    """Found by the mutant test: a negative DRAM address was written as `0x-1`, which reads back as a string."""
    netlist = load(REAL + FILES[0])
    queue = next(q for q in netlist.queues.values() if q.loc == "dram")
    queue.dram = [(0, -1)] + list(queue.dram[1:])
    text = dump_netlist(netlist)
    assert load(text).queues[queue.name].dram[0] == (0, -1)
    assert any(e.rule == "queue.address" for e in check(load(text)))


def test_an_empty_target_device_list_is_a_violation_not_a_crash():
    """Found by the mutant test: a graph or queue with `target_device: []` reached the stream rules, which read
    its first device."""
    for field in ("graphs", "queues"):
        data = real_data("graph_tests__netlists__netlist_module_direct_1x1.yaml")
        first = next(iter(data[field].values()))
        first["target_device"] = []
        errors = check(load(yaml.safe_dump(data, sort_keys=False)))
        rule = "graph.target_device" if field == "graphs" else "queue.target_device"
        assert any(e.rule == rule and "lists no device" in e.message for e in errors), errors


def test_stream_rules_skip_a_graph_whose_pipes_cannot_be_built():
    """Found by the mutant test (a worker killed at 23 GB): an op grid of a million cores outside the worker grid
    was enumerated core by core by the stream rules; `grid.bounds` reports it, the stream rules skip the graph."""
    from pybuda.netlist.rules.registry import Context
    from pybuda.netlist.rules.streams import graph_streams
    from pybuda.device import get_device

    data = real_data("graph_tests__netlists__netlist_module_direct_1x1.yaml")
    graph = next(iter(data["graphs"].values()))
    op = next(k for k in graph if k not in ("target_device", "input_count"))
    graph[op]["grid_size"] = [100000, 1]
    netlist = load(yaml.safe_dump(data, sort_keys=False))
    assert any(e.rule == "grid.bounds" for e in check(netlist))
    context = Context(netlist, "wormhole_b0", get_device("n150"), 1)
    assert graph_streams(context, next(iter(netlist.graphs.values()))) == {}
