"""Where the tests find the real netlist corpus (`pybuda.tools.shared`: $PYBUDA_NETLIST_CORPUS, else the shared
checkout next to the repository, <repository root>/../shared/netlists/real)."""
from pybuda.tools.shared import REAL_NETLISTS as REAL_DIR

REAL = f"{REAL_DIR}/"

if not REAL_DIR.is_dir():
    raise RuntimeError(f"netlist corpus not found at {REAL_DIR}: set PYBUDA_SHARED to the shared checkout (or "
                       f"PYBUDA_NETLIST_CORPUS to the directory holding the real netlists)")
