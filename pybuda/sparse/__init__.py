"""Constant sparse matrices (convolution and pooling pickers) and their identity-matmul encoding."""
from .encoding import SparseOperands, encode, encoding_fits, sparse_operands, unique_tiles
from .matrix import TILE, SparseMatrix

__all__ = ["SparseMatrix", "SparseOperands", "TILE", "encode", "encoding_fits", "sparse_operands", "unique_tiles"]
