"""Constant sparse matrices (convolution and pooling pickers) and their identity-matmul encoding."""
from .encoding import CoreFigures, SparseOperands, busiest_core_figures, encode, encoding_fits, sparse_operands, unique_tiles
from .matrix import TILE, SparseMatrix

__all__ = ["CoreFigures", "SparseMatrix", "busiest_core_figures", "SparseOperands", "TILE", "encode", "encoding_fits", "sparse_operands", "unique_tiles"]
