"""Host programs (CPU fallback ops) evaluated on the CPU with the op registry's numpy semantics."""
from __future__ import annotations

import numpy as np

from ..arch.tms import apply_tms
from ..codegen.manifest import HostOperand, HostProgram
from ..ops import registry


def run_host(host: HostProgram, arrays: dict[str, np.ndarray], sample: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The values a host program writes for one sample (or, of an optimizer program, for the step)."""
    values = {name: sample[name] for name in host.inputs}
    values.update({name: arrays[array] for name, array in host.arrays.items()})
    for op in host.ops:
        values[op.name] = registry.evaluate(op.op_type, [_value(values, o) for o in op.operands], op.attrs)
    return {name: _value(values, operand) for name, operand in host.outputs.items()}


def _value(values: dict[str, np.ndarray], operand: HostOperand) -> np.ndarray:
    return apply_tms(values[operand.src], list(operand.tms)) if operand.tms else values[operand.src]
