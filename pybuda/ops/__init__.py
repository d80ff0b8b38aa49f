"""The op registry (`registry`): importing this package registers every op definition."""
from . import eltwise, matmul, sparse_matmul, reduce, nn, tm, conv, logic, index, norm, pool, clip, pad  # noqa: F401
from . import resample, conv_variants, fused, volume  # noqa: F401
from . import quantize  # noqa: F401
from .registry import GROUPS, OpDef, OpError, add_op, belongs, evaluate, get, in_group, infer_shape, names

__all__ = ["GROUPS", "OpDef", "OpError", "add_op", "belongs", "evaluate", "get", "in_group", "infer_shape", "names"]
