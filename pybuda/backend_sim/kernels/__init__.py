"""Numeric op kernels of the backend simulator, one module per family, dispatched through `KERNELS`.

A kernel takes the op (a `pybuda.netlist.Op`, its attributes typed; a fused sub-op is given as one core's Op, see
fused.py) and its input arrays after TMs and input-format rounding, shaped (..., t, R, C) with any leading dims
(see common.py), and returns the value in the dest register (rounded to acc_df). The executor then applies
packer ReLU, tile-dim clearing and the out_df rounding.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from pybuda.netlist import Op

from .eltwise import BINARY_OPS, DATACOPY_OPS, SFPU_OPS, binary, datacopy, sfpu
from .embedding import embedding
from .matmul import depthwise
from .matmul import matmul as dense_matmul
from .reduce import reduce
from .sparse import sparse_matmul
from .splice import splice


def matmul(op: Op, ins: list[np.ndarray]) -> np.ndarray:
    if op.attrs.identity:
        return sparse_matmul(op, ins)
    return dense_matmul(op, ins)


KERNELS: dict[str, Callable[[Op, list], np.ndarray]] = {
    **{name: binary for name in BINARY_OPS},
    **{name: sfpu for name in SFPU_OPS},
    **{name: datacopy for name in DATACOPY_OPS},
    "matmul": matmul,
    "depthwise": depthwise,
    "reduce": reduce,
    "splice": splice,
    "embedding": embedding,
    # "fused_op" needs the netlist's fused_ops table: bound by the executor (kernels.fused.fused_op)
}

SUPPORTED_OP_TYPES = tuple(sorted(set(KERNELS) | {"fused_op"}))
# op types whose kernels return values rounded to acc_df (splice and embedding move values in their input formats)
ROUNDED_TO_ACC_DF = frozenset((*BINARY_OPS, *SFPU_OPS, *DATACOPY_OPS, "matmul", "depthwise", "reduce"))

__all__ = ["KERNELS", "ROUNDED_TO_ACC_DF", "SUPPORTED_OP_TYPES"]
