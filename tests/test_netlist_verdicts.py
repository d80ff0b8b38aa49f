"""The reader's and the validator's verdicts (rule ids, objects, lines, messages, expected and actual values) and
the writer's output on every shared netlist and on the seeded mutant corpus are those recorded in
tests/data/netlist_verdicts.json.gz (`python tests/verdicts.py` lists changes, `--update` records them)."""
from __future__ import annotations

import json

import pytest

from verdicts import corpus_texts, load_golden, verdict

from pybuda.netlist.rules import RULES

pytestmark = pytest.mark.slow
CHUNKS = 8


@pytest.fixture(scope="module")
def golden() -> dict:
    return load_golden()


@pytest.fixture(scope="module")
def corpus() -> list[tuple[str, str]]:
    """The corpus, built once per worker (the mutants take most of a chunk's time)."""
    return list(corpus_texts())


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_verdicts_are_the_recorded_ones(golden, corpus, chunk):
    texts = [kt for k, kt in enumerate(corpus) if k % CHUNKS == chunk]
    changed = []
    for key, text in texts:
        now = verdict(text)
        if golden.get(key) != now:
            changed.append(f"{key}:\n  was {json.dumps(golden.get(key))[:400]}\n  now {json.dumps(now)[:400]}")
    assert not changed, f"{len(changed)} verdicts changed:\n" + "\n".join(changed[:10])


def test_the_corpus_covers_every_recorded_key(golden, corpus):
    assert {key for key, _ in corpus} == set(golden)


def test_every_reported_rule_is_registered(golden):
    reported = {row[2] for v in golden.values() for row in v.get("load", []) + v.get("check", [])}
    assert reported <= set(RULES) | {r for rule in RULES.values() for r in rule.reports}
    assert len(reported) > 70          # the corpus exercises most rules
