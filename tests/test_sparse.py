"""Sparse matmul: the SparseMatrix type, its identity-matmul encoding (checked with the simulator's decoder),
and convolutions/pooling compiled with sparse pickers, simulated against PyTorch."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import pybuda
from pybuda.backend_sim.kernels.sparse import bits_for, decode
from pybuda.sparse import SparseMatrix, sparse_operands
from pybuda.verify import pcc


def _random_matrix(rng, m, k, n, values=None):
    rows, cols = rng.integers(0, m, n), rng.integers(0, k, n)
    return SparseMatrix.from_coo((m, k), rows, cols, rng.integers(1, 3, n) if values is None else values)


def test_sparse_matrix_matches_its_dense_form():
    rng = np.random.default_rng(0)
    rows, cols = [0, 2, 2, 5], [1, 3, 3, 0]
    s = SparseMatrix.from_coo((6, 4), rows, cols, [1.0, 2.0, 0.5, 0.0])
    dense = np.zeros((6, 4), np.float32)
    dense[0, 1], dense[2, 3] = 1.0, 2.5  # duplicates add up, explicit zeros are dropped
    assert np.array_equal(s.toarray(), dense) and s.nnz == 2
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    assert np.allclose(s.matmul(x), dense @ x, atol=1e-6)
    assert np.array_equal(s.row_block(2, 6).toarray(), dense[2:6])
    assert s == SparseMatrix.from_coo((6, 4), [2, 0], [3, 1], [2.5, 1.0]) and hash(s) == hash(s.resized((6, 4)))
    with pytest.raises(ValueError, match="outside its shape"):
        SparseMatrix.from_coo((2, 2), [2], [0])


@pytest.mark.parametrize("t, grid_rows, mblock_m, ublock_rt, u_kt", [
    (1, 1, 24, 1, 1), (1, 2, 4, 3, 2), (2, 4, 3, 1, 4), (3, 1, 4, 2, 5), (6, 2, 1, 2, 8)])
def test_encoding_decodes_to_the_matrix(t, grid_rows, mblock_m, ublock_rt, u_kt):
    """Every tile the encoder writes, decoded by the simulator's (independent) decoder, rebuilds the matrix."""
    rng = np.random.default_rng(t * 100 + grid_rows)
    m, k = 32 * 24, 32 * 40
    s = _random_matrix(rng, m, k, 2500)
    ops = sparse_operands(s, grid_rows, mblock_m, ublock_rt, u_kt, t)
    rebuilt = np.zeros((m, k), np.float32)
    rows_core = m // 32 // (t * grid_rows)
    for g in range(grid_rows):
        words = ops.encoding[0, g * 32:(g + 1) * 32].ravel()
        entries = decode(words, ptr_bits=ops.sparse_tile_ptr_bits, ublock_bits=ops.sparse_ublock_idx_bits,
                         u_kt=u_kt, d_bits=bits_for(u_kt), inner_r=ublock_rt, outer_r=mblock_m, t=t)
        assert len(entries) <= ops.nz_tiles_per_core
        tiles = ops.sparse_tiles[0, g * 32:(g + 1) * 32]
        for b, out_rt, act_rt, index in entries:
            row = (b * m // 32 // t + g * rows_core + out_rt) * 32
            rebuilt[row:row + 32, act_rt * 32:(act_rt + 1) * 32] += tiles[:, index * 32:(index + 1) * 32]
    assert np.array_equal(rebuilt, s.toarray())


def test_repeated_tiles_are_stored_once():
    eye = SparseMatrix.from_coo((32 * 8, 32 * 8), np.arange(256), np.arange(256))
    ops = sparse_operands(eye, 2, 4, 1, 1)
    assert ops.num_sparse_tiles == 1 and ops.nz_tiles_per_core == 4 and ops.sparse_tile_ptr_bits == 1


class SmallCNN(torch.nn.Module):
    """Strided, padded, depthwise and pooling windows on a 64x64 image."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 16, 3, stride=2, padding=1)
        self.pool = torch.nn.MaxPool2d(3, 2, 1)
        self.dw = torch.nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.head = torch.nn.Conv2d(16, 8, 3, padding=1)

    def forward(self, x):
        return self.head(torch.relu(self.dw(self.pool(torch.relu(self.stem(x))))))


def test_cnn_with_sparse_pickers_matches_torch(tmp_path):
    torch.manual_seed(0)
    model, x = SmallCNN().eval(), torch.randn(1, 3, 64, 64)
    config = pybuda.CompilerConfig(enable_conv_prestride=False)     # the stem's own (t-streamed) picker
    compiled = pybuda.compile(model, x, device="e150", output_dir=tmp_path, verify=True, config=config)
    ops = [op for g in compiled.netlist.graphs.values() for op in g.ops.values()]
    identity = [op for op in ops if op.attrs.identity]
    assert len(identity) >= 10  # stem, 9 pooling taps, depthwise and head pickers
    assert all(op.type == "matmul" and len(op.inputs) == 3 and op.in_df[2].value == "RawUInt32" for op in identity)
    assert any(op.attrs.act_t == 1 and op.t > 1 for op in identity)  # a t-streamed picker
    with torch.no_grad():
        expected = model(x).numpy()
    assert pcc(compiled(x).numpy(), expected) >= 0.999
    assert compiled.perf.samples_per_second > 0
