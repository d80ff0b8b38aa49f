"""Buda backend simulator: runs netlists numerically on numpy and estimates their performance.

Public API:
- Simulator(netlist, device=None): push(queue, array), run(program=None, **params), pop(queue), estimate()
- estimate(netlist, device=None, *, program=None, params=None) -> PerfReport
- quantize(x, df): round an array to a Buda data format
- kernel_cycles(arch, op_type, *, t, mblock, ublock, out_df, math_fidelity, m_k=1, u_kt=1, attributes=None)
- SimulatorError
See docs/simulator.md for the models.
"""
from .errors import SimulatorError
from .executor import SUPPORTED_OP_TYPES, Simulator
from .formats import fidelity_product, quantize
from .netlist_io import Netlist, load_netlist
from .op_cycles import kernel_cycles
from .timing import EpochPerf, OpPerf, PerfReport, estimate

__all__ = [
    "Simulator", "SimulatorError", "estimate", "PerfReport", "EpochPerf", "OpPerf", "quantize", "fidelity_product",
    "kernel_cycles", "load_netlist", "Netlist", "SUPPORTED_OP_TYPES",
]
