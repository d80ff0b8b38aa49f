"""End-to-end: models compile, netlists are sound, simulated outputs match PyTorch, overrides take effect."""
from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import yaml

import pybuda
from pybuda.balancer import BalancerError
from pybuda.config import CompileDepth, OverrideError
from pybuda.netlist import NetlistError, check, load, validate
from pybuda.stages import STAGES
from pybuda.tools.models import MNISTCNN
from pybuda.verify import pcc

from models import MLP, Attention, torch_attention, torch_mlp

FLOAT32 = {"default_df_override": "Float32"}


def _compile(model, *inputs, tmp_path, device="e150", **options):
    return pybuda.compile(model, *inputs, device=device, config=pybuda.CompilerConfig(**options),
                          output_dir=tmp_path)


@pytest.mark.parametrize("options, threshold", [({}, 0.99), (FLOAT32, 0.999)], ids=["Float16_b", "Float32"])
@pytest.mark.parametrize("device", ["e150", "n150"])
def test_mlp_matches_torch(tmp_path, options, threshold, device):
    model, x = MLP(), torch.randn(4, 16, 64)
    compiled = _compile(model, x, tmp_path=tmp_path, device=device, **options)
    out = compiled(x)
    expected = torch_mlp(model, x)
    assert out.shape == expected.shape
    assert pcc(out.numpy(), expected.numpy()) >= threshold
    assert np.allclose(out.numpy(), expected.numpy(), atol=0.02 if not options else 0.005)


@pytest.mark.parametrize("options, threshold", [({}, 0.99), (FLOAT32, 0.999)], ids=["Float16_b", "Float32"])
def test_attention_matches_torch(tmp_path, options, threshold):
    # sequence 40 is not tile-aligned: padding must be masked in softmax and in probs @ v
    model, x = Attention(), torch.randn(2, 40, 64)
    compiled = _compile(model, x, tmp_path=tmp_path, **options)
    out, expected = compiled(x), torch_attention(model, x)
    assert pcc(out.numpy(), expected.numpy()) >= threshold
    tms = [tm for op in compiled.netlist.ops.values() for v in op.input_tms.values() for tm in v]
    assert ("hslice", 2) in tms and ("transpose",) in tms and ("hstack", 2) in tms


@pytest.fixture(scope="module")
def mnist_runs(tmp_path_factory):
    torch.manual_seed(0)
    model = MNISTCNN().eval()
    x = torch.randn(8, 1, 28, 28)
    with torch.no_grad():
        expected = model(x).numpy()
    runs = {}
    for label, options in (("Float16_b", {}), ("Float32", FLOAT32)):
        compiled = pybuda.compile(model, x, device="e150", config=pybuda.CompilerConfig(**options),
                                  output_dir=tmp_path_factory.mktemp(label))
        runs[label] = (compiled, compiled(x).numpy())
    return expected, runs


@pytest.mark.parametrize("label, threshold", [("Float16_b", 0.99), ("Float32", 0.999)])
def test_mnist_matches_torch(mnist_runs, label, threshold):
    expected, runs = mnist_runs
    compiled, out = runs[label]
    assert out.shape == expected.shape == (8, 10)
    assert pcc(out, expected) >= threshold
    assert (out.argmax(-1) == expected.argmax(-1)).mean() >= 0.75


def test_mnist_netlist_is_sound_and_reports_perf(mnist_runs):
    compiled, _ = mnist_runs[1]["Float16_b"]
    netlist = yaml.safe_load(compiled.netlist_path.read_text())
    assert check(compiled.netlist, device="e150") == []
    assert set(netlist) == {"devices", "queues", "graphs", "programs", "fused_ops"}
    assert load(compiled.netlist_path) == compiled.netlist
    assert compiled.perf.samples_per_second > 0
    assert len(compiled.perf.epochs) == len(netlist["graphs"])
    assert all(e.cores > 0 for e in compiled.perf.epochs)
    assert list(compiled.stage_times) == [s.name for s in STAGES]
    # parameters keep the model's names
    assert {"conv1.weight", "conv2.weight", "fc1.weight", "fc2.weight"} <= set(netlist["queues"])


