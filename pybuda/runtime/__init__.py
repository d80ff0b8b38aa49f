"""The runtime: runs a compiled model from its netlist, run manifest and arrays alone, and saves / loads it as
one TTI image file.

    model = pybuda.load("model.tti")      # a RuntimeModel: no framework model, no recompiling
    outputs = model(*inputs)              # simulated; bit-identical to the compiled model's outputs
    model.netlist, model.netlists, model.perf, model.input_names, model.input_shapes
"""
from .executor import check_manifest, run
from .inputs import InputError
from .model import RuntimeModel
from .tti import TTI_VERSION, TTIError, load, read_tti, save_tti

__all__ = ["RuntimeModel", "load", "save_tti", "read_tti", "TTIError", "TTI_VERSION", "run", "check_manifest",
           "InputError"]
