"""Mutants of real netlists: the parsed YAML data changed in one way (a field dropped or given a weird value, a
bad TM, a shape or grid change, a broken program, a renamed input, a duplicated op).

One mutator, two drivers: `HypothesisChooser` (the property test explores) and `RandomChooser` (a seeded,
reproducible corpus: `mutant_corpus`, whose validator verdicts `tests/verdicts.py` records)."""
from __future__ import annotations

import copy
import functools
import random

import yaml

from corpus import REAL

FILES = [
    "graph_tests__netlists__netlist_module_direct_1x1.yaml",
    "graph_tests__netlists__netlist_train.yaml",
    "graph_tests__netlists__pybuda_pregenerated__feedforward__grayskull__ff_1_32_128_netlist.yaml",
    "graph_tests__netlists__netlist_fused_layernorm_reduce.yaml",
    "op_tests__netlists__bh_test_plan_netlists__hlk_functional_tests__matmul_w_bias.yaml",
    "op_tests__netlists__bh_test_plan_netlists__hlk_functional_tests__netlist_reduce_r_dim.yaml",
    "graph_tests__netlists__netlist_softmax_single_tile.yaml",
]

WORDS = ["HOST", "dram", "host", "queue", "ram", "r", "c", "z", "Float16_b", "Bfp8", "bogus", "$v", "$c_zero",
         "transpose", "None", "matmul", "nop", "input0", "dest", "intermed0", "output", "Float32", "Float16", "Int8",
         "Int32", "UInt8", "Bfp2", "Bfp4_b", "RawUInt32", "HiFi4", "LoFi", "max", "rc", "ublock", "pack", "add",
         "reduce", "fused_op", "datacopy", "gelu"]
SPECIAL_INTS = [0, -1, 2**40, 10**6]
BAD_TMS = ["transpose", {"hslice": 3}, {"vslice": 2}, {"hstack": 4}, {"vstack": 0}, {"broadcast": {"z": 3}},
           {"broadcast": {"r": 5}}, {"broadcast": {"q": 2}}, {"pad": [1, 1, 0.0]}, {"pad": [1]},
           {"tile_broadcast": "r"}, {"select": 1}, {"hslice": "x"}, 7, [1, 2]]
INSTRUCTIONS = ["endloop", {"loop": 0}, {"loop": "$undefined"}, {"param": ["$p_x"]},
                {"varinst": ["$c_zero", "incwrap", 1]}, {"varinst": ["$x", "fly", 1, 2]},
                {"execute": {"graph_name": "nope"}}, {"allocate_queue": ["nope"]}, {"var": ["$c_zero"]},
                {"jump": 3}, "endprogram", {"execute": {}}]
KINDS = ["drop", "replace", "tm", "shape", "program", "list", "rename", "dup_op"]


class RandomChooser:
    """Choices from a seeded `random.Random`: the same seed, the same mutant."""

    _TEXT = "ab_$:#'\" -é0"

    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def pick(self, seq):
        return seq[self.rng.randrange(len(seq))]

    def integer(self, lo: int, hi: int) -> int:
        return self.rng.randint(lo, hi)

    def boolean(self) -> bool:
        return self.rng.random() < 0.5

    def weird(self):
        r = self.rng
        kind = r.randrange(9)
        if kind == 0:
            return r.randint(-3, 70)
        if kind == 1:
            return self.pick(SPECIAL_INTS)
        if kind == 2:
            return self.boolean()
        if kind == 3:
            return None
        if kind == 4:
            return self.pick([0.5, -2.25, 1e-7, 3.0e38, float("inf"), float("-inf"), float("nan")])
        if kind == 5:
            return "".join(self.pick(self._TEXT) for _ in range(r.randint(0, 6)))
        if kind == 6:
            return self.pick(WORDS)
        if kind == 7:
            return [r.randint(-1, 20) for _ in range(r.randint(0, 3))]
        return {"".join(self.pick(self._TEXT) for _ in range(r.randint(0, 3))): r.randint(-5, 5)
                for _ in range(r.randint(0, 2))}


@functools.lru_cache(maxsize=None)
def _parsed(name: str) -> dict:
    with open(REAL + name) as f:
        return yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def real_data(name: str) -> dict:
    """A real netlist's YAML data, a copy of its one parse: a test that edits it changes no other test's netlist
    (the mutant verdicts depended on which tests had run before in the same worker)."""
    return copy.deepcopy(_parsed(name))


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


