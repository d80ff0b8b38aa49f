"""Never silently wrong: each guard of issue 10 either makes a case correct or raises a clear error naming the thing
and what would be legal (microbatch mixing, call inputs, the TVM cache key, verify through the simulated netlist,
options with no effect yet, output structures, model modes, netlist names, output directories, file modes)."""
from __future__ import annotations

import collections
import dataclasses
import os
import re
import warnings

import numpy as np
import pytest
import torch
import torch.nn as nn

import pybuda
from pybuda import config as C
from pybuda.stages import STAGES
from pybuda.tools.models import MNISTCNN
from pybuda.verify import NETLIST_PCC_THRESHOLDS, pcc


class Linear(nn.Module):
    """A per-sample model: one linear layer and a ReLU."""

    def __init__(self, width: int = 32):
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(width, width)

    def forward(self, x):
        return torch.relu(self.fc(x))


# --- 1. microbatch mixing ---------------------------------------------------------------------------------------

class Centered(Linear):
    def forward(self, x):
        return self.fc(x) - self.fc(x).mean(0)


class TimesFirst(nn.Module):
    def forward(self, x):
        return x * x[0:1]


class WithTimesFirst(Linear):
    def __init__(self):
        super().__init__()
        self.mix = TimesFirst()

    def forward(self, x):
        return torch.relu(self.mix(self.fc(x)))


class BatchSum(Linear):
    def forward(self, x):
        return self.fc(x).sum(0)


class Unbatched(Linear):
    """Two outputs: the first per sample, the second not indexed by the batch at all."""

    def forward(self, x):
        return self.fc(x), self.fc.weight * 2.0


@pytest.mark.parametrize("model, output, problem, where", [
    (Centered(), 0, "mixes samples", "the model itself (Centered)"),
    (WithTimesFirst(), 0, "mixes samples", "submodule 'mix' (TimesFirst)"),
    (BatchSum(), 0, r"has shape \(4, 32\), not indexed by the 2 samples", "the model itself (BatchSum)"),
    (Unbatched(), 1, r"has shape \(32, 32\), not indexed by the 2 samples", "the model itself (Unbatched)"),
])
def test_models_mixing_samples_are_refused_naming_output_and_op(tmp_path, model, output, problem, where):
    with pytest.raises(pybuda.MicrobatchError, match=rf"leading dim of the sample inputs \(3\) is not a microbatch "
                                                     rf"\(checked on its first 2 samples\): "
                                                     rf"model output {output} {problem}.*first in {re.escape(where)}.*"
                                                     r"compile with a microbatch of 1"):
        pybuda.compile(model, torch.randn(3, 4, 32), output_dir=tmp_path)
    assert not list(tmp_path.iterdir())


def test_batch_dim_1_is_legit_for_models_that_mix_samples(tmp_path):
    model, x = BatchSum(), torch.randn(1, 4, 32)
    out = pybuda.compile(model, x, output_dir=tmp_path)(x)
    with torch.no_grad():
        assert pcc(out.numpy(), model(x).numpy()) > 0.99


# --- 2. inputs checked on every call ----------------------------------------------------------------------------

class TwoInputs(Linear):
    def forward(self, x, mask):
        return torch.relu(self.fc(x)) * mask


@pytest.fixture(scope="module")
def two_inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("inputs")
    x, mask = torch.randn(2, 4, 32), torch.ones(2, 4, 32)
    compiled = pybuda.compile(TwoInputs(), x, mask, output_dir=root)
    return compiled, pybuda.load(compiled.save(root / "two.tti")), (x, mask)


@pytest.mark.parametrize("change, message", [
    (lambda x, m: (x,), r"takes 2 input\(s\) \(x: shape \(2, 4, 32\) float32, mask: shape \(2, 4, 32\) float32\), "
                        r"got 1"),
    (lambda x, m: (x[..., :16], m), r"input 0 \('x'\) has shape \(2, 4, 16\), expected x: shape \(2, 4, 32\) float32; "
                                    "the dims after the microbatch must be the compiled ones"),
    (lambda x, m: (x, m[..., :40].repeat(1, 1, 2)), r"input 1 \('mask'\) has shape \(2, 4, 64\), expected mask"),
    (lambda x, m: (x[0], m), r"input 0 \('x'\) has shape \(4, 32\), expected x: shape \(2, 4, 32\)"),
    (lambda x, m: (x.transpose(1, 2), m), r"input 0 \('x'\) has shape \(2, 32, 4\)"),
    (lambda x, m: (torch.cat([x, x]), m), r"has shape \(4, 4, 32\), .*the leading dim is the microbatch: it must be 2"),
    (lambda x, m: (None, m), r"input 0 \('x'\) is NoneType, expected x: shape \(2, 4, 32\) float32"),
    (lambda x, m: (x.long(), m), r"input 0 \('x'\) has dtype int64 \(int\), expected x: .* \(float dtypes"),
    (lambda x, m: (x, m.bool()), r"input 1 \('mask'\) has dtype bool \(bool\), expected mask: .* \(float dtypes"),
])
def test_inputs_are_checked_on_every_call(two_inputs, change, message):
    compiled, loaded, inputs = two_inputs
    for model in (compiled, loaded):
        with pytest.raises(pybuda.InputError, match=message):
            model(*change(*inputs))


