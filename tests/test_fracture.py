"""Fracture groups (`insert_fracture_group`, stage `fracture`): a chain of ops split along a dim runs as pieces
that read each other directly with one gather at the end, a matmul split by rows reads slices of its activation,
the simulated outputs match PyTorch, and a group that cannot apply says why before anything is compiled."""
from __future__ import annotations

import pytest
import torch

import pybuda
from pybuda.errors import UserInputError
from pybuda.passes.fracture import FractureError
from pybuda.verify import pcc


class _Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(128, 256), torch.nn.Linear(256, 128)

    def forward(self, x):
        return self.b(torch.relu(self.a(x)))


def _compile(tmp_path, x=None):
    torch.manual_seed(0)
    model = _Mlp().eval()
    x = torch.randn(32, 128) if x is None else x
    compiled = pybuda.compile(model, x, device="e150", output_dir=tmp_path, verify=True)
    assert pcc(compiled(x).numpy(), model(x).detach().numpy()) >= 0.99
    return {name: op for g in compiled.netlist.graphs.values() for name, op in g.ops.items()}


def test_a_fractured_chain_reads_its_own_pieces_and_gathers_once(tmp_path):
    pybuda.config.insert_fracture_group([("matmul_1", -1, 2), "add_2", "relu_3"])   # bare names: the same split
    ops = _compile(tmp_path)
    assert {"matmul_1.fracture_0", "matmul_1.fracture_1"} <= set(ops) and "matmul_1" not in ops
    for i in range(2):       # bias add and relu fused into one op per piece, reading that piece's matmul
        (piece,) = [op for op in ops.values() if op.type == "fused_op" and f"matmul_1.fracture_{i}" in op.inputs]
        assert not any(f"matmul_1.fracture_{1 - i}" in op for op in piece.inputs)
    # the weight's column slices are folded into two parameters (no slicing op on the device); one gather
    assert not any(".in1" in name for name in ops)
    assert sum(name.startswith("relu_3.gather") for name in ops) >= 1


def test_a_matmul_fractured_by_rows_reads_row_slices(tmp_path):
    pybuda.config.insert_fracture_group([("matmul_8", -2, 2)])      # (64, 256) @ (256, 128) per sample
    ops = _compile(tmp_path, torch.randn(4, 64, 128))
    pieces = [ops[f"matmul_8.fracture_{i}"] for i in range(2)]
    assert all(p.grid_size[0] * p.mblock[0] * p.ublock[0] == 1 for p in pieces)     # 32 of 64 rows: one tile


@pytest.mark.parametrize("nodes, message", [
    ([("matmul_9", -1, 2)], "no op named 'matmul_9' in the decomposed graph; closest: "),
    ([("matmul_1", -1, 3)], "is 256 long, not a multiple of factor 3"),
    (["add_2"], "no dim and factor given, and no op of its group gives one"),
    ([("matmul_1", [-1, -2], [2, 2])], "fractures along one dim per op here"),
])
def test_a_group_that_cannot_apply_names_the_op_and_what_is_legal(tmp_path, nodes, message):
    pybuda.config.insert_fracture_group(nodes)
    with pytest.raises(FractureError, match=message.replace("(", r"\(").replace(")", r"\)")):
        pybuda.compile(_Mlp().eval(), torch.randn(32, 128), device="e150", output_dir=tmp_path)


def test_an_op_that_cannot_be_fractured_is_refused(tmp_path):
    class Softmax(torch.nn.Module):
        def forward(self, x):
            return torch.softmax(x * 2.0, dim=-1)

    graph = pybuda.compile(Softmax(), torch.randn(32, 64), device="e150", output_dir=tmp_path,
                           config=pybuda.CompilerConfig(compile_depth="fracture")).graphs["fracture"]
    reducer = next(n.name for n in graph.nodes("op") if n.op_type.startswith("reduce"))
    pybuda.config.insert_fracture_group([(reducer, -2, 2)])
    with pytest.raises(FractureError, match=f"insert_fracture_group\\('{reducer}'\\): a reduce_\\w+ \\(reduce\\) "
                                            "cannot be fractured"):
        pybuda.compile(Softmax(), torch.randn(32, 64), device="e150", output_dir=tmp_path / "2")


def test_chip_ids_are_refused_when_the_group_is_made():
    with pytest.raises(UserInputError, match="cannot be placed on chips of their own here"):
        pybuda.config.insert_fracture_group([("matmul_1", -1, 2)], chip_ids=[0, 1])
    assert pybuda.config._get_global_compiler_config().fracture_groups == []