def test_structure_check_detects_violations():
    """The validator compile runs reports broken netlists, naming each rule (it is not a check that cannot fail)."""
    model, x = MLP(), torch.randn(2, 16, 64)
    compiled = pybuda.compile(model, x, output_dir=None)
    netlist = load(compiled.netlist_path)
    graph = next(iter(netlist.graphs.values()))
    ops = list(graph.ops.values())
    ops[1].grid_loc = ops[0].grid_loc                                  # two ops on one core
    ops[0].ublock = (4, 4)                                             # 16 tiles > dest limit
    dram = [q for q in netlist.queues.values() if q.loc == "dram"]
    dram[1].dram = [[ch, addr + 32] for ch, addr in dram[0].dram]      # overlapping, not aliased
    with pytest.raises(NetlistError) as err:
        validate(netlist, device="e150")
    rules = err.value.rules
    assert {"grid.overlap", "dest.ublock_limit", "queue.dram_overlap"} <= rules
    assert any(r.startswith("shape.") for r in rules)  # the ublock change also breaks producer/consumer shapes
    assert all(e.file == str(compiled.netlist_path) and e.line > 0 for e in err.value.errors)
    assert "grid.overlap" in str(err.value) and ops[1].name in str(err.value)


def test_override_op_size_changes_grid(tmp_path):
    model, x = MLP(), torch.randn(2, 64, 64)
    pybuda.override_op_size("mm1", (2, 2))
    compiled = pybuda.compile(model, x, output_dir=tmp_path)
    graph = next(iter(compiled.netlist.graphs.values()))
    assert graph.ops["mm1"].grid_size == (2, 2)


@pytest.mark.parametrize("grid, reason", [((11, 1), "fit"), ((3, 1), "divide")])
def test_impossible_op_size_names_op_and_legal_grids(tmp_path, grid, reason):
    model, x = MLP(), torch.randn(2, 64, 64)
    pybuda.override_op_size("mm1", grid)
    with pytest.raises(BalancerError) as err:
        pybuda.compile(model, x, output_dir=tmp_path)
    msg = str(err.value)
    assert "'mm1'" in msg and f"{grid}" in msg and "legal grids: 1x1, 1x2" in msg and reason in msg


def test_set_epoch_break_adds_a_graph(tmp_path):
    model, x = MLP(), torch.randn(2, 16, 64)
    base = pybuda.compile(model, x, output_dir=tmp_path / "a")
    pybuda.set_epoch_break("mm2")
    broken = pybuda.compile(model, x, output_dir=tmp_path / "b")
    assert len(broken.netlist.graphs) == len(base.netlist.graphs) + 1
    second = list(broken.netlist.graphs.values())[1]
    assert "mm2" in second.ops
    e2e = [n for n in broken.netlist.queues if n.startswith("e2e_")]
    assert e2e and second.ops["mm2"].inputs[0] in e2e
    assert np.allclose(broken(x).numpy(), base(x).numpy(), atol=1e-6)


def test_override_op_placement_start_and_transpose(tmp_path):
    model, x = MLP(), torch.randn(2, 64, 64)
    pybuda.override_op_size("mm1", (2, 1))
    pybuda.override_op_placement("mm1", start=(3, 5), transpose_op=True)
    compiled = pybuda.compile(model, x, output_dir=tmp_path)
    op = next(iter(compiled.netlist.graphs.values())).ops["mm1"]
    assert op.grid_loc == (3, 5) and op.grid_size == (2, 1) and op.grid_transpose is True


def test_override_naming_unknown_op_suggests_close_names(tmp_path):
    pybuda.override_op_size("mm_1", (1, 1))
    with pytest.raises(OverrideError) as err:
        pybuda.compile(MLP(), torch.randn(2, 16, 64), output_dir=tmp_path)
    assert "mm_1" in str(err.value) and "mm1" in str(err.value)


@pytest.mark.parametrize("depth, graphs", [
    (CompileDepth.OPTIMIZED_GRAPH, ["initial_graph", "decompose", "fracture", "optimize"]),
    ("optimize", ["initial_graph", "decompose", "fracture", "optimize"]),
    ("lower", ["initial_graph", "decompose", "fracture", "optimize", "autograd", "cpu_fallback", "host_io", "lower"]),
    ("balance", ["initial_graph", "decompose", "fracture", "optimize", "autograd", "cpu_fallback", "host_io", "lower",
                 "data_formats",
                 "fuse", "save_intermediates", "insert_nops"]),
])
def test_compile_depth_stops_and_keeps_stage_graphs(tmp_path, depth, graphs):
    compiled = pybuda.compile(MLP(), torch.randn(2, 16, 64), output_dir=tmp_path,
                              config=pybuda.CompilerConfig(compile_depth=depth))
    assert list(compiled.graphs) == graphs
    assert (compiled.placement is not None) == (depth == "balance")
    assert compiled.netlist_path is None and compiled.netlist is None and not list(tmp_path.iterdir())
    with pytest.raises(RuntimeError, match="compile_depth"):
        compiled(torch.randn(2, 16, 64))


