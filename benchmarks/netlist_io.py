"""Netlist I/O speed: load + validate of the BERT-base corpus netlist (500 KB, 9 epochs) against a bare
`yaml.load` with the C loader. Targets: under 1.5 s, and under 3x the bare load. Best of `--repeat` runs."""
from __future__ import annotations

import argparse
import os
import sys
import time

import yaml

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from pybuda.netlist import check, dump_netlist, load  # noqa: E402
from pybuda.netlist.reader import compose  # noqa: E402

# the shared checkout next to the repository
DEFAULT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared",
                                        "netlists", "real", "graph_tests__netlists__bert_base_inference.yaml"))


def best(fn, repeat: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return min(times), out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("netlist", nargs="?", default=DEFAULT)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    text = open(args.netlist).read()
    loader = getattr(yaml, "CSafeLoader", None)
    if loader is None:
        print("warning: PyYAML has no libyaml; the baseline uses the pure-Python loader")
        loader = yaml.SafeLoader

    bare, _ = best(lambda: yaml.load(text, Loader=loader), args.repeat)
    composed, _ = best(lambda: compose(text), args.repeat)
    loaded, netlist = best(lambda: load(text), args.repeat)
    checked, errors = best(lambda: check(netlist), args.repeat)
    total, _ = best(lambda: check(load(text)), args.repeat)
    dumped, _ = best(lambda: dump_netlist(netlist), args.repeat)

    ops = sum(len(g.ops) for g in netlist.graphs.values())
    print(f"netlist         {os.path.basename(args.netlist)} ({len(text) / 1024:.0f} KB, {len(netlist.queues)} queues, "
          f"{ops} ops, {len(netlist.graphs)} graphs; {len(errors)} violations)")
    print(f"yaml.load (C)   {bare:7.3f} s   baseline")
    print(f"  compose (C)   {composed:7.3f} s")
    print(f"load            {loaded:7.3f} s")
    print(f"validate        {checked:7.3f} s")
    print(f"load+validate   {total:7.3f} s   ratio to yaml.load {total / bare:.2f}  "
          f"(targets: < 1.5 s {'ok' if total < 1.5 else 'MISSED'}, ratio < 3 {'ok' if total / bare < 3 else 'MISSED'})")
    print(f"dump            {dumped:7.3f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
