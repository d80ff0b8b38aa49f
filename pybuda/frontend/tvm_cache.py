"""TVM cache: the imported graph of a torch model, stored on disk and reused (legacy PYBUDA_ENABLE_TVM_CACHE).

PYBUDA_ENABLE_TVM_CACHE=1 reads and writes the cache, 0 (default) ignores it, -1 drops this model's entry and
rebuilds it. Entries are keyed by what the import depends on: the torch.export program of one sample, before its
decompositions (its graph code, which holds the Python scalars and modes `forward` read, its input/output specs,
the shapes and dtypes of its inputs), the values of its tensor constants and buffers, the names, shapes and dtypes
of its parameters, the torch and TVM versions and the importer's own source. Parameter values are not stored (nor
hashed): they are read from the model's parameters and buffers on every load. `tvm_graph_store_path` and
`tvm_graph_load_path` choose the directories (default `generated_modules/tvm_cache`). A corrupt entry is rebuilt
with a warning."""
from __future__ import annotations

import hashlib
import os
import pickle
import warnings
from pathlib import Path
from typing import Callable

import torch

from ..errors import UserInputError
from ..files import write_atomically
from ..ir import Graph

DEFAULT_DIR = Path("generated_modules") / "tvm_cache"
FORMAT_VERSION = 1


def cache_mode() -> int:
    """The PYBUDA_ENABLE_TVM_CACHE setting: 1 on, 0 off, -1 clear."""
    raw = os.environ.get("PYBUDA_ENABLE_TVM_CACHE", "0").strip() or "0"
    if raw not in ("1", "0", "-1"):
        raise UserInputError(f"PYBUDA_ENABLE_TVM_CACHE={raw!r}; legal: 1 (use the cache), 0 (off), -1 (clear and "
                             "rebuild)")
    return int(raw)


def _importer_sources() -> bytes:
    """The frontend's own code: a changed mapping invalidates every entry."""
    here = Path(__file__).parent
    return b"".join(p.read_bytes() for p in sorted(here.glob("*.py")))


def cache_key(program: torch.export.ExportedProgram) -> str:
    """The key of an exported program's import (module docstring)."""
    import tvm

    h = hashlib.sha256(_importer_sources())
    for part in (FORMAT_VERSION, torch.__version__, tvm.__version__, program.graph_module.code,
                 program.graph_signature, program.call_spec.in_spec, program.call_spec.out_spec):
        h.update(str(part).encode())
    for node in program.graph.nodes:
        if node.op == "placeholder":   # user inputs, parameters, buffers, constants: shapes and dtypes
            value = node.meta.get("val")
            h.update(f"{node.name}:{tuple(getattr(value, 'shape', ()))}:{getattr(value, 'dtype', value)}".encode())
    parameters = set(program.graph_signature.parameters)
    for name, t in program.state_dict.items():
        h.update(f"{name}:{tuple(t.shape)}:{t.dtype}".encode())
        if name not in parameters:   # buffers may be folded into constants
            h.update(_tensor_bytes(t))
    for name, t in program.constants.items():
        h.update(name.encode())
        h.update(_tensor_bytes(t) if isinstance(t, torch.Tensor) else repr(t).encode())
    return h.hexdigest()[:24]


def _tensor_bytes(t: torch.Tensor) -> bytes:
    t = t.detach().cpu().contiguous()
    return f"{tuple(t.shape)}:{t.dtype}".encode() + t.view(-1).view(torch.uint8).numpy().tobytes()


def _strip(graph: Graph) -> Graph:
    """A copy without parameter values (they come from the model on load)."""
    g = graph.copy()
    for node in g.nodes("parameter"):
        node.value = None
    return g


def _refill(graph: Graph, model: torch.nn.Module) -> Graph:
    """The cached graph's parameters from the model's parameters and buffers (non-persistent ones too)."""
    state = {**dict(model.named_parameters()), **dict(model.named_buffers())}
    for node in graph.nodes("parameter"):
        if node.name not in state:
            raise KeyError(f"cached graph parameter {node.name!r} is not a parameter or buffer of the model")
        node.value = state[node.name].detach().cpu().float().numpy().reshape(node.shape)
    return graph


def cached_import(program: torch.export.ExportedProgram, model: torch.nn.Module, config,
                  importer: Callable[[], Graph]) -> Graph:
    """`importer()` (the import of `program`, exported from `model`) through the cache, as
    PYBUDA_ENABLE_TVM_CACHE says; on a hit the parameters are read from `model`."""
    mode = cache_mode()
    if mode == 0:
        return importer()
    key = cache_key(program)
    load_path = Path(config.tvm_graph_load_path or DEFAULT_DIR) / f"{key}.pkl"
    store_path = Path(config.tvm_graph_store_path or DEFAULT_DIR) / f"{key}.pkl"
    if mode == -1:
        for p in {load_path, store_path}:
            p.unlink(missing_ok=True)
    elif load_path.exists():
        try:
            with open(load_path, "rb") as f:
                entry = pickle.load(f)
            if entry.get("format") != FORMAT_VERSION or entry.get("key") != key:
                raise ValueError("stale format or key")
            return _refill(entry["graph"], model)
        except Exception as e:  # noqa: BLE001  (any unreadable entry is rebuilt)
            warnings.warn(f"TVM cache entry {load_path} is unusable ({type(e).__name__}: {e}); rebuilding it",
                          stacklevel=2)
    graph = importer()
    write_atomically(store_path, lambda f: pickle.dump({"format": FORMAT_VERSION, "key": key,
                                                        "graph": _strip(graph)}, f))
    return graph