def test_verify_passes_every_stage(tmp_path):
    compiled = pybuda.compile(Attention(), torch.randn(2, 40, 64), output_dir=tmp_path, verify=True)
    assert [c.stage for c in compiled.checks] == [s.name for s in STAGES if s.produces_graph] + ["netlist"]
    assert all(c.pcc > 0.9999 for c in compiled.checks[:-1])
    assert compiled.checks[-1].data_format == "Float16_b" and compiled.checks[-1].pcc >= compiled.checks[-1].threshold


def test_wrong_microbatch_is_a_clear_error(tmp_path):
    compiled = pybuda.compile(MLP(), torch.randn(2, 16, 64), output_dir=tmp_path)
    with pytest.raises(pybuda.InputError, match="microbatch: it must be 2"):
        compiled(torch.randn(3, 16, 64))


def test_unknown_device_lists_devices():
    with pytest.raises(ValueError, match="e75, e150, n150, n300"):
        pybuda.compile(MLP(), torch.randn(2, 16, 64), device="e300")


_DETERMINISM_SCRIPT = """
import sys, torch, pybuda
sys.path.insert(0, {tests!r})
from models import Attention
torch.manual_seed(0)
pybuda.compile(Attention(), torch.randn(2, 40, 64), output_dir={out!r})
"""


def test_netlists_are_byte_identical_across_hash_seeds(tmp_path):
    outputs = []
    for seed in ("1", "12345"):
        out = tmp_path / seed
        script = _DETERMINISM_SCRIPT.format(tests=os.path.dirname(__file__), out=str(out))
        env = dict(os.environ, PYTHONHASHSEED=seed)
        subprocess.run([sys.executable, "-c", script], check=True, env=env, timeout=300)
        (netlist,) = out.glob("attn_*_netlist.yaml")
        outputs.append((netlist.name, netlist.read_bytes()))
    assert outputs[0] == outputs[1]


def test_harvested_rows_shrink_the_grid(tmp_path):
    """Harvested rows leave the netlist's logical grid: with 8 of e150's 10 worker rows harvested no op is
    placed below row 2 and none is wider than the rows left; an op that needs more rows names the limit."""
    model, x = MLP(), torch.randn(2, 64, 64)
    full = _compile(model, x, tmp_path=tmp_path / "full", enable_auto_fusing=False)   # more ops than two rows hold
    assert max(op.grid_loc[0] + op.grid_size[0] for g in full.netlist.graphs.values() for op in g.ops.values()) > 2
    pybuda.set_configuration_options(harvested_rows=[1, 2, 3, 4, 5, 7, 8, 9], enable_auto_fusing=False)
    harvested = pybuda.compile(model, x, output_dir=tmp_path / "harvested")
    ops = [op for g in harvested.netlist.graphs.values() for op in g.ops.values()]
    assert max(op.grid_loc[0] + (op.grid_size[1] if op.grid_transpose else op.grid_size[0]) for op in ops) <= 2
    np.testing.assert_allclose(harvested(x)[0].numpy(), full(x)[0].numpy())
    pybuda.override_op_size("mm1", (4, 1))
    with pytest.raises(BalancerError, match="'mm1'"):
        pybuda.compile(model, x, output_dir=tmp_path / "too_tall")


def test_harvesting_every_row_is_refused(tmp_path):
    pybuda.set_configuration_options(harvested_rows=[1, 2, 3, 4, 5, 7, 8, 9, 10, 11])
    with pytest.raises(ValueError, match="harvests 10 rows; device e150 has 10 worker rows, so at most 9"):
        pybuda.compile(MLP(), torch.randn(2, 64, 64), output_dir=tmp_path)


def test_device_config_chooses_the_device_of_a_compile_without_device(tmp_path):
    model, x = MLP(), torch.randn(2, 16, 64)
    pybuda.set_configuration_options(device_config="wh_n150")
    assert pybuda.compile(model, x, output_dir=tmp_path / "a").netlist.arch == "wormhole_b0"
    assert pybuda.compile(model, x, device="n150", output_dir=tmp_path / "b").netlist.arch == "wormhole_b0"
    with pytest.raises(pybuda.UserInputError, match="device='e150'.*device_config='wh_n150' names n150"):
        pybuda.compile(model, x, device="e150", output_dir=tmp_path / "c")


