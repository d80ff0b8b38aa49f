"""CPU fallback anywhere in the model: host segments before, between and after device segments (one netlist per
device segment), an all-host model, TTI round trips, the estimate over every device part, and error advice that
works when followed."""
from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from torch import nn

import pybuda
from pybuda.backend_sim.timing import estimate
from pybuda.ir import Graph
from pybuda.ops import add_op
from pybuda.passes.cpu_fallback import partition
from pybuda.verify import pcc

from models import CumsumMiddle

FLOAT32 = {"default_df_override": "Float32"}


class EmbedFirst(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 32)
        self.fc = nn.Linear(32, 32)

    def forward(self, ids):
        return self.fc(self.emb(ids))


class CumsumResidual(nn.Module):
    """A value of the first device part skips the host part into the second."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(32, 32)
        self.b = nn.Linear(32, 32)

    def forward(self, x):
        h = self.a(x)
        return self.b(torch.cumsum(h, dim=-1) * 0.1 + h)


class SoftmaxLast(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 48)

    def forward(self, x):
        return torch.softmax(self.fc(x), dim=-1)


class HostOnly(nn.Module):
    def forward(self, x):
        return torch.cumsum(torch.relu(x), dim=-1)


def _compile(model, x, tmp_path, fallback: set[str], **options):
    config = pybuda.CompilerConfig(cpu_fallback_ops=fallback, **{**FLOAT32, **options})
    return pybuda.compile(model, x, device="n150", config=config, output_dir=tmp_path, verify=True)


def _check_against_torch(compiled, model, x):
    with torch.no_grad():
        expected = model(x).numpy()
    got = compiled(x).numpy()
    assert got.shape == expected.shape
    assert pcc(got, expected) >= 0.999
    assert np.allclose(got, expected, rtol=1e-2, atol=1e-2 * float(np.abs(expected).max()))
    return got


def _kinds(compiled) -> list[str]:
    return [s.kind for s in compiled.segments]


CASES = {
    "before": (EmbedFirst, lambda: torch.randint(0, 50, (2, 32)), {"embedding"}, ["host", "device"]),
    "between": (CumsumMiddle, lambda: torch.randn(2, 8, 32), {"cumsum"}, ["device", "host", "device"]),
    "between_with_skip": (CumsumResidual, lambda: torch.randn(2, 8, 32), {"cumsum"}, ["device", "host", "device"]),
    "after": (SoftmaxLast, lambda: torch.randn(2, 8, 32), {"softmax"}, ["device", "host"]),
}


@pytest.mark.parametrize("position", list(CASES))
def test_fallback_op_runs_on_the_host_at_any_position(position, tmp_path):
    build, inputs, fallback, kinds = CASES[position]
    torch.manual_seed(0)
    model, x = build().eval(), inputs()
    compiled = _compile(model, x, tmp_path, fallback)
    assert _kinds(compiled) == kinds
    written = set(compiled.input_names)   # each part reads only values written before it
    for segment in compiled.segments:
        assert set(segment.graph.input_names) <= written
        written |= set(segment.graph.output_names)
    _check_against_torch(compiled, model, x)
    host_types = {n.framework_op_type for s in compiled.segments if not s.on_device for n in s.graph.nodes("op")}
    assert fallback <= host_types
    device_types = {op.type for nl in compiled.netlists for op in nl.ops.values()}
    assert not fallback & device_types
    assert len(compiled.netlist_paths) == kinds.count("device") and compiled.netlist_path == compiled.netlist_paths[0]
    assert all(p.exists() for p in compiled.netlist_paths)
    if position == "between_with_skip":   # the skip goes device -> device, past the host part
        first, _, second = compiled.segments
        assert set(second.graph.input_names) & set(first.graph.output_names)
    assert compiled.host_ops and ", ".join(compiled.host_ops) in compiled.summary()


def test_middle_fallback_splits_the_device_graph_and_the_estimate_covers_both_parts(tmp_path):
    torch.manual_seed(0)
    model, x = CumsumMiddle().eval(), torch.randn(2, 8, 32)
    compiled = _compile(model, x, tmp_path, {"cumsum"})
    first, host, second = compiled.segments
    # the values crossing between parts: device -> host -> device
    assert set(host.graph.input_names) == set(first.graph.output_names)
    assert set(second.graph.input_names) == set(host.graph.output_names)
    assert [n.op_type for n in host.graph.nodes("op")] == ["cumsum"]
    # the crossing values are queues: outputs of the first netlist, inputs of the second
    nl0, nl1 = compiled.netlists
    assert all(nl0.queues[v].input != "HOST" for v in host.graph.input_names)
    assert all(nl1.queues[v].input == "HOST" for v in host.graph.output_names)
    perf = compiled.perf
    each = [estimate(nl, device="n150") for nl in compiled.netlists]
    assert len(each) == 2 and all(e.total_cycles > 0 for e in each)
    assert perf.total_cycles == sum(e.total_cycles for e in each)
    assert len(perf.epochs) == sum(len(e.epochs) for e in each)
    assert perf.samples_per_second == pytest.approx(2 / sum(e.seconds for e in each))
    assert perf.host_ops == tuple(compiled.host_ops) and "cumsum" in perf.to_text()
    assert [p.estimated_cycles for p in compiled.placements] == [e.total_cycles for e in each]
    # the host <-> device transfers of the crossing values are host queues, costed over PCIe by each estimate
    assert all(nl0.queues[v].loc == "host" for v in host.graph.input_names)
    assert set(host.graph.output_names) <= {i.name for o in each[1].ops for i in o.inputs if i.memory == "HOST"}
    assert "parts: device (netlist 0) -> host (1 ops) -> device (netlist 1)" in compiled.summary()


def test_compiles_are_deterministic_with_several_netlists(tmp_path):
    texts = []
    for run in ("a", "b"):
        torch.manual_seed(0)
        compiled = _compile(CumsumMiddle().eval(), torch.randn(2, 8, 32), tmp_path / run, {"cumsum"})
        texts.append([p.read_bytes() for p in compiled.netlist_paths])
    assert texts[0] == texts[1]


@pytest.mark.parametrize("build, fallback", [(CumsumMiddle, {"cumsum"}), (SoftmaxLast, {"softmax"})])
def test_tti_round_trip_of_host_mid_and_host_post_models(build, fallback, tmp_path):
    torch.manual_seed(0)
    model, x = build().eval(), torch.randn(2, 8, 32)
    compiled = _compile(model, x, tmp_path, fallback)
    got = _check_against_torch(compiled, model, x)
    path = compiled.save(tmp_path / "model.tti")
    loaded = pybuda.load(path)
    assert loaded.netlists == compiled.netlists
    assert loaded.netlist_texts == [p.read_text() for p in compiled.netlist_paths]
    assert [type(p).__name__ for p in loaded.manifest.parts] == \
        ["HostProgram" if s.kind == "host" else "DevicePart" for s in compiled.segments]
    assert np.array_equal(loaded(x).numpy(), got)
    assert loaded.perf.total_cycles == compiled.perf.total_cycles
    assert loaded.save(tmp_path / "again.tti").read_bytes() == path.read_bytes()


class TwoOutputs(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(32, 48)

    def forward(self, x):
        y = self.fc(x)
        return y, torch.softmax(y, dim=-1)


def test_model_outputs_from_device_and_host_parts_keep_their_order(tmp_path):
    torch.manual_seed(0)
    model, x = TwoOutputs().eval(), torch.randn(2, 8, 32)
    compiled = _compile(model, x, tmp_path, {"softmax"})
    assert _kinds(compiled) == ["device", "host"]
    device, host = compiled.segments
    assert compiled.manifest.outputs == ("output_0", "output_1")
    assert "output_0" in device.graph.output_names and host.graph.output_names == ["output_1"]
    with torch.no_grad():
        expected = model(x)
    for got, want in zip(compiled(x), expected):
        assert got.shape == want.shape and pcc(got.numpy(), want.numpy()) >= 0.999


def test_all_host_model_runs_without_a_netlist(tmp_path):
    x = torch.randn(2, 4, 32)
    compiled = _compile(HostOnly(), x, tmp_path, {"cumsum"})
    assert _kinds(compiled) == ["host"]
    assert compiled.netlist_path is None and compiled.netlist_paths == () and compiled.netlist is None
    assert not list(tmp_path.glob("*.yaml"))
    got = _check_against_torch(compiled, HostOnly(), x)
    assert compiled.perf.total_cycles == 0 and compiled.perf.samples_per_second == 0.0
    assert compiled.perf.host_ops == tuple(compiled.host_ops)
    loaded = pybuda.load(compiled.save(tmp_path / "host.tti"))
    assert np.array_equal(loaded(x).numpy(), got)


class CrossTileReshape(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(32, 32)
        self.b = nn.Linear(48, 48)

    def forward(self, x):
        return self.b(self.a(x).reshape(1, 4, 48))   # rows of 32 regrouped into rows of 48: no device lowering


@pytest.mark.parametrize("build, shape, message, advice", [
    (CumsumMiddle, (2, 8, 32), "has no device lowering", r"by adding '(\w+)' to cpu_fallback_ops"),
    (CrossTileReshape, (1, 6, 32), "moves data across tiles", r"add '(\w+)' to cpu_fallback_ops"),
])
def test_following_the_advice_of_the_error_compiles(build, shape, message, advice, tmp_path):
    torch.manual_seed(0)
    model, x = build().eval(), torch.randn(*shape)
    with pytest.raises(pybuda.ops.registry.OpError, match=message) as err:
        _compile(model, x, tmp_path / "a", set())
    advised = re.search(advice, str(err.value)).group(1)
    compiled = _compile(model, x, tmp_path / "b", {advised})
    assert "host" in _kinds(compiled)[1:-1]   # the op sat between device ops
    _check_against_torch(compiled, model, x)


def _graph(ops: list[tuple[str, str, list]]) -> Graph:
    g = Graph("g")
    g.add_input("x", (1, 4, 32))
    g.add_parameter("w", np.ones((32, 32), dtype=np.float32))
    g.add_parameter("b", np.ones((1, 4, 32), dtype=np.float32))
    for name, op_type, operands in ops:
        add_op(g, name, op_type, operands, {"axis": -1} if op_type == "cumsum" else {})
    g.add_output("out", ops[-1][0])
    return g


@pytest.mark.parametrize("ops, expected", [
    # ancestors without device work go along to host-pre (the legacy pre-process)
    ([("e", "exp", ["x"]), ("c", "cumsum", ["e"]), ("m", "matmul", ["c", "w"])],
     [("host", ["e", "c"]), ("device", ["m"])]),
    # an elementwise op reading a buffer (RoBERTa's token types gathered by position) is no device work either
    ([("e", "multiply", ["x", "b"]), ("c", "cumsum", ["e"]), ("m", "matmul", ["c", "w"])],
     [("host", ["e", "c"]), ("device", ["m"])]),
    # a matmul before, none after: the descendants go along to host-post
    ([("m", "matmul", ["x", "w"]), ("c", "cumsum", ["m"]), ("e", "exp", ["c"])],
     [("device", ["m"]), ("host", ["c", "e"])]),
    # matmuls on both sides: the op alone, between two device parts
    ([("m", "matmul", ["x", "w"]), ("c", "cumsum", ["m"]), ("n", "matmul", ["c", "w"])],
     [("device", ["m"]), ("host", ["c"]), ("device", ["n"])]),
])
def test_partition_positions(ops, expected):
    config = pybuda.CompilerConfig(cpu_fallback_ops={"cumsum"})
    segments = partition(_graph(ops), config)
    assert [(s.kind, s.graph.op_names()) for s in segments] == expected
    assert segments[-1].graph.output_names == ["out"]
    for before, after in zip(segments, segments[1:]):
        assert set(after.graph.input_names) <= set(before.graph.output_names) | {"x"}


class PredictedClass(nn.Module):
    """A classifier returning its logits and the predicted class (argmax: no device lowering, nothing after it)."""

    def __init__(self):
        super().__init__()
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        logits = self.head(x)
        return logits, logits.argmax(-1)


def test_an_op_no_device_work_follows_runs_on_the_host_after_the_device_without_asking(tmp_path):
    torch.manual_seed(0)
    model, x = PredictedClass().eval(), torch.randn(4, 64)
    compiled = pybuda.compile(model, x, output_dir=tmp_path, verify=True)
    assert [s.kind for s in compiled.segments] == ["device", "host"] and compiled.host_ops == ["argmax_3"]
    logits, predicted = compiled(x)
    with torch.no_grad():
        expected_logits, expected = model(x)
    assert pcc(logits.numpy(), expected_logits.numpy()) >= 0.99
    np.testing.assert_array_equal(predicted.numpy(), expected.numpy())   # float32 holding the class indices


class DetectHead(nn.Module):
    """YOLOv5's detect head, small: a 1x1 conv of 3 anchors x 7 outputs per cell, viewed (batch, anchor, output,
    H, W) and permuted to (batch, anchor, H, W, output), a shape no device tensor holds (a non-unit dim before the
    last three); sigmoid, the first two outputs offset by a cell grid, flattened to (batch, anchor*H*W, output)."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.detect = nn.Conv2d(8, 3 * 7, 1)
        self.register_buffer("grid", torch.randn(1, 3, 6, 6, 2))

    def forward(self, x):
        y = self.detect(torch.relu(self.stem(x)))
        b, _, h, w = y.shape
        y = y.view(b, 3, 7, h, w).permute(0, 1, 3, 4, 2).sigmoid()
        xy, rest = y.split((2, 5), 4)
        return torch.cat((xy * 2 + self.grid, rest), 4).view(b, -1, 7)