def test_float_inputs_of_another_precision_and_numpy_arrays_run(two_inputs):
    compiled, loaded, (x, mask) = two_inputs
    expected = compiled(x, mask).numpy()
    assert np.array_equal(loaded(x.double(), mask.numpy()).numpy(), expected)


# --- 3. the TVM cache key follows what the import depends on ----------------------------------------------------

class Scaled(Linear):
    def __init__(self, scale: float, mode: str = "relu"):
        super().__init__()
        self.scale, self.mode = scale, mode

    def forward(self, x):
        y = self.fc(x) * self.scale
        return torch.relu(y) if self.mode == "relu" else torch.sigmoid(y)


def test_tvm_cache_recompiles_when_a_python_attribute_changes(tmp_path, monkeypatch):
    monkeypatch.setenv("PYBUDA_ENABLE_TVM_CACHE", "1")
    config = pybuda.CompilerConfig(tvm_graph_store_path=str(tmp_path / "cache"),
                                   tvm_graph_load_path=str(tmp_path / "cache"))
    model, x = Scaled(3.0), torch.randn(2, 4, 32)
    pybuda.compile(model, x, output_dir=tmp_path / "a", config=config)
    imports = []
    from pybuda.frontend import torch_import
    real = torch_import.import_program
    monkeypatch.setattr(torch_import, "import_program", lambda *a, **k: imports.append(1) or real(*a, **k))
    for step, (scale, mode) in enumerate([(3.0, "relu"), (5.0, "relu"), (5.0, "sigmoid"), (5.0, "sigmoid")]):
        model.scale, model.mode = scale, mode
        out = pybuda.compile(model, x, output_dir=tmp_path / str(step), config=config)(x)
        with torch.no_grad():
            assert pcc(out.numpy(), model(x).numpy()) > 0.99 and np.allclose(out, model(x), atol=0.05)
    assert imports == [1, 1]          # the unchanged model (steps 0 and 3) came from the cache
    assert len(list((tmp_path / "cache").glob("*.pkl"))) == 3


class WithNonPersistentBuffer(Linear):
    def __init__(self):
        super().__init__()
        self.register_buffer("offset", torch.arange(32, dtype=torch.float32), persistent=False)

    def forward(self, x):
        return torch.relu(self.fc(x) + self.offset)


