"""The structure of a torch model's outputs (tuple, list, dict, namedtuple, HF ModelOutput, nested), from the
exported program's pytree spec, as JSON-able data that the run manifest stores and the runtime rebuilds
(`pybuda.runtime.outputs.rebuild`). Leaves are numbered in the order of the graph's outputs."""
from __future__ import annotations

import collections
import itertools
from typing import Any, Iterator

from torch.utils import _pytree as pytree

from ..errors import UserTypeError


def output_structure(spec: pytree.TreeSpec) -> dict:
    """The structure of `spec` (an ExportedProgram's `call_spec.out_spec`):
        {"leaf": i}                                    the i-th output tensor
        {"tuple": [...]}, {"list": [...]}              sequences
        {"dict": [[key, structure], ...]}              dict or OrderedDict
        {"class": "module:qualname", "fields": [[key, structure], ...]}   a ModelOutput (or dataclass-like) type
        {"class": "module:qualname", "items": [...]}   a namedtuple"""
    return _encode(spec, itertools.count())


def without_leaves(structure: dict, removed: list[int]) -> dict:
    """`structure` without the leaves numbered in `removed` (outputs that no longer reach the host), the others
    numbered again in order; a container keeps its place, emptied if all its leaves go."""
    if "leaf" in structure:
        return {"leaf": structure["leaf"] - sum(r < structure["leaf"] for r in removed)}
    out = {}
    for key, value in structure.items():
        if key in ("tuple", "list", "items"):
            out[key] = [without_leaves(s, removed) for s in value if s.get("leaf") not in removed]
        elif key in ("dict", "fields"):
            out[key] = [[k, without_leaves(s, removed)] for k, s in value if s.get("leaf") not in removed]
        else:
            out[key] = value
    return out


def _encode(spec: pytree.TreeSpec, leaves: Iterator[int]) -> dict:
    if spec.is_leaf():
        return {"leaf": next(leaves)}
    children = [_encode(spec.child(i), leaves) for i in range(spec.num_children)]
    if spec.type in (tuple, list):
        return {spec.type.__name__: children}
    if _is_namedtuple(spec):
        cls = spec.context
        return {"class": f"{cls.__module__}:{cls.__qualname__}", "items": children}
    keys = _keys(spec)
    if keys is None:
        kind = getattr(spec.type, '__name__', spec.type)
        raise UserTypeError(f"model outputs of type {kind} (keys {spec.context!r}) are not supported; return tensors "
                            "in a tuple, list, dict with str or int keys, namedtuple or transformers ModelOutput")
    fields = [[k, c] for k, c in zip(keys, children)]
    if spec.type in (dict, collections.OrderedDict, collections.defaultdict):
        return {"dict": fields}
    return {"class": f"{spec.type.__module__}:{spec.type.__qualname__}", "fields": fields}


def _keys(spec: pytree.TreeSpec) -> list[Any] | None:
    context = spec.context
    if isinstance(context, (list, tuple)) and all(isinstance(k, (str, int)) for k in context):
        return list(context)
    return None


def _is_namedtuple(spec: pytree.TreeSpec) -> bool:
    return isinstance(spec.context, type) and issubclass(spec.context, tuple) and hasattr(spec.context, "_fields")
