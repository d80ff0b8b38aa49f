"""Estimate-only speed (parse + `estimate`, no numerics) of every netlist under shared/netlists (issue 11).

Prints, per netlist, the best of `--repeat` timings in one process (the first run, which also imports and fills
the cycle model's caches, is not counted), the slowest `--top` of them and the largest (target <= 1 s), plus the
samples/s each estimate gives.

    python benchmarks/estimate_speed.py [--repeat 3] [--top 10] [DIR_OR_FILE ...]
"""
from __future__ import annotations

import argparse
import glob
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from sim_speed import time_estimate  # noqa: E402

from pybuda.backend_sim import estimate  # noqa: E402

# the shared checkout next to the repository
SHARED = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared",
                                       "netlists"))
DEFAULT_PATHS = [os.path.join(SHARED, "calibration"), os.path.join(SHARED, "real")]
TARGET_S = 1.0


def netlist_files(paths: list[str]) -> list[str]:
    """The .yaml files named or found (sorted) in the given directories."""
    files = []
    for p in paths:
        files += sorted(glob.glob(os.path.join(p, "*.yaml"))) if os.path.isdir(p) else [p]
    return files


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("paths", nargs="*", default=DEFAULT_PATHS)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--top", type=int, default=10)
    args = ap.parse_args(argv)

    rows = []
    for path in netlist_files(args.paths):
        try:
            estimate(path)
        except Exception as e:  # a corpus file the simulator rejects: listed, not timed
            print(f"skipped {os.path.basename(path)}: {type(e).__name__}")
            continue
        seconds, report = time_estimate(path, args.repeat)
        rows.append((seconds, os.path.basename(path), report.samples_per_second))
    rows.sort(reverse=True)
    print(f"parse + estimate, best of {args.repeat}, slowest {args.top} of {len(rows)} netlists:")
    for seconds, name, sps in rows[:args.top]:
        print(f"  {seconds:6.3f} s  {sps:12,.1f} samples/s  {name}")
    worst = rows[0][0] if rows else 0.0
    print(f"largest: {worst:.3f} s (target <= {TARGET_S:g} s): {'ok' if worst <= TARGET_S else 'OVER'}")
    return 0 if worst <= TARGET_S else 1


if __name__ == "__main__":
    sys.exit(main())
