"""`python -m pybuda ...`: the `pybuda` command line (pybuda.tools.cli)."""
import sys

from .tools.cli import main

sys.exit(main())
