"""`pybuda.query` predicates (legacy NodePredicateBuilder) in the overrides that take op names."""
from __future__ import annotations

import types

import numpy as np
import pytest
import torch

import pybuda
from pybuda import query
from pybuda.config import OverrideError
from pybuda.errors import UserInputError, UserTypeError

from models import MLP


def _node(name: str, op_type: str, original: str | None = None, layer: str = ""):
    return types.SimpleNamespace(name=name, op_type=op_type, framework_op_type=original or op_type, kind="op",
                                 layer=layer)


def test_predicates_combine_and_match_whole_names_and_op_types():
    mm1, mm2, gelu = _node("mm1", "matmul"), _node("mm2", "matmul"), _node("gelu1", "gelu")
    nodes = [mm1, mm2, gelu]
    assert query.select(query.name_regex(r"mm\d"), nodes) == ["mm1", "mm2"]
    assert query.select(query.name_regex("mm"), nodes) == []                       # the whole name must match
    assert query.select(query.op_type("matmul") & query.name_regex(".*2"), nodes) == ["mm2"]
    assert query.select(query.op_type("gelu") | query.name_regex("mm1"), nodes) == ["mm1", "gelu1"]
    assert query.select(query.op_type("matmul").negate(), nodes) == ["gelu1"]
    assert query.select(query.op_type("nop"), [_node("n", "nop", original="buffer")]) == ["n"]
    assert query.select(query.op_type("buffer"), [_node("n", "nop", original="buffer")]) == ["n"]
    assert str(query.op_type("matmul") & query.name_regex("a").negate()) == \
        "(op_type('matmul') & name_regex('a').negate())"
    with pytest.raises(UserInputError, match="not a regular expression"):
        query.name_regex("mm(")
    layered = [_node("a", "add", layer="net.block0"), _node("b", "add", layer="net.block1"), _node("c", "add")]
    assert query.select(query.layer_regex(r"net\.block1"), layered) == ["b"]
    assert query.select(query.layer_regex(".*"), layered) == ["a", "b"]            # an op without a layer: none
    with pytest.raises(UserInputError, match="layer_regex.*not a regular expression"):
        query.layer_regex("encoder(")
    with pytest.raises(UserInputError, match="cannot combine"):
        query.op_type("matmul") & "mm1"


def test_a_predicate_epoch_break_and_placement_apply_to_every_op_it_matches(tmp_path):
    model, x = MLP(), torch.randn(2, 64, 64)
    base = pybuda.compile(model, x, output_dir=tmp_path / "a")
    pybuda.set_epoch_break(query.name_regex("mm2"))
    pybuda.override_op_placement(query.op_type("matmul"), transpose_op=True)
    compiled = pybuda.compile(model, x, output_dir=tmp_path / "b")
    graphs = list(compiled.netlist.graphs.values())
    assert len(graphs) == len(base.netlist.graphs) + 1 and "mm2" in graphs[1].ops
    assert graphs[0].ops["mm1"].grid_transpose is True and graphs[1].ops["mm2"].grid_transpose is True
    assert np.allclose(compiled(x).numpy(), base(x).numpy(), atol=1e-6)


def test_a_predicate_that_matches_nothing_is_named(tmp_path):
    pybuda.set_epoch_break(query.name_regex("conv.*"))
    with pytest.raises(OverrideError, match=r"set_epoch_break: name_regex\('conv\.\*'\) matches no op"):
        pybuda.compile(MLP(), torch.randn(2, 16, 64), output_dir=tmp_path)


class _Block(pybuda.PyBudaModule):
    def __init__(self, name: str):
        super().__init__(name)
        self.w = pybuda.Parameter(torch.randn(64, 64) / 8, requires_grad=False)

    def forward(self, x):
        return pybuda.op.Gelu("", pybuda.op.Matmul("", x, self.w))


class _Net(pybuda.PyBudaModule):
    def __init__(self):
        super().__init__("net")
        self.blocks = [_Block(f"block{k}") for k in range(3)]

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def test_layer_regex_names_the_ops_a_submodule_traced(tmp_path):
    """A PyBudaModule's ops carry its layer (the module names, outermost first) through decomposition and
    lowering: an epoch break at the second block's ops starts a new epoch there."""
    model, x = _Net(), torch.randn(1, 64, 64)
    pybuda.set_epoch_break(query.layer_regex(r"net\.block1") & query.op_type("matmul"))
    compiled = pybuda.compile(model, x, output_dir=tmp_path)
    first, second = list(compiled.netlist.graphs.values())
    layers = {n: compiled.graphs["lower"].node(n).layer for n in compiled.graphs["lower"].op_names()}
    assert {layers[n] for n in second.ops if n in layers} == {"net.block1", "net.block2"}
    assert "net.block0" in {layers[n] for n in first.ops if n in layers}
    pybuda.reset_configuration()
    pybuda.set_epoch_break(query.layer_regex("encoder.*"))
    with pytest.raises(OverrideError, match="no op has a layer"):
        pybuda.compile(torch.nn.Linear(64, 64), torch.randn(2, 16, 64), output_dir=tmp_path / "torch")


def test_override_helpers_say_a_predicate_is_legal():
    with pytest.raises(UserTypeError, match="pybuda.query predicate"):
        pybuda.set_epoch_break(3)
    with pytest.raises(UserTypeError, match="pybuda.query predicate"):
        pybuda.override_op_placement(["mm1"], transpose_op=True)


def test_fusion_overrides_take_legacy_regular_expressions(tmp_path):
    """dont_fuse / manual_fuse entries are op names or regular expressions over whole names; one that names no op
    (as a name or a pattern) is an override error."""
    cfg = pybuda.config._get_global_compiler_config()
    cfg.dont_fuse(r"bias\d|gelu.*")
    compiled = pybuda.compile(MLP(), torch.randn(2, 16, 64), output_dir=tmp_path / "a")
    ops = next(iter(compiled.netlist.graphs.values())).ops
    assert "bias1" in ops and "gelu1" in ops
    cfg.dont_fuse("no_such_op.*")
    with pytest.raises(OverrideError, match="no_such_op"):
        pybuda.compile(MLP(), torch.randn(2, 16, 64), output_dir=tmp_path / "b")
