"""A constant sparse matrix (coordinate form) for sparse matmuls: convolution and pooling pickers too large to
hold densely. Entries are kept sorted by (row, column), so equal matrices compare equal and hash alike."""
from __future__ import annotations

import dataclasses

import numpy as np
import torch

from ..errors import UserInputError

TILE = 32


@dataclasses.dataclass(frozen=True, eq=False)
class SparseMatrix:
    """An (M, K) matrix with non-zeros `values` at (`rows`, `cols`), sorted by (row, column), no duplicates."""

    shape: tuple
    rows: np.ndarray
    cols: np.ndarray
    values: np.ndarray

    @classmethod
    def from_coo(cls, shape: tuple, rows, cols, values=None) -> "SparseMatrix":
        """From coordinates (duplicates add up; explicit zeros are dropped)."""
        rows = np.asarray(rows, dtype=np.int64).ravel()
        cols = np.asarray(cols, dtype=np.int64).ravel()
        values = np.ones(rows.shape, np.float32) if values is None else np.asarray(values, np.float32).ravel()
        m, k = (int(d) for d in shape)
        if rows.size and (rows.min() < 0 or rows.max() >= m or cols.min() < 0 or cols.max() >= k):
            raise UserInputError(f"sparse matrix entries outside its shape {(m, k)}")
        key = rows * k + cols
        order = np.argsort(key, kind="stable")
        key, values = key[order], values[order]
        unique, start = np.unique(key, return_index=True)
        summed = np.add.reduceat(values, start) if values.size else values
        keep = summed != 0
        return cls((m, k), unique[keep] // k, unique[keep] % k, summed[keep].astype(np.float32))

    @property
    def nnz(self) -> int:
        return int(self.values.size)

    def __eq__(self, other) -> bool:
        return (isinstance(other, SparseMatrix) and self.shape == other.shape and np.array_equal(self.rows, other.rows)
                and np.array_equal(self.cols, other.cols) and np.array_equal(self.values, other.values))

    def __hash__(self) -> int:
        return hash((self.shape, self.nnz, self.rows[:8].tobytes(), self.cols[:8].tobytes()))

    def __repr__(self) -> str:
        return f"SparseMatrix(shape={self.shape}, nnz={self.nnz})"

    def resized(self, shape: tuple) -> "SparseMatrix":
        """The same entries in a larger (zero-padded) shape."""
        if shape[0] < self.shape[0] or shape[1] < self.shape[1]:
            raise UserInputError(f"cannot shrink a sparse matrix {self.shape} to {shape}")
        return SparseMatrix(tuple(int(d) for d in shape), self.rows, self.cols, self.values)

    def transposed(self) -> "SparseMatrix":
        """The (K, M) transpose (a sparse matmul's gradient with respect to its dense operand)."""
        return SparseMatrix.from_coo(self.shape[::-1], self.cols, self.rows, self.values)

    def row_block(self, start: int, stop: int) -> "SparseMatrix":
        """Rows [start, stop) as an (stop - start, K) matrix."""
        lo, hi = np.searchsorted(self.rows, [start, stop])
        return SparseMatrix((stop - start, self.shape[1]), self.rows[lo:hi] - start, self.cols[lo:hi],
                            self.values[lo:hi])

    def toarray(self) -> np.ndarray:
        out = np.zeros(self.shape, dtype=np.float32)
        out[self.rows, self.cols] = self.values
        return out

    def matmul(self, x: np.ndarray) -> np.ndarray:
        """self @ x over the last two dims of x (any leading dims), in float32."""
        x = np.asarray(x, dtype=np.float32)
        if x.shape[-2] != self.shape[1]:
            raise UserInputError(f"sparse matmul: inner dimensions differ: {self.shape} @ {x.shape}")
        lead, n = x.shape[:-2], x.shape[-1]
        flat = torch.from_numpy(np.ascontiguousarray(np.moveaxis(x, -2, 0)).reshape(self.shape[1], -1))
        index = torch.from_numpy(np.stack([self.rows, self.cols]))
        s = torch.sparse_coo_tensor(index, torch.from_numpy(self.values), self.shape, is_coalesced=True,
                                    check_invariants=False)
        out = torch.sparse.mm(s, flat).numpy().reshape(self.shape[0], *lead, n)
        return np.moveaxis(out, 0, -2)

    def tile_rows(self) -> np.ndarray:
        """For each tile row (32 matrix rows), the number of non-zero 32x32 tiles."""
        rt = -(-self.shape[0] // TILE)
        tiles = np.unique((self.rows // TILE) * (-(-self.shape[1] // TILE)) + self.cols // TILE)
        return np.bincount(tiles // (-(-self.shape[1] // TILE)), minlength=rt)

    def tiles(self, row_start: int = 0, row_stop: int | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The non-zero 32x32 tiles of tile rows [row_start, row_stop): (tile row - row_start, tile column,
        contents (n, 32, 32)), sorted by (tile row, tile column)."""
        kt = -(-self.shape[1] // TILE)
        row_stop = -(-self.shape[0] // TILE) if row_stop is None else row_stop
        lo, hi = np.searchsorted(self.rows, [row_start * TILE, row_stop * TILE])
        r, c, v = self.rows[lo:hi], self.cols[lo:hi], self.values[lo:hi]
        tile_id = (r // TILE - row_start) * kt + c // TILE
        ids, inverse = np.unique(tile_id, return_inverse=True)
        contents = np.zeros((ids.size, TILE, TILE), dtype=np.float32)
        contents[inverse, r % TILE, c % TILE] = v
        return ids // kt, ids % kt, contents
