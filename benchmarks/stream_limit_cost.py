"""What the per-core stream limits cost the plans: published configurations compiled as usual, then with the
limits switched off in the balancer and the validator alike (`pybuda.arch.movement.overuses` finding nothing), so
the second netlist may not run on a chip. Prints, per configuration, cycles, epochs and plan / bound both ways and
the share of the plan the limits cost (docs/balancer.md, "Plan quality").

    PYTHONPATH=. python benchmarks/stream_limit_cost.py [--model KEY_PREFIX ...]

KEY_PREFIX selects cases of `perf_regression.cases("full")` by the start of their key (e.g. `mobilenetv2/e150`);
without it, every published configuration (slow: two compiles each).
"""
from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator

import pybuda.balancer.plan_cost as plan_cost
import pybuda.netlist.rules.streams as stream_rules
from pybuda.tools import perf_regression as pr


@contextlib.contextmanager
def limits_off() -> Iterator[None]:
    """Within the block, no plan or netlist overuses a stream resource."""
    saved = plan_cost.overuses, stream_rules.overuses
    plan_cost.overuses = stream_rules.overuses = lambda *args, **kwargs: []
    try:
        yield
    finally:
        plan_cost.overuses, stream_rules.overuses = saved


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", action="append", help="a key prefix of the full tier (default: every case)")
    args = ap.parse_args()
    selected = [case for case in pr.cases("full")
                if not args.model or any(case.key.startswith(prefix) for prefix in args.model)]
    print("| configuration | with stream limits | without | share of the plan the limits cost |")
    print("|---|---|---|---|")
    for case in selected:
        with_limits = pr.measure(case)
        with limits_off():
            without = pr.measure(case)
        share = 1 - without["estimated_cycles"] / with_limits["estimated_cycles"]
        cells = [f"{m['estimated_cycles'] / 1e6:.1f} M cycles, {m['epochs']} epochs, {m['bound_ratio']:.2f}x"
                 for m in (with_limits, without)]
        print(f"| {case.key} | {cells[0]} | {cells[1]} | {share:.0%} |", flush=True)


if __name__ == "__main__":
    main()
