"""Model outputs back in the structure the torch model returns (`pybuda.frontend.outputs.output_structure`)."""
from __future__ import annotations

import importlib
import warnings
from typing import Any


def rebuild(structure: dict | None, leaves: list) -> Any:
    """`leaves` (the outputs in graph order) in `structure`; without one (a PyBudaModule), one output alone and
    several as a tuple. A class that cannot be imported here (e.g. transformers missing) gives a dict."""
    if structure is None:
        return leaves[0] if len(leaves) == 1 else tuple(leaves)
    return _build(structure, leaves)


def _build(structure: dict, leaves: list) -> Any:
    if "leaf" in structure:
        return leaves[structure["leaf"]]
    if "tuple" in structure:
        return tuple(_build(s, leaves) for s in structure["tuple"])
    if "list" in structure:
        return [_build(s, leaves) for s in structure["list"]]
    if "dict" in structure:
        return {k: _build(s, leaves) for k, s in structure["dict"]}
    cls = _import(structure["class"])
    if "items" in structure:
        items = [_build(s, leaves) for s in structure["items"]]
        return cls(*items) if cls is not None else tuple(items)
    fields = {k: _build(s, leaves) for k, s in structure["fields"]}
    return cls(**fields) if cls is not None else fields


def _import(path: str) -> type | None:
    module, _, qualname = path.partition(":")
    try:
        value: Any = importlib.import_module(module)
        for part in qualname.split("."):
            value = getattr(value, part)
        return value
    except (ImportError, AttributeError):
        warnings.warn(f"model output type {path} cannot be imported here; returning its fields as a plain "
                      "dict/tuple", stacklevel=3)
        return None
