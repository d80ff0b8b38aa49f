"""The reader's and the validator's verdicts on every netlist of the shared corpus (real and calibration) and on
the seeded mutant corpus (`mutants.mutant_text`), and the digest of what the writer writes back for each one
that loads: recorded in `tests/data/netlist_verdicts.json.gz`, compared by `tests/test_netlist_verdicts.py`.

A change of the schema, the reader, the writer or a rule shows up there as a changed verdict or digest; after an
intended one, `python tests/verdicts.py --update` records the new table (commit it with the change)."""
from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mutants import MUTANT_SEEDS, mutant_text  # noqa: E402

from pybuda.netlist import NetlistError, check, dump_netlist, load  # noqa: E402
from pybuda.tools.shared import CALIBRATION_NETLISTS, REAL_NETLISTS  # noqa: E402

GOLDEN = Path(__file__).resolve().parent / "data" / "netlist_verdicts.json.gz"
CORPUS_DIRS = (REAL_NETLISTS, CALIBRATION_NETLISTS)


def _row(v) -> list:
    return [v.line, v.obj, v.rule, v.message, repr(v.expected), repr(v.actual)]


def verdict(text: str) -> dict:
    """{"load": reader violations} or {"check": validator violations, "dump": sha256 of the text written back}."""
    try:
        netlist = load(text)
    except NetlistError as e:
        return {"load": sorted(_row(v) for v in e.errors)}
    return {"check": sorted(_row(v) for v in check(netlist)),
            "dump": hashlib.sha256(dump_netlist(netlist).encode()).hexdigest()}


def corpus_texts():
    """(key, YAML text) of every shared netlist and every mutant."""
    for d in CORPUS_DIRS:
        for path in sorted(d.glob("*.yaml")):
            yield f"{d.name}/{path.name}", path.read_text()
    for seed in MUTANT_SEEDS:
        name, text = mutant_text(seed)
        if text is not None:
            yield f"mutant/{seed}/{name}", text


def verdicts() -> dict:
    return {key: verdict(text) for key, text in corpus_texts()}


def load_golden() -> dict:
    with gzip.open(GOLDEN, "rt") as f:
        return json.load(f)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--update", action="store_true", help="record the verdicts as the golden table")
    args = parser.parse_args(argv)
    table = verdicts()
    if args.update:
        GOLDEN.parent.mkdir(exist_ok=True)
        with gzip.GzipFile(GOLDEN, "wb", mtime=0) as f:
            f.write((json.dumps(table, indent=0, sort_keys=True) + "\n").encode())
        print(f"{len(table)} verdicts written to {GOLDEN}")
        return 0
    golden = load_golden()
    changed = sorted(k for k in set(golden) | set(table) if golden.get(k) != table.get(k))
    for key in changed:
        print(f"{key}: {json.dumps(golden.get(key))[:300]}\n  -> {json.dumps(table.get(key))[:300]}")
    print(f"{len(table)} verdicts, {len(changed)} changed")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