def test_tvm_cache_hits_models_with_non_persistent_buffers(tmp_path, monkeypatch):
    monkeypatch.setenv("PYBUDA_ENABLE_TVM_CACHE", "1")
    config = pybuda.CompilerConfig(tvm_graph_store_path=str(tmp_path / "cache"),
                                   tvm_graph_load_path=str(tmp_path / "cache"))
    model, x = WithNonPersistentBuffer(), torch.randn(2, 4, 32)
    pybuda.compile(model, x, output_dir=tmp_path / "a", config=config)
    from pybuda.frontend import torch_import
    monkeypatch.setattr(torch_import, "import_program", lambda *a, **k: pytest.fail("imported again"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        out = pybuda.compile(model, x, output_dir=tmp_path / "b", config=config)(x)
    with torch.no_grad():
        assert pcc(out.numpy(), model(x).numpy()) > 0.99


# --- 4. verify runs the netlist in the simulator ----------------------------------------------------------------

def _verified(tmp_path, df: str, fidelity: str):
    torch.manual_seed(0)
    model, x = MNISTCNN().eval(), torch.randn(2, 1, 28, 28)
    config = pybuda.CompilerConfig(default_df_override=df, default_math_fidelity=fidelity)
    return pybuda.compile(model, x, output_dir=tmp_path / df, config=config, verify=True), model, x


def test_verify_reports_the_simulated_netlist_per_data_format(tmp_path):
    fp16, _, _ = _verified(tmp_path, "Float16_b", "HiFi3")
    bfp2, model, x = _verified(tmp_path, "Bfp2_b", "LoFi")
    assert [c.stage for c in bfp2.checks] == [s.name for s in STAGES if s.produces_graph] + ["netlist"]
    assert all(c.pcc > 0.9999 for c in bfp2.checks[:-1])       # the graphs are evaluated in float32
    netlist = bfp2.checks[-1]
    with torch.no_grad():
        real = pcc(bfp2(x).numpy(), model(x).numpy())
    assert (netlist.data_format, netlist.pcc) == ("Bfp2_b", pytest.approx(real))
    assert netlist.threshold == NETLIST_PCC_THRESHOLDS[pybuda.DataFormat.Bfp2_b][1] <= netlist.pcc < 0.9
    assert fp16.checks[-1].data_format == "Float16_b" and fp16.checks[-1].pcc > 0.99 > netlist.pcc


def test_verify_fails_a_netlist_below_its_format_threshold(tmp_path, monkeypatch):
    monkeypatch.setitem(NETLIST_PCC_THRESHOLDS, pybuda.DataFormat.Bfp2_b, (0.95, 0.95))
    with pytest.raises(pybuda.VerificationError, match=r"stage 'netlist' diverges from the framework: pcc 0\.[0-8]\d* "
                                                        r"< 0\.95.*simulator.*Bfp2_b"):
        _verified(tmp_path, "Bfp2_b", "LoFi")


# --- 5. options with no effect yet warn -------------------------------------------------------------------------

def _ineffective(record) -> list[str]:
    return [str(w.message) for w in record if issubclass(w.category, pybuda.IneffectiveOptionWarning)]


@pytest.mark.parametrize("path, option, why", [
    (lambda: C.set_configuration_options(place_on_one_row=True), "place_on_one_row", "has no effect yet"),
    (lambda: C.set_num_repeated_patterns("encoder", 2), "tvm_module_to_num_patterns",
     "does not apply in this compiler"),
])
def test_setting_an_ineffective_option_warns_once_naming_it(path, option, why):
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        path()
        path()
    (message,) = _ineffective(record)
    assert f"option {option!r}" in message and why in message


def test_effective_options_and_defaults_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error", pybuda.IneffectiveOptionWarning)
        C.set_configuration_options(default_df_override="Bfp8_b", enable_auto_fusing=True)
        pybuda.override_op_size("mm1", (2, 2))
        pybuda.set_epoch_break("mm1")
        pybuda.set_chip_break("mm2")


def test_compile_warns_once_for_config_fields_with_no_effect(tmp_path):
    from models import MLP
    config = pybuda.CompilerConfig(match_subgraph_patterns=2, enable_tvm_constant_prop=True, enable_consteval=False)
    with warnings.catch_warnings(record=True) as record:
        warnings.simplefilter("always")
        for out in ("a", "b"):
            pybuda.compile(MLP(), torch.randn(2, 16, 64), output_dir=tmp_path / out, config=config)
    messages = _ineffective(record)
    assert len(messages) == 2 and "'match_subgraph_patterns'" in messages[0] and \
        "'enable_tvm_constant_prop'" in messages[1]
    assert all("compile" in m for m in messages)


# --- 6. small ones ----------------------------------------------------------------------------------------------

Pair = collections.namedtuple("Pair", "left right")


class Structured(Linear):
    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind

    def forward(self, x):
        a, b = torch.relu(self.fc(x)), torch.sigmoid(self.fc(x))
        if self.kind == "dict":
            return {"relu": a, "sigmoid": b}
        if self.kind == "nested":
            return a, (b, [a + b])
        if self.kind == "reversed":   # the first output is computed from the second
            return b - a, a
        return Pair(a, b)


@pytest.mark.parametrize("kind", ["dict", "nested", "namedtuple", "reversed"])
def test_outputs_come_back_in_the_model_structure(tmp_path, kind):
    model, x = Structured(kind), torch.randn(2, 4, 32)
    compiled = pybuda.compile(model, x, output_dir=tmp_path)
    loaded = pybuda.load(compiled.save(tmp_path / "m.tti"))
    with torch.no_grad():
        expected = model(x)
    for got in (compiled(x), loaded(x)):
        assert torch.utils._pytree.tree_structure(got) == torch.utils._pytree.tree_structure(expected)
        for g, e in zip(torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(expected)):
            assert pcc(g.numpy(), e.numpy()) > 0.99


class TupleKeys(Linear):
    def forward(self, x):
        return {(0, 1): self.fc(x)}


def test_outputs_in_an_unsupported_structure_are_refused(tmp_path):
    with pytest.raises(TypeError, match=r"model outputs of type dict \(keys \[\(0, 1\)\]\) are not supported; return "
                                        "tensors in a tuple, list, dict with str or int keys"):
        pybuda.compile(TupleKeys(), torch.randn(2, 4, 32), output_dir=tmp_path)


def test_hf_model_output_comes_back_as_its_model_output_type(tmp_path):
    from pybuda.tools.zoo import ZOO
    entry = ZOO["bert_tiny"]
    model, inputs = entry.build(), entry.inputs(1)
    out = pybuda.compile(model, *inputs, output_dir=tmp_path)(*inputs)
    with torch.no_grad():
        expected = model(*inputs)
    assert type(out) is type(expected) and list(out.keys()) == list(expected.keys())
    assert pcc(out.last_hidden_state.numpy(), expected.last_hidden_state.numpy()) > 0.99


def test_compile_keeps_the_train_mode_of_every_module(tmp_path):
    model = Linear().train()
    model.fc.eval()
    pybuda.compile(model, torch.randn(2, 4, 32), output_dir=tmp_path)
    assert model.training and not model.fc.training


def test_models_of_one_class_get_their_own_netlists_deterministically(tmp_path):
    x = torch.randn(2, 4, 32)
    first = pybuda.compile(Scaled(2.0), x, output_dir=tmp_path).netlist_path
    other = pybuda.compile(Scaled(2.0, mode="sigmoid"), x, output_dir=tmp_path).netlist_path
    again = pybuda.compile(Scaled(2.0), x, output_dir=tmp_path / "again").netlist_path
    assert first != other and first.parent == other.parent == tmp_path
    assert first.name.startswith("Scaled_") and first.name.endswith("_netlist.yaml") and len(first.name) == 30
    assert again.name == first.name and again.read_bytes() == first.read_bytes()
    assert len(list(tmp_path.glob("Scaled_*_netlist.yaml"))) == 2


def test_model_names_with_path_characters_stay_in_output_dir(tmp_path):
    evil = type("../../evil/name", (Linear,), {})
    compiled = pybuda.compile(evil(), torch.randn(2, 4, 32), output_dir=tmp_path / "out",
                              config=pybuda.CompilerConfig(device_mode="CompileOnly"))
    assert compiled.netlist_path.parent == compiled.tti_path.parent == tmp_path / "out"
    assert compiled.netlist_path.name.startswith("_evil_name_") and compiled.tti_path.name == "_evil_name.tti"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_output_dir_expands_the_home_directory(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    compiled = pybuda.compile(Linear(), torch.randn(2, 4, 32), output_dir="~/x")
    assert compiled.netlist_path.parent == tmp_path / "home" / "x"
    assert not (tmp_path / "~").exists()


def _counting_stages(calls: list) -> list:
    first = STAGES[0]
    return [dataclasses.replace(first, run=lambda state: calls.append(1) or first.run(state)), *STAGES[1:]]


def test_an_output_dir_that_is_a_file_fails_before_compiling(tmp_path):
    (tmp_path / "file").write_text("")
    calls = []
    with pytest.raises(pybuda.OutputDirError, match=r"output_dir '.*file' is a file, not a directory"):
        pybuda.compile(Linear(), torch.randn(2, 4, 32), output_dir=tmp_path / "file", stages=_counting_stages(calls))
    assert not calls


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes to read-only directories")
def test_an_output_dir_that_is_not_writable_fails_before_compiling(tmp_path):
    (tmp_path / "ro").mkdir(mode=0o500)
    calls = []
    with pytest.raises(pybuda.OutputDirError, match="is not writable"):
        pybuda.compile(Linear(), torch.randn(2, 4, 32), output_dir=tmp_path / "ro", stages=_counting_stages(calls))
    assert not calls


@pytest.mark.parametrize("umask, mode", [(0o022, 0o644), (0o027, 0o640)])
def test_written_files_have_the_usual_mode(tmp_path, monkeypatch, umask, mode):
    monkeypatch.setenv("PYBUDA_ENABLE_TVM_CACHE", "1")
    config = pybuda.CompilerConfig(tvm_graph_store_path=str(tmp_path / "cache"))
    old = os.umask(umask)
    try:
        compiled = pybuda.compile(Linear(), torch.randn(2, 4, 32), output_dir=tmp_path, config=config)
        tti = compiled.save(tmp_path / "m.tti")
    finally:
        os.umask(old)
    (cache,) = (tmp_path / "cache").glob("*.pkl")
    assert [p.stat().st_mode & 0o777 for p in (compiled.netlist_path, tti, cache)] == [mode] * 3
