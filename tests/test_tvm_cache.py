"""TVM cache: reuse, invalidation by structure and shapes, clearing, corrupt entries, parameter freshness."""
from __future__ import annotations

import time

import pytest
import torch
import torch.nn as nn

import pybuda
from pybuda.frontend import tvm_cache
from pybuda.frontend.torch_import import export_model


class Net(nn.Module):
    def __init__(self, width=32):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(32, width), nn.Linear(width, 8)

    def forward(self, x):
        return self.fc2(torch.relu(self.fc1(x)))


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("PYBUDA_ENABLE_TVM_CACHE", "1")
    pybuda.set_configuration_options()
    cfg = pybuda.config._get_global_compiler_config()
    cfg.tvm_graph_store_path = cfg.tvm_graph_load_path = str(tmp_path / "cache")
    return tmp_path / "cache"


def _compile(model, x, tmp_path):
    return pybuda.compile(model, x, output_dir=tmp_path, config=None)


def test_second_import_comes_from_the_cache(cache_dir, tmp_path, monkeypatch):
    model, x = Net().eval(), torch.randn(2, 4, 32)
    first = _compile(model, x, tmp_path / "a")
    assert len(list(cache_dir.glob("*.pkl"))) == 1
    calls = []
    monkeypatch.setattr("pybuda.frontend.torch_import.import_program", lambda *a, **k: calls.append(1))
    second = _compile(model, x, tmp_path / "b")
    assert not calls
    assert first.netlist_path.name == second.netlist_path.name
    assert first.netlist_path.read_bytes() == second.netlist_path.read_bytes()
    assert torch.allclose(first(x), second(x))


def test_new_weights_are_used_on_a_cache_hit(cache_dir, tmp_path):
    model, x = Net().eval(), torch.randn(2, 4, 32)
    _compile(model, x, tmp_path / "a")
    with torch.no_grad():
        model.fc2.bias.add_(5.0)
    out = _compile(model, x, tmp_path / "b")(x)
    with torch.no_grad():
        assert torch.allclose(out, model(x), atol=0.1)


def _key(model, x) -> str:
    return tvm_cache.cache_key(export_model(model, (x,)).program)


def test_key_follows_structure_and_shapes():
    x = torch.randn(2, 4, 32)
    base = _key(Net(), x)
    assert _key(Net(), torch.randn(7, 4, 32)) == base      # microbatch is not part of it
    assert _key(Net(width=64), x) != base
    assert _key(Net(), torch.randn(2, 5, 32)) != base


def test_clear_and_corrupt_entries(cache_dir, tmp_path, monkeypatch):
    model, x = Net().eval(), torch.randn(2, 4, 32)
    _compile(model, x, tmp_path / "a")
    (entry,) = cache_dir.glob("*.pkl")
    entry.write_bytes(b"not a pickle")
    with pytest.warns(UserWarning, match="unusable.*rebuilding"):
        _compile(model, x, tmp_path / "b")
    assert entry.read_bytes() != b"not a pickle"
    stamp = entry.stat().st_mtime_ns
    time.sleep(0.01)
    monkeypatch.setenv("PYBUDA_ENABLE_TVM_CACHE", "-1")
    _compile(model, x, tmp_path / "c")
    assert entry.stat().st_mtime_ns != stamp


def test_bad_setting_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("PYBUDA_ENABLE_TVM_CACHE", "yes")
    with pytest.raises(ValueError, match="legal: 1"):
        tvm_cache.cache_mode()