def _soc_descriptor(path, spec, rows=None, **changes) -> str:
    """A legacy SoC descriptor of `spec`'s chip with worker rows `rows` (NoC y; default all) and `changes`."""
    rows = spec.noc_worker_y if rows is None else rows
    data = {"grid": {"x_size": spec.noc_size[0], "y_size": spec.noc_size[1]},
            "functional_workers": [f"{x}-{y}" for y in rows for x in spec.noc_worker_x],
            "dram": [[f"{x}-{y}"] for x, y in spec.noc_dram], "worker_l1_size": spec.l1_size,
            "arch_name": spec.arch.upper(), **changes}
    path.write_text(yaml.safe_dump(data))
    return str(path)


def test_a_soc_descriptor_with_harvested_rows_shrinks_the_grid(tmp_path):
    """`backend_device_descriptor_path`: the worker rows a descriptor lists are the grid; the whole chip's
    descriptor compiles as without one; one of another chip or with holes fails naming the field."""
    from pybuda.device import get_device
    spec, model, x = get_device("e150"), MLP(), torch.randn(2, 64, 64)
    plain = _compile(model, x, tmp_path=tmp_path / "plain", enable_auto_fusing=False)
    whole = _compile(model, x, tmp_path=tmp_path / "whole", enable_auto_fusing=False,
                     backend_device_descriptor_path=_soc_descriptor(tmp_path / "whole.yaml", spec))
    assert whole.netlist_path.read_text() == plain.netlist_path.read_text()
    two_rows = _soc_descriptor(tmp_path / "two.yaml", spec, rows=(10, 11))
    harvested = _compile(model, x, tmp_path=tmp_path / "two", enable_auto_fusing=False,
                         backend_device_descriptor_path=two_rows)
    ops = [op for g in harvested.netlist.graphs.values() for op in g.ops.values()]
    assert max(op.grid_loc[0] + (op.grid_size[1] if op.grid_transpose else op.grid_size[0]) for op in ops) <= 2
    np.testing.assert_allclose(harvested(x)[0].numpy(), plain(x)[0].numpy())
    for changes, message in (({"arch_name": "WORMHOLE_B0"}, r"arch_name wormhole_b0, device e150 has grayskull"),
                             ({"worker_l1_size": 1 << 21}, r"worker_l1_size 2097152, device e150 has 1048576"),
                             ({"functional_workers": [f"{x}-{y}" for y in spec.noc_worker_y for x in spec.noc_worker_x
                                                      if (x, y) != (3, 4)]}, r"functional_workers lack 3-4: a row"),
                             ({"grid": {"x_size": 13}}, r"malformed grid")):
        with pytest.raises(pybuda.UserInputError, match=message):
            _compile(model, x, tmp_path=tmp_path / "bad", backend_device_descriptor_path=_soc_descriptor(
                tmp_path / "bad.yaml", spec, **changes))
    with pytest.raises(pybuda.UserInputError, match=r"missing.yaml.*cannot be read"):
        _compile(model, x, tmp_path=tmp_path / "bad", backend_device_descriptor_path=str(tmp_path / "missing.yaml"))


class _TwoBranches(torch.nn.Module):
    """Two disjoint subgraphs: x -> relu(a(x)), y -> sigmoid(b(y))."""

    def __init__(self):
        super().__init__()
        self.a, self.b = torch.nn.Linear(64, 64), torch.nn.Linear(64, 32)

    def forward(self, x, y):
        return torch.relu(self.a(x)), torch.sigmoid(self.b(y))


def test_compile_subgraphs_gives_each_disjoint_subgraph_a_program(tmp_path):
    model, x, y = _TwoBranches().eval(), torch.randn(2, 32, 64), torch.randn(2, 32, 64)
    one = pybuda.compile(model, x, y, output_dir=tmp_path / "one")
    two = pybuda.compile(model, x, y, output_dir=tmp_path / "two", verify=True,
                         config=pybuda.CompilerConfig(compile_subgraphs=True))
    assert [p.name for p in one.netlist.programs] == ["run_fwd_0"]
    assert [p.name for p in two.netlist.programs] == ["run_fwd_0", "run_fwd_1"]
    graphs = [{i.graph_name for i in p.instructions if hasattr(i, "graph_name")} for p in two.netlist.programs]
    assert graphs[0] and graphs[1] and not graphs[0] & graphs[1]                 # each its own epochs
    def reads(names: set, queue: str) -> bool:
        return any(queue in op.inputs for g in names for op in two.netlist.graphs[g].ops.values())
    assert reads(graphs[0], "x") and not reads(graphs[0], "y") and reads(graphs[1], "y") and not reads(graphs[1], "x")
    with torch.no_grad():
        expected = model(x, y)
    for got, want in zip(two(x, y), expected):
        assert pcc(got.numpy(), want.numpy()) >= 0.99
    assert len(two.perf.parts) == 2 and two.perf.total_cycles == sum(p.total_cycles for p in two.perf.parts)
