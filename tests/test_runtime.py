"""The runtime: a compiled model runs from its netlist, run manifest and arrays; TTI images save it to one file that
loads and runs in a fresh process (no framework model, no recompiling) with bit-identical outputs; damaged files
give clear errors; device_mode CompileOnly / RunOnly."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

import pybuda
from pybuda.codegen.manifest import ManifestError, RunManifest, decode, encode
from pybuda.config import DeviceMode
from pybuda.runtime import TTIError
from pybuda.tools.models import MNISTCNN
from pybuda.tools.zoo import ZOO

from models import MLP


def _outputs(out) -> list[torch.Tensor]:
    return torch.utils._pytree.tree_leaves(out)


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """The MNIST demo model (microbatch 4) and a small BERT (CPU-fallback embedding), compiled, run and saved."""
    root = tmp_path_factory.mktemp("tti")
    torch.manual_seed(0)
    bert = ZOO["bert_tiny"]
    cases = {"mnist": (MNISTCNN().eval(), (torch.randn(4, 1, 28, 28),)),
             "bert": (bert.build(), bert.inputs(2))}
    runs = {}
    for label, (model, inputs) in cases.items():
        compiled = pybuda.compile(model, *inputs, device="e150", output_dir=root / label)
        path = compiled.save(root / f"{label}.tti")
        runs[label] = (compiled, inputs, [o.numpy() for o in _outputs(compiled(*inputs))], path)
    return runs


_FRESH_PROCESS = """
import sys
import numpy as np
import torch

def no_export(*args, **kwargs):
    raise AssertionError("torch.export called while running a TTI image")

torch.export.export = no_export
import pybuda

model = pybuda.load(sys.argv[1])
inputs = [torch.from_numpy(np.load(p)) for p in sys.argv[3:]]
out = model(*inputs)
np.savez(sys.argv[2], *[o.numpy() for o in torch.utils._pytree.tree_leaves(out)])
# (transformers is imported only to give a BERT's outputs back as its ModelOutput type)
loaded = sorted(m for m in ("tvm", "pybuda.tools.models", "pybuda.frontend.torch_import") if m in sys.modules)
assert not loaded, f"running a TTI image imported {loaded}"
"""


@pytest.mark.parametrize("label", ["mnist", "bert"])
def test_tti_runs_in_a_fresh_process_with_identical_outputs(saved, tmp_path, label):
    compiled, inputs, expected, path = saved[label]
    files = []
    for i, x in enumerate(inputs):
        files.append(tmp_path / f"in{i}.npy")
        np.save(files[-1], x.numpy())
    result = tmp_path / "out.npz"
    env = dict(os.environ, PYTHONPATH=str(Path(pybuda.__file__).parents[1]))   # this checkout's pybuda
    subprocess.run([sys.executable, "-c", _FRESH_PROCESS, str(path), str(result), *map(str, files)], check=True,
                   timeout=300, cwd=tmp_path, env=env)
    with np.load(result) as got:
        outs = [got[f"arr_{i}"] for i in range(len(got.files))]
    assert len(outs) == len(expected)
    for g, e in zip(outs, expected):
        assert g.dtype == e.dtype and g.shape == e.shape and g.tobytes() == e.tobytes()


def test_loaded_model_exposes_netlist_estimate_and_inputs(saved):
    compiled, inputs, expected, path = saved["bert"]
    loaded = pybuda.load(path)
    assert loaded.netlist == compiled.netlist and loaded.netlist_text == compiled.netlist_path.read_text()
    assert loaded.perf.total_cycles == compiled.perf.total_cycles
    assert loaded.name == "BertModel" and loaded.device == "e150" and loaded.microbatch == 2
    assert loaded.input_names == compiled.input_names == ["input_ids"] and loaded.input_shapes == [(2, 32)]
    assert loaded.output_names == ["output_0"] and loaded.tti_path == path
    # the embedding runs on the host from the manifest's host program
    assert "embedding" in {op.op_type for op in loaded.manifest.host_ops()}
    assert "embedding" not in {op.type for op in loaded.netlist.ops.values()}
    assert "host (CPU fallback) ops: " in loaded.summary() and "embedding" in loaded.summary()
    out = loaded(*inputs)
    assert type(out).__name__ == "BaseModelOutputWithPoolingAndCrossAttentions"
    assert np.array_equal(out.last_hidden_state.numpy(), expected[0])
    # saving is deterministic: the same compiled model gives the same bytes
    assert loaded.save(path.parent / "again.tti").read_bytes() == path.read_bytes()


def test_compiled_model_runs_from_its_manifest_only(saved):
    """Every host-facing queue of the netlist has a feed; the graphs are not needed to run."""
    compiled, inputs, expected, _ = saved["mnist"]
    manifest = compiled.manifest
    host_queues = {n for n, q in compiled.netlist.queues.items() if q.input == "HOST"}
    assert host_queues <= set(manifest.queues)
    kinds = {f.kind for f in manifest.queues.values()}
    assert {"parameter", "sparse_tiles", "encoding", "input", "output"} <= kinds
    rt = compiled.runtime
    alone = pybuda.RuntimeModel(rt.netlist, rt.netlist_text, manifest, rt.arrays)
    assert np.array_equal(alone(*inputs).numpy(), expected[0])
    assert RunManifest.from_json(manifest.to_json()) == manifest


def test_inputs_are_checked(saved):
    compiled, inputs, _, path = saved["mnist"]
    loaded = pybuda.load(path)
    for model in (compiled, loaded):
        with pytest.raises(ValueError, match=r"takes 1 input\(s\) \(x: shape \(4, 1, 28, 28\) float32\), got 2"):
            model(*inputs, *inputs)
        with pytest.raises(ValueError, match=r"has shape \(3, 1, 28, 28\), .*microbatch: it must be 4"):
            model(torch.randn(3, 1, 28, 28))
        with pytest.raises(ValueError, match=r"input 0 \('x'\) has shape \(4, 1, 28, 27\), expected x: shape "
                                             r"\(4, 1, 28, 28\)"):
            model(torch.randn(4, 1, 28, 27))


# --- damaged files ----------------------------------------------------------------------------------------------

def _rewrite(src, dst, edit):
    """Copy a TTI image entry by entry, `edit(name, data) -> data | None` (None drops the entry)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            data = edit(info.filename, zin.read(info.filename))
            if data is not None:
                zout.writestr(info, data)
    return dst


