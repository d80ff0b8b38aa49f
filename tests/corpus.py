"""Where the tests find the real netlist corpus: $PYBUDA_NETLIST_CORPUS, else the shared checkout next to the
repository (<repository root>/../shared/netlists/real)."""
import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
REAL_DIR = Path(os.environ.get("PYBUDA_NETLIST_CORPUS", REPO_ROOT.parent / "shared" / "netlists" / "real"))
REAL = f"{REAL_DIR}/"

if not REAL_DIR.is_dir():
    raise RuntimeError(f"netlist corpus not found at {REAL_DIR}: set PYBUDA_NETLIST_CORPUS to the directory holding "
                       f"the real netlists (shared/netlists/real)")
