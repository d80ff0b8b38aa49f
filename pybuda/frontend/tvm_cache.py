"""TVM cache: the imported graph of a torch model, stored on disk and reused (legacy PYBUDA_ENABLE_TVM_CACHE).

PYBUDA_ENABLE_TVM_CACHE=1 reads and writes the cache, 0 (default) ignores it, -1 drops this model's entry and
rebuilds it. Entries are keyed by the model's structure (module tree, forward sources, parameter names, shapes
and dtypes), the sample inputs' per-sample shapes and dtypes, the torch and TVM versions and the importer's own
source; parameter
values are not stored: they are read from the model on every load. `tvm_graph_store_path` and
`tvm_graph_load_path` choose the directories (default `generated_modules/tvm_cache`). A corrupt entry is
rebuilt with a warning."""
from __future__ import annotations

import hashlib
import inspect
import os
import pickle
import warnings
from pathlib import Path

import torch

from ..files import write_atomically
from ..ir import Graph

DEFAULT_DIR = Path("generated_modules") / "tvm_cache"
FORMAT_VERSION = 1


def cache_mode() -> int:
    """The PYBUDA_ENABLE_TVM_CACHE setting: 1 on, 0 off, -1 clear."""
    raw = os.environ.get("PYBUDA_ENABLE_TVM_CACHE", "0").strip() or "0"
    if raw not in ("1", "0", "-1"):
        raise ValueError(f"PYBUDA_ENABLE_TVM_CACHE={raw!r}; legal: 1 (use the cache), 0 (off), -1 (clear and rebuild)")
    return int(raw)


def _importer_sources() -> bytes:
    """The frontend's own code: a changed mapping invalidates every entry."""
    here = Path(__file__).parent
    return b"".join(p.read_bytes() for p in sorted(here.glob("*.py")))


def cache_key(model: torch.nn.Module, sample_inputs: tuple) -> str:
    import tvm

    h = hashlib.sha256(_importer_sources())
    for part in (FORMAT_VERSION, torch.__version__, tvm.__version__, type(model).__module__,
                 type(model).__qualname__, repr(model)):
        h.update(str(part).encode())
    for cls in sorted({type(m) for m in model.modules()}, key=lambda c: (c.__module__, c.__qualname__)):
        try:
            h.update(inspect.getsource(cls.forward).encode())
        except (OSError, TypeError):
            h.update(f"{cls.__module__}.{cls.__qualname__}".encode())
    for name, t in list(model.state_dict(keep_vars=True).items()):
        h.update(f"{name}:{tuple(t.shape)}:{t.dtype}".encode())
    for x in sample_inputs:
        h.update(f"{tuple(x.shape[1:])}:{x.dtype}".encode())
    return h.hexdigest()[:24]


def _strip(graph: Graph) -> Graph:
    """A copy without parameter values (they come from the model on load)."""
    g = graph.copy()
    for node in g.nodes("parameter"):
        node.value = None
    return g


def _refill(graph: Graph, model: torch.nn.Module) -> Graph:
    state = model.state_dict()
    for node in graph.nodes("parameter"):
        if node.name not in state:
            raise KeyError(f"cached graph parameter {node.name!r} is not in the model's state dict")
        node.value = state[node.name].detach().cpu().float().numpy().reshape(node.shape)
    return graph


def cached_import(model: torch.nn.Module, sample_inputs: tuple, config, importer) -> Graph:
    """`importer(model, sample_inputs)` through the cache, as PYBUDA_ENABLE_TVM_CACHE says."""
    mode = cache_mode()
    if mode == 0:
        return importer(model, sample_inputs)
    key = cache_key(model, sample_inputs)
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
    graph = importer(model, sample_inputs)
    write_atomically(store_path, lambda f: pickle.dump({"format": FORMAT_VERSION, "key": key,
                                                        "graph": _strip(graph)}, f))
    return graph
