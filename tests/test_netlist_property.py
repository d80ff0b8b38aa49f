"""Property test: mutants of real netlists either validate or raise NetlistError; nothing else escapes.

Mutations are applied to the parsed YAML data (drop or change fields, wrong types, bad TMs, shape and grid
changes, broken programs), the data is dumped back to text, and the text is loaded and validated."""
from __future__ import annotations

import copy
import functools
import os

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pybuda.netlist import NetlistError, check, dump_netlist, load

from corpus import REAL  # noqa: E402
FILES = [
    "graph_tests__netlists__netlist_module_direct_1x1.yaml",
    "graph_tests__netlists__netlist_train.yaml",
    "graph_tests__netlists__pybuda_pregenerated__feedforward__grayskull__ff_1_32_128_netlist.yaml",
    "graph_tests__netlists__netlist_fused_layernorm_reduce.yaml",
    "op_tests__netlists__bh_test_plan_netlists__hlk_functional_tests__matmul_w_bias.yaml",
    "op_tests__netlists__bh_test_plan_netlists__hlk_functional_tests__netlist_reduce_r_dim.yaml",
    "graph_tests__netlists__netlist_softmax_single_tile.yaml",
]

pytestmark = pytest.mark.skipif(not os.path.isdir(REAL), reason="netlist corpus not available")


@functools.lru_cache(maxsize=None)
def _data(name: str) -> dict:
    with open(REAL + name) as f:
        return yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def _paths(node, prefix=()):
    """Every (path, value) in the data tree, containers included."""
    yield prefix, node
    if isinstance(node, dict):
        for k, v in node.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _paths(v, prefix + (i,))


def _parent(root, path):
    node = root
    for k in path[:-1]:
        node = node[k]
    return node


WEIRD = st.one_of(
    st.integers(min_value=-3, max_value=70), st.sampled_from([0, -1, 2**40, 10**6]), st.booleans(), st.none(),
    st.floats(allow_nan=True, allow_infinity=True, width=32), st.text(max_size=6),
    st.sampled_from(["HOST", "dram", "host", "queue", "ram", "r", "c", "z", "Float16_b", "Bfp8", "bogus", "$v",
                     "$c_zero", "transpose", "None", "matmul", "nop", "input0", "dest", "intermed0", "output"]),
    st.lists(st.integers(min_value=-1, max_value=20), max_size=3), st.dictionaries(st.text(max_size=3),
                                                                                   st.integers(), max_size=2))
BAD_TMS = st.sampled_from(["transpose", {"hslice": 3}, {"vslice": 2}, {"hstack": 4}, {"vstack": 0},
                           {"broadcast": {"z": 3}}, {"broadcast": {"r": 5}}, {"broadcast": {"q": 2}},
                           {"pad": [1, 1, 0.0]}, {"pad": [1]}, {"tile_broadcast": "r"}, {"select": 1},
                           {"hslice": "x"}, 7, [1, 2]])
INSTRUCTIONS = st.sampled_from(["endloop", {"loop": 0}, {"loop": "$undefined"}, {"param": ["$p_x"]},
                                {"varinst": ["$c_zero", "incwrap", 1]}, {"varinst": ["$x", "fly", 1, 2]},
                                {"execute": {"graph_name": "nope"}}, {"allocate_queue": ["nope"]},
                                {"var": ["$c_zero"]}, {"jump": 3}, "endprogram", {"execute": {}}])


def _mutate(data: dict, draw) -> dict:
    data = copy.deepcopy(data)
    paths = [p for p, _ in _paths(data) if p]
    kind = draw(st.sampled_from(["drop", "replace", "tm", "shape", "program", "list", "rename", "dup_op"]))
    if kind == "drop":
        path = draw(st.sampled_from(paths))
        parent = _parent(data, path)
        parent.pop(path[-1])
    elif kind == "replace":
        path = draw(st.sampled_from(paths))
        _parent(data, path)[path[-1]] = draw(WEIRD)
    elif kind == "list":
        lists = [(p, v) for p, v in _paths(data) if isinstance(v, list)]
        if lists:
            path, value = draw(st.sampled_from(lists))
            if value and draw(st.booleans()):
                value.pop(draw(st.integers(0, len(value) - 1)))
            else:
                value.append(draw(WEIRD))
    elif kind in ("tm", "shape", "rename", "dup_op"):
        graphs = data.get("graphs") if isinstance(data.get("graphs"), dict) else {}
        queues = data.get("queues") if isinstance(data.get("queues"), dict) else {}
        ops = [(g, name) for g, gd in graphs.items() if isinstance(gd, dict)
               for name, op in gd.items() if isinstance(op, dict)]
        ops += [("__queue__", name) for name, q in queues.items() if isinstance(q, dict)]
        if not ops:
            return data
        g, name = draw(st.sampled_from(ops))
        entry = data["queues"][name] if g == "__queue__" else data["graphs"][g][name]
        if kind == "tm":
            key = "input_tms" if g == "__queue__" else f"input_{draw(st.integers(0, 3))}_tms"
            tms = entry.setdefault(key, []) or []
            if not isinstance(tms, list):
                tms = []
            tms.insert(draw(st.integers(0, len(tms))), draw(BAD_TMS))
            entry[key] = tms
        elif kind == "shape":
            key = draw(st.sampled_from(["grid_size", "mblock", "ublock", "t", "grid_loc", "entries", "buf_size_mb"]))
            if key == "t" or key in ("entries", "buf_size_mb"):
                entry[key] = draw(st.integers(-1, 16))
            else:
                entry[key] = [draw(st.integers(-1, 13)), draw(st.integers(-1, 13))]
        elif kind == "rename":
            other = draw(st.sampled_from(ops))[1]
            if "inputs" in entry and isinstance(entry["inputs"], list) and entry["inputs"]:
                entry["inputs"][draw(st.integers(0, len(entry["inputs"]) - 1))] = other
            else:
                entry["input"] = other
        elif kind == "dup_op" and g != "__queue__":
            graphs = [k for k, v in data["graphs"].items() if isinstance(v, dict)]
            data["graphs"][draw(st.sampled_from(graphs))][name + "_x" if draw(st.booleans()) else name] = \
                copy.deepcopy(entry)
    elif kind == "program":
        progs = data.get("programs")
        if isinstance(progs, list) and progs and isinstance(progs[0], dict):
            (pname, body), = list(progs[0].items())[:1] or [(None, None)]
            if isinstance(body, list):
                op = draw(st.sampled_from(["insert", "delete", "swap"]))
                if op == "insert" or not body:
                    body.insert(draw(st.integers(0, len(body))), draw(INSTRUCTIONS))
                elif op == "delete":
                    body.pop(draw(st.integers(0, len(body) - 1)))
                elif len(body) > 1:
                    i, j = draw(st.integers(0, len(body) - 1)), draw(st.integers(0, len(body) - 1))
                    body[i], body[j] = body[j], body[i]
    return data


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                     HealthCheck.data_too_large])
@given(st.data())
def test_mutants_validate_or_raise_netlist_error(data):
    name = data.draw(st.sampled_from(FILES))
    mutant = _mutate(_data(name), data.draw)
    for _ in range(data.draw(st.integers(0, 2))):
        mutant = _mutate(mutant, data.draw)
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