def test_damaged_files_give_clear_errors(saved, tmp_path):
    path = saved["mnist"][3]
    data = path.read_bytes()
    cases = {}
    cases["truncated"] = (data[:len(data) // 2], r"truncated or corrupt")
    flipped = bytearray(data)
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo("arrays/00001.npy")
    flipped[info.header_offset + 200] ^= 0xFF    # inside the array data (stored, not compressed)
    cases["corrupt"] = (bytes(flipped), r"truncated or corrupt \(BadZipFile: Bad CRC-32 for file 'arrays/00001.npy'\)")
    cases["text"] = (b"devices: {arch: grayskull}\n", r"not a pybuda TTI image \(not a zip archive\)")
    cases["empty"] = (b"", r"not a pybuda TTI image \(the file is empty\)")
    for name, (content, pattern) in cases.items():
        bad = tmp_path / f"{name}.tti"
        bad.write_bytes(content)
        with pytest.raises(TTIError, match=pattern) as err:
            pybuda.load(bad)
        assert str(err.value).startswith(f"{bad}: "), name

    other_zip = tmp_path / "other.tti"
    with zipfile.ZipFile(other_zip, "w") as zf:
        zf.writestr("readme.txt", "hello")
    with pytest.raises(TTIError, match=r"other.tti: not a pybuda TTI image \(a zip archive without pybuda-tti.json\)"):
        pybuda.load(other_zip)

    def version_99(name, data):
        return json.dumps({**json.loads(data), "version": 99}).encode() if name == "pybuda-tti.json" else data
    with pytest.raises(TTIError, match=r"v99.tti: TTI format version 99; this pybuda reads version 2 "
                                       r"\(recompile the model and save it again\)"):
        pybuda.load(_rewrite(path, tmp_path / "v99.tti", version_99))

    def drop_netlist(name, data):
        return None if name == "netlist.yaml" else data
    with pytest.raises(TTIError, match=r"incomplete: no netlist.yaml"):
        pybuda.load(_rewrite(path, tmp_path / "no_netlist.tti", drop_netlist))

    def rename_queue(name, data):
        return data.replace(b'"conv1.weight"', b'"conv1.w"') if name == "manifest.json" else data
    with pytest.raises(TTIError, match=r"queue 'conv1.weight' is fed by the host but the manifest has no data for "
                                       r"it\n  queue 'conv1.w' of the manifest is not in the netlist"):
        pybuda.load(_rewrite(path, tmp_path / "renamed.tti", rename_queue))
    with pytest.raises(FileNotFoundError):
        pybuda.load(tmp_path / "missing.tti")


def test_save_is_atomic(saved, tmp_path, monkeypatch):
    compiled = saved["mnist"][0]

    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(np.lib.format, "write_array", fail)
    with pytest.raises(OSError, match="disk full"):
        compiled.save(tmp_path / "model.tti")
    assert list(tmp_path.iterdir()) == []


# --- the manifest's file form -----------------------------------------------------------------------------------

def test_attribute_values_round_trip_with_their_types():
    attrs = {"shape": (1, 32, 128), "dims": [0, 2, 1], "keep": True, "eps": 1e-12, "fill": float("-inf"),
             "mode": "nearest", "none": None, "by_port": {0: (2, 3)}, "f64": np.float64(0.1), "i32": np.int32(7),
             "table": np.arange(6, dtype=np.float32).reshape(2, 3)}
    back = decode(json.loads(json.dumps(encode(attrs, "test"))))
    assert back.keys() == attrs.keys()
    for key, value in attrs.items():
        assert type(back[key]) is type(value), key
        assert np.array_equal(back[key], value) if key == "table" else back[key] == value
    with pytest.raises(ManifestError, match=r"host op 'x': a value of type object cannot be written"):
        encode({"obj": object()}, "host op 'x'")


# --- device_mode ------------------------------------------------------------------------------------------------

def test_device_mode_compile_only_saves_and_does_not_run(tmp_path):
    x = torch.randn(2, 16, 64)
    config = pybuda.CompilerConfig(device_mode="CompileOnly")
    compiled = pybuda.compile(MLP(), x, output_dir=tmp_path, config=config)
    assert compiled.tti_path == tmp_path / "mlp.tti" and compiled.tti_path.is_file()
    assert compiled.perf.samples_per_second > 0 and compiled.netlist is not None
    with pytest.raises(RuntimeError, match=r"device_mode CompileOnly: it was saved to .*mlp.tti and does not run "
                                           r"here; run it with pybuda.load"):
        compiled(x)
    explicit = pybuda.compile(MLP(), x, output_dir=tmp_path / "o", config=config, tti_path=tmp_path / "a" / "m.tti")
    assert explicit.tti_path == tmp_path / "a" / "m.tti" and explicit.tti_path.is_file()
    with pytest.raises(ValueError, match="CompileOnly saves a TTI image, which needs the netlist, but compile_depth "
                                         "stops after stage 'balance'"):
        pybuda.compile(MLP(), x, output_dir=tmp_path / "d",
                       config=pybuda.CompilerConfig(device_mode="CompileOnly", compile_depth="balance"))


def test_device_mode_run_only_loads_instead_of_compiling(tmp_path):
    x = torch.randn(2, 16, 64)
    model = MLP()
    expected = pybuda.compile(model, x, output_dir=tmp_path)(x)
    pybuda.compile(model, x, output_dir=tmp_path, config=pybuda.CompilerConfig(device_mode=DeviceMode.CompileOnly))
    run_only = pybuda.CompilerConfig(device_mode="RunOnly")
    loaded = pybuda.compile(model, x, output_dir=tmp_path, config=run_only)
    assert isinstance(loaded, pybuda.RuntimeModel) and loaded.tti_path == tmp_path / "mlp.tti"
    assert loaded(x).numpy().tobytes() == expected.numpy().tobytes()
    by_path = pybuda.compile(None, config=run_only, tti_path=tmp_path / "mlp.tti")
    assert by_path(x).numpy().tobytes() == expected.numpy().tobytes()
    with pytest.raises(ValueError, match=r"mlp.tti does not match this compile call: it was compiled for device "
                                         r"e150, not n150; it takes inputs of shapes \[\(2, 16, 64\)\], the sample "
                                         r"inputs have \[\(4, 16, 64\)\]"):
        pybuda.compile(model, torch.randn(4, 16, 64), device="n150", output_dir=tmp_path, config=run_only)
    with pytest.raises(FileNotFoundError):
        pybuda.compile(model, x, output_dir=tmp_path / "empty", config=run_only)
    with pytest.raises(ValueError, match="RunOnly loads a TTI image: give tti_path="):
        pybuda.compile(None, config=run_only)


def test_tti_path_without_compile_only_warns(tmp_path):
    with pytest.warns(UserWarning, match="tti_path='.*m.tti' has no effect with device_mode CompileAndRun"):
        pybuda.compile(MLP(), torch.randn(2, 16, 64), output_dir=tmp_path, tti_path=tmp_path / "m.tti")
    assert not (tmp_path / "m.tti").exists()
