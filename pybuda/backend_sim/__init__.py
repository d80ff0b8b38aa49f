"""Buda backend simulator: runs netlists numerically on numpy and estimates their performance.

Netlists are read by `pybuda.netlist.load` (a path, YAML text or dict; an already-loaded `pybuda.netlist.Netlist`
is taken as is) and simulated from that typed model.

Public API:
- Simulator(netlist, device=None): push(queue, array), run(program=None, **params), pop(queue), estimate()
- estimate(netlist, device=None, *, program=None, params=None) -> PerfReport (to_text, to_rich, to_csv)
- run_random(netlist, seed=0, ...) / fill_random(sim, seed): random stimulus (stimulus.py)
- quantize(x, df): round an array to a Buda data format
- SimulatorError
See docs/simulator.md for the models.
"""
from .errors import SimulatorError
from .executor import SUPPORTED_OP_TYPES, Simulator
from .formats import fidelity_product, quantize
from .stimulus import fill_random, run_random
from .timing import EpochPerf, OpPerf, PerfReport, TensorInfo, estimate

__all__ = [
    "Simulator", "SimulatorError", "estimate", "PerfReport", "EpochPerf", "OpPerf", "TensorInfo", "quantize",
    "fidelity_product", "SUPPORTED_OP_TYPES", "run_random", "fill_random",
]