def mutate(data: dict, ch) -> dict:
    """A copy of `data` changed in one way chosen by `ch` (a chooser: pick, integer, boolean, weird)."""
    data = copy.deepcopy(data)
    paths = [p for p, _ in _paths(data) if p]
    kind = ch.pick(KINDS)
    if kind == "drop":
        path = ch.pick(paths)
        _parent(data, path).pop(path[-1])
    elif kind == "replace":
        path = ch.pick(paths)
        _parent(data, path)[path[-1]] = ch.weird()
    elif kind == "list":
        lists = [(p, v) for p, v in _paths(data) if isinstance(v, list)]
        if lists:
            path, value = ch.pick(lists)
            if value and ch.boolean():
                value.pop(ch.integer(0, len(value) - 1))
            else:
                value.append(ch.weird())
    elif kind in ("tm", "shape", "rename", "dup_op"):
        _mutate_entry(data, kind, ch)
    elif kind == "program":
        progs = data.get("programs")
        if isinstance(progs, list) and progs and isinstance(progs[0], dict):
            (pname, body), = list(progs[0].items())[:1] or [(None, None)]
            if isinstance(body, list):
                op = ch.pick(["insert", "delete", "swap"])
                if op == "insert" or not body:
                    body.insert(ch.integer(0, len(body)), copy.deepcopy(ch.pick(INSTRUCTIONS)))
                elif op == "delete":
                    body.pop(ch.integer(0, len(body) - 1))
                elif len(body) > 1:
                    i, j = ch.integer(0, len(body) - 1), ch.integer(0, len(body) - 1)
                    body[i], body[j] = body[j], body[i]
    return data


def _mutate_entry(data: dict, kind: str, ch) -> None:
    graphs = data.get("graphs") if isinstance(data.get("graphs"), dict) else {}
    queues = data.get("queues") if isinstance(data.get("queues"), dict) else {}
    ops = [(g, name) for g, gd in graphs.items() if isinstance(gd, dict)
           for name, op in gd.items() if isinstance(op, dict)]
    ops += [("__queue__", name) for name, q in queues.items() if isinstance(q, dict)]
    if not ops:
        return
    g, name = ch.pick(ops)
    entry = data["queues"][name] if g == "__queue__" else data["graphs"][g][name]
    if kind == "tm":
        key = "input_tms" if g == "__queue__" else f"input_{ch.integer(0, 3)}_tms"
        tms = entry.setdefault(key, []) or []
        if not isinstance(tms, list):
            tms = []
        tms.insert(ch.integer(0, len(tms)), copy.deepcopy(ch.pick(BAD_TMS)))
        entry[key] = tms
    elif kind == "shape":
        key = ch.pick(["grid_size", "mblock", "ublock", "t", "grid_loc", "entries", "buf_size_mb"])
        if key in ("t", "entries", "buf_size_mb"):
            entry[key] = ch.integer(-1, 16)
        else:
            entry[key] = [ch.integer(-1, 13), ch.integer(-1, 13)]
    elif kind == "rename":
        other = ch.pick(ops)[1]
        if "inputs" in entry and isinstance(entry["inputs"], list) and entry["inputs"]:
            entry["inputs"][ch.integer(0, len(entry["inputs"]) - 1)] = other
        else:
            entry["input"] = other
    elif kind == "dup_op" and g != "__queue__":
        names = [k for k, v in data["graphs"].items() if isinstance(v, dict)]
        data["graphs"][ch.pick(names)][name + "_x" if ch.boolean() else name] = copy.deepcopy(entry)


def mutant_text(seed: int) -> tuple[str, str | None]:
    """(source file, YAML text) of corpus mutant `seed` (one to three mutations); text None if PyYAML cannot
    dump it."""
    ch = RandomChooser(seed)
    name = FILES[seed % len(FILES)]
    mutant = real_data(name)
    for _ in range(1 + seed % 3):
        mutant = mutate(mutant, ch)
    try:
        return name, yaml.safe_dump(mutant, sort_keys=False)
    except yaml.YAMLError:
        return name, None


MUTANT_SEEDS = range(1500)
