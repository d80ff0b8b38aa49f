"""Checks of the inputs of every call of a compiled (or loaded) model against the run manifest: how many, each
one's shape (the leading dim is the compiled microbatch) and dtype family (float, int, bool)."""
from __future__ import annotations

import numpy as np
import torch

from ..codegen.manifest import ModelInput, RunManifest
from ..errors import UserInputError
from ..module import to_numpy


class InputError(UserInputError):
    """Inputs of a call that do not match what the model was compiled for; the message names the input, what was
    given and what is expected."""


def checked_inputs(manifest: RunManifest, inputs: tuple) -> dict[str, np.ndarray]:
    """The inputs by name as float32 arrays; InputError unless they match the manifest's model inputs."""
    specs = manifest.inputs
    if len(inputs) != len(specs):
        raise InputError(f"model {manifest.model!r} takes {len(specs)} input(s) "
                         f"({', '.join(_describe(s) for s in specs)}), got {len(inputs)}")
    for position, (spec, value) in enumerate(zip(specs, inputs)):
        _check_one(manifest, position, spec, value)
    return {spec.name: to_numpy(value) for spec, value in zip(specs, inputs)}


def _check_one(manifest: RunManifest, position: int, spec: ModelInput, value) -> None:
    where = f"model {manifest.model!r}: input {position} ({spec.name!r})"
    expected = f"expected {_describe(spec)}"
    if not isinstance(value, (torch.Tensor, np.ndarray)):
        raise InputError(f"{where} is {type(value).__name__}, {expected} (a torch tensor or numpy array)")
    shape, dtype = tuple(value.shape), _dtype_name(value)
    if _family(dtype) != _family(spec.dtype):
        raise InputError(f"{where} has dtype {dtype} ({_family(dtype)}), {expected} ({_family(spec.dtype)} "
                         "dtypes are accepted)")
    if shape != spec.shape:
        rule = (f"the leading dim is the microbatch: it must be {manifest.microbatch} (compile with that many "
                "samples to run another microbatch)" if shape[1:] == spec.shape[1:] and shape else
                "the dims after the microbatch must be the compiled ones exactly")
        raise InputError(f"{where} has shape {shape}, {expected}; {rule}")


def _describe(spec: ModelInput) -> str:
    return f"{spec.name}: shape {spec.shape} {spec.dtype}"


def _dtype_name(value: torch.Tensor | np.ndarray) -> str:
    return str(value.dtype).removeprefix("torch.")


def _family(dtype: str) -> str:
    """'bool', 'int', 'float' or 'complex' for a torch or numpy dtype name."""
    if dtype == "bool":
        return "bool"
    if dtype.startswith(("int", "uint", "long", "short")):
        return "int"
    if dtype.startswith("complex"):
        return "complex"
    return "float"