def test_ops_on_values_no_device_tensor_holds_run_on_the_host_after_the_device(tmp_path):
    torch.manual_seed(0)
    model, x = DetectHead().eval(), torch.randn(1, 3, 6, 6)
    compiled = pybuda.compile(model, x, output_dir=tmp_path, verify=True)
    assert [s.kind for s in compiled.segments] == ["device", "host"]
    host = {compiled.segments[1].graph.node(n).op_type for n in compiled.host_ops}
    assert {"add", "concatenate"} <= host and "conv2d" not in host
    assert set(compiled.perf.host_ops) == set(compiled.host_ops)     # the estimate lists them, untimed
    with torch.no_grad():
        expected = model(x)
    assert pcc(compiled(x).numpy(), expected.numpy()) >= 0.99


class _TmEnds(nn.Module):
    """Leading TMs on the inputs (a concatenate of two inputs, then a transpose), a linear, trailing TMs (a
    reshape and a transpose of the output)."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(64, 64)

    def forward(self, x, y):
        h = torch.cat([x, y], dim=-1).transpose(-1, -2)      # (b, 64, 32)
        return self.fc(h.transpose(-1, -2)).reshape(-1, 32, 2, 32).transpose(1, 2)


@pytest.mark.parametrize("depth, on_host", [(0, 0), (1, 2), (10, 5)])
def test_tm_cpu_fallback_moves_the_tms_at_the_ends_to_the_host(depth, on_host, tmp_path):
    """`enable_tm_cpu_fallback`: the leading concatenate and transposes and the trailing reshape and transpose run
    on the host, as deep as `tm_cpu_fallback_max_depth` allows; the linear stays on the device."""
    model, x, y = _TmEnds(), torch.randn(2, 32, 32), torch.randn(2, 32, 32)
    config = pybuda.CompilerConfig(enable_tm_cpu_fallback=True, tm_cpu_fallback_max_depth=depth)
    compiled = pybuda.compile(model, x, y, config=config, output_dir=tmp_path)
    host = compiled.host_ops
    assert len(host) == on_host and not any(op.startswith(("matmul", "linear")) for op in host)
    if depth:
        assert any(op.startswith("concatenate") for op in host)
    with torch.no_grad():
        expected = model(x, y)
    assert pcc(compiled(x, y).numpy(), expected.numpy()) >= 0.99
