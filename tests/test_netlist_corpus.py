"""The real netlist corpus: every file parses, round-trips through the writer, and validates, except the two
files the backend itself would reject, which are rejected naming the op and the rule."""
from __future__ import annotations

import functools

import pytest
import yaml

from pybuda.netlist import NetlistError, check, dump_netlist, load, netlist_to_data, summary, validate

from corpus import REAL_DIR as REAL  # noqa: E402
FILES = sorted(p.name for p in REAL.glob("*.yaml")) if REAL.is_dir() else []

# known-inconsistent (README): the op and the rule the rejection must name
KNOWN_BAD = {
    "graph_tests__netlists__netlist_softmax_v1.yaml": ("op exp", "shape.eltwise"),
    "graph_tests__netlists__netlist_bert_mha_train.yaml": ("op mha_0_as_softmax_sum.lc1", "tm.broadcast_z_t"),
}
# listed for grayskull but use a Float32 dest, which grayskull lacks: the backend rejects them with
# ARCH_NAME=grayskull; they are valid for the other archs they list
NOT_FOR_GRAYSKULL = {
    "op_tests__netlists__bh_test_plan_netlists__hlk_functional_tests__netlist_binary_fp32_add_op.yaml",
    "op_tests__netlists__bh_test_plan_netlists__hlk_functional_tests__netlist_unary_datacopy_fp32_op.yaml",
}

pytestmark = pytest.mark.skipif(not FILES, reason="netlist corpus not available")


@functools.lru_cache(maxsize=None)
def _load(name: str):
    return load(REAL / name)


def test_corpus_is_complete():
    assert len(FILES) >= 95
    assert set(KNOWN_BAD) | NOT_FOR_GRAYSKULL <= set(FILES)


@pytest.mark.parametrize("name", FILES)
def test_parses_round_trips_and_validates(name):
    n = _load(name)
    if (REAL / name).stat().st_size < 200_000:   # (the big files are PyBuda output like the small ones)
        raw = yaml.load((REAL / name).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        # the model holds what the file holds
        assert list(n.queues) == list(raw["queues"])
        assert list(n.graphs) == list(raw["graphs"])
        assert sum(len(g.ops) for g in n.graphs.values()) == sum(
            sum(isinstance(v, dict) for v in g.values()) for g in raw["graphs"].values())
        assert [p.name for p in n.programs] == [next(iter(p)) for p in raw["programs"]]
        assert {k for k in raw if k not in ("devices", "queues", "graphs", "programs", "fused_ops")} == \
            set(n.extra_sections)
    assert all(q.line > 0 for q in n.queues.values()) and all(op.line > 0 for op in n.ops.values())
    # read -> write -> read gives an equal model
    again = load(dump_netlist(n))
    assert again == n
    assert netlist_to_data(again) == netlist_to_data(n)
    # the backend's rules
    arch = "wormhole_b0" if name in NOT_FOR_GRAYSKULL else None
    errors = check(n, arch=arch)
    if name in KNOWN_BAD:
        obj, rule = KNOWN_BAD[name]
        assert any(e.obj == obj and e.rule == rule for e in errors), [str(e) for e in errors]
    else:
        assert errors == [], "\n".join(map(str, errors))
        # a netlist listing several archs is valid for each of them (that pybuda has a device for)
        for other in n.archs:
            if other in ("grayskull", "wormhole_b0") and other != n.arch and name not in NOT_FOR_GRAYSKULL:
                assert check(n, arch=other) == [], other
    summary(n)


@pytest.mark.parametrize("name", sorted(KNOWN_BAD))
def test_known_inconsistent_files_are_rejected_with_op_and_rule(name):
    obj, rule = KNOWN_BAD[name]
    with pytest.raises(NetlistError) as err:
        validate(REAL / name)
    text = str(err.value)
    assert obj.split()[-1] in text and rule in text and name in text


def test_softmax_v1_message_names_the_tile_counts():
    errors = check(_load("graph_tests__netlists__netlist_softmax_v1.yaml"))
    e = next(e for e in errors if e.rule == "shape.eltwise")
    assert e.expected == (1, 2, 2) and e.actual == (1, 1, 1) and "input_activation" in e.message


def test_bert_mha_train_names_the_broadcast():
    errors = check(_load("graph_tests__netlists__netlist_bert_mha_train.yaml"))
    assert {e.rule for e in errors} == {"tm.broadcast_z_t"}
    assert all(e.expected == "t == 1" and e.actual == 4 for e in errors)


@pytest.mark.parametrize("name", sorted(NOT_FOR_GRAYSKULL))
def test_float32_dest_files_are_rejected_for_grayskull(name):
    n = _load(name)
    assert n.arch == "grayskull"
    errors = check(n)
    assert {e.rule for e in errors} == {"df.grayskull_acc"}
    assert check(n, arch="wormhole_b0") == []
