"""Where the shared data lives: the checkout of `shared/` next to the repository root (`<repository>/../shared`),
or the directory `PYBUDA_SHARED` names. Tests, benchmarks and docs find it here only, never through an absolute
path of one machine; `PYBUDA_NETLIST_CORPUS` may point the real-netlist corpus elsewhere."""
from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
SHARED = Path(os.environ.get("PYBUDA_SHARED", REPO_ROOT.parent / "shared"))
REAL_NETLISTS = Path(os.environ.get("PYBUDA_NETLIST_CORPUS", SHARED / "netlists" / "real"))
CALIBRATION_NETLISTS = SHARED / "netlists" / "calibration"
OP_SWEEPS = SHARED / "reference" / "silicon" / "op-sweeps"
SILICON = SHARED / "reference" / "silicon"


def real_netlist(name: str) -> Path:
    """A netlist of the real corpus (`shared/netlists/real/<name>`)."""
    return REAL_NETLISTS / name
