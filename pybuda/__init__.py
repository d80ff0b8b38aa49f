"""pybuda: compile PyTorch models for Tenstorrent Grayskull and Wormhole chips without a card.

    compiled = pybuda.compile(model, *sample_inputs, device="e150")
    outputs = compiled(*inputs)          # runs the netlist(s) in the backend simulator, fallback ops on the host
    compiled.netlist_path, compiled.perf.samples_per_second
    compiled.save("model.tti"); model = pybuda.load("model.tti")   # runs anywhere, without the framework model
"""
from . import op, query
from .compile import CompiledModel, VerificationError, compile
from .config import (CompileDepth, CompilerConfig, DeviceMode, IneffectiveOptionWarning, OpOverride,
                     PlacerOpOverride, add_schedule_constraint, configure_mixed_precision, insert_buffering_nop,
                     insert_fracture_group, insert_nop, override_dram_parameters, override_input_buffer_multiplier,
                     override_multi_op_fracture_factor, override_op_placement, override_op_size,
                     override_t_stream_dir, override_t_stream_shape, override_u_kt, reset_configuration,
                     set_chip_break, set_configuration_options, set_epoch_break)
from .dataformat import DataFormat, MathFidelity
from .errors import InternalError, PyBudaError, UsageError, UserInputError, UserTypeError
from .files import OutputDirError
from .frontend.microbatch import MicrobatchError
from .module import Parameter, PyBudaModule, PyTorchModule, Tensor
from .runtime import InputError, RuntimeModel, TTIError, load
from .tools.verify_module import TestKind, VerifyConfig, verify_module
from . import verify as _verify

# the legacy spelling `from pybuda.verify import verify_module, VerifyConfig, TestKind`: the harness compiles, so it
# lives above the compiler (pybuda.tools), and pybuda.verify (below the compiler) is given its names here
_verify.verify_module, _verify.VerifyConfig, _verify.TestKind = verify_module, VerifyConfig, TestKind

__all__ = [
    "PyBudaError", "UserInputError", "UserTypeError", "UsageError", "InternalError",
    "compile", "CompiledModel", "VerificationError", "MicrobatchError", "InputError", "OutputDirError",
    "IneffectiveOptionWarning", "load", "RuntimeModel", "TTIError", "op", "query", "PyBudaModule",
    "Parameter", "Tensor", "PyTorchModule",
    "CompilerConfig", "CompileDepth", "DeviceMode", "OpOverride", "PlacerOpOverride", "DataFormat", "MathFidelity",
    "set_configuration_options", "reset_configuration", "override_op_size", "override_t_stream_shape",
    "override_t_stream_dir", "override_op_placement", "override_u_kt", "override_input_buffer_multiplier",
    "override_dram_parameters", "override_multi_op_fracture_factor", "set_epoch_break", "set_chip_break",
    "insert_buffering_nop", "insert_nop", "add_schedule_constraint", "configure_mixed_precision",
    "insert_fracture_group", "verify_module", "VerifyConfig", "TestKind",
]
