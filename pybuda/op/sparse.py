"""SparseMatmul of `pybuda.op` with the legacy signature (tenstorrent/tt-buda `op/matmul.py`): a constant sparse
matrix times a dense operand, the registry's `sparse_matmul` (on device the backend's identity matmul)."""
from __future__ import annotations

import numpy as np
import torch

from ..errors import UserInputError, UserTypeError
from ..module import Constant, Parameter, Tensor, to_numpy, traced_op as _op
from ..sparse import SparseMatrix
from .eltwise import part


def sparse_matrix(name: str, sparseA) -> SparseMatrix:
    """`sparseA` as a SparseMatrix: a torch sparse COO (or dense) tensor, a Constant or a frozen Parameter holding
    one, of shape (M, K) or with leading dims of 1, or a SparseMatrix."""
    if isinstance(sparseA, SparseMatrix):
        return sparseA
    if isinstance(sparseA, Parameter) and sparseA.requires_grad:
        raise UserInputError(f"SparseMatmul {name!r}: sparseA is a trained Parameter; legal: a constant matrix (a "
                             "torch sparse tensor, a Constant, or a Parameter with requires_grad=False)")
    value = sparseA.numpy() if isinstance(sparseA, Parameter) else sparseA.value if isinstance(sparseA, Constant) \
        else sparseA
    if not isinstance(value, (torch.Tensor, np.ndarray)):
        raise UserTypeError(f"SparseMatmul {name!r}: sparseA of type {type(sparseA).__name__}; legal: a torch sparse "
                            "tensor, a Constant or a Parameter with requires_grad=False")
    shape = tuple(value.shape)
    if len(shape) < 2 or any(d != 1 for d in shape[:-2]):
        raise UserInputError(f"SparseMatmul {name!r}: sparseA of shape {shape}; legal: one (M, K) matrix (leading "
                             "dims of 1), not a stack of them")
    if isinstance(value, torch.Tensor) and value.layout == torch.sparse_coo and value.dense_dim() == 0:
        coo = value.coalesce()
        rows, cols = coo.indices()[-2:].numpy()
        return SparseMatrix.from_coo(shape[-2:], rows, cols, to_numpy(coo.values()))
    dense = to_numpy(value).reshape(shape[-2:])
    rows, cols = np.nonzero(dense)
    return SparseMatrix.from_coo(shape[-2:], rows, cols, dense[rows, cols])


def SparseMatmul(name: str, sparseA, denseB) -> Tensor:
    """sparseA @ denseB for a constant sparse matrix sparseA (M, K) and denseB (..., K, N), one (K, N) matrix per
    sample on device."""
    matrix = sparse_matrix(name, sparseA)
    if isinstance(denseB, Tensor) and any(d != 1 for d in denseB.shape[:-2]):
        raise UserInputError(f"SparseMatmul {name!r}: denseB of shape {denseB.shape} (one sample) holds a batch of "
                             "matrices; legal: one (K, N) matrix per sample (dims before the last two of 1)")
    out = _op("sparse_matmul", name, [denseB], {"sparse": matrix})
    rank = len(getattr(sparseA, "shape", ()))
    if rank > len(out.shape):
        out = _op("reshape", part(name, "unsqueeze"), [out], {"shape": [*(1,) * (rank - len(out.shape)), *out.shape]})
    return out
