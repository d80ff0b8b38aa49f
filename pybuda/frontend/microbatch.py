"""Is the leading dim of the sample inputs a microbatch? The compiler builds a graph of one sample and runs it
once per sample, which is right only if the model treats samples independently. `check_per_sample` runs the
torch model on the first samples of the batch together and on each alone (vmapped) and compares: an output that
is not the
per-sample outputs stacked (`x - x.mean(0)`, `x * x[0:1]`, `x.sum(0)`, an output without the batch dim) is a
`MicrobatchError` naming the output and the first submodule whose output mixes samples."""
from __future__ import annotations

import contextlib
import warnings
from typing import Iterator

import numpy as np
import torch
from torch.utils import _pytree as pytree

from ..errors import UserInputError

RTOL, ATOL = 1e-3, 1e-4   # batched and per-sample kernels may round differently; mixing samples is far larger
REMEDY = ("compile with a microbatch of 1 (sample inputs with a leading dim of 1), or make the model treat dim 0 "
          "as independent samples")


class MicrobatchError(UserInputError):
    """The model mixes the samples of its leading (microbatch) dim; the message names where and what to do."""


CHECKED_SAMPLES = 2   # a model that mixes samples mixes any two; a larger sub-batch only costs more forward passes


def check_per_sample(model: torch.nn.Module, sample_inputs: tuple[torch.Tensor, ...]) -> None:
    """MicrobatchError unless every output of `model` on the first `CHECKED_SAMPLES` samples is its outputs on
    each of them alone, stacked along dim 0 (the whole microbatch would cost two forward passes of it: half a
    minute for BERT-base at 128 on two cores). A microbatch of 1 is always per sample (nothing to check)."""
    microbatch = int(sample_inputs[0].shape[0])
    if microbatch == 1:
        return
    sample_inputs = tuple(x[:CHECKED_SAMPLES] for x in sample_inputs)
    n = int(sample_inputs[0].shape[0])
    whole = _outputs(model, sample_inputs)
    samples = _per_sample_outputs(model, sample_inputs, len(whole))
    checked = f" (checked on its first {n} samples)" if n < microbatch else ""
    for k, out in enumerate(whole):
        problem = _mixing(out, [s[k] for s in samples], n)
        if problem:
            where = _first_mixing_module(model, sample_inputs)
            raise MicrobatchError(f"the leading dim of the sample inputs ({microbatch}) is not a microbatch{checked}: "
                                  f"model output {k} {problem}{where}; {REMEDY}")


def _outputs(model: torch.nn.Module, inputs: tuple) -> list[torch.Tensor]:
    with torch.no_grad():
        out = model(*inputs)
    return [o for o in pytree.tree_leaves(out) if isinstance(o, torch.Tensor)]


def _per_sample_outputs(model: torch.nn.Module, inputs: tuple, count: int) -> list[list[torch.Tensor]]:
    """The outputs of each sample run alone (leading dim 1): in one batched pass with `torch.func.vmap` over
    samples (a per-sample view of the model), or one call per sample where vmap cannot run the model."""
    def one(*sample):
        return tuple(_outputs(model, tuple(x.unsqueeze(0) for x in sample)))
    try:
        with torch.no_grad(), warnings.catch_warnings():
            # ops without a batching rule run sample by sample inside vmap, which torch reports as a slowdown
            warnings.filterwarnings("ignore", message="There is a performance drop because we have not yet")
            stacked = torch.func.vmap(one, randomness="error")(*inputs)
        if len(stacked) == count:
            return [[o[i] for o in stacked] for i in range(int(inputs[0].shape[0]))]
    except Exception:  # noqa: BLE001  (any op vmap has no batching rule for: run the samples one by one)
        pass
    return [_outputs(model, tuple(x[i:i + 1] for x in inputs)) for i in range(int(inputs[0].shape[0]))]


def _mixing(whole: torch.Tensor, per_sample: list[torch.Tensor], n: int) -> str:
    """Why `whole` is not `per_sample` stacked along dim 0 ('' if it is)."""
    if whole.dim() == 0 or whole.shape[0] != n:
        return f"has shape {tuple(whole.shape)}, not indexed by the {n} samples along dim 0"
    if any(tuple(p.shape) != (1, *whole.shape[1:]) for p in per_sample):
        return f"has shape {tuple(whole.shape)} for {n} samples but {tuple(per_sample[0].shape)} for one sample"
    a = whole.detach().double().numpy()
    b = np.concatenate([p.detach().double().numpy() for p in per_sample])
    if np.allclose(a, b, rtol=RTOL, atol=ATOL * max(1.0, float(np.abs(b).max(initial=0.0))), equal_nan=True):
        return ""
    worst = int(np.argmax(np.abs(a - b).reshape(n, -1).max(axis=1)))
    return (f"mixes samples: its value for sample {worst} differs from that sample run alone (max abs difference "
            f"{np.abs(a - b).max():.3g})")


def _first_mixing_module(model: torch.nn.Module, inputs: tuple) -> str:
    """', first in submodule <name> (<type>)' for the first submodule (in call order) whose outputs mix samples;
    the whole model when only its own forward does ('' if none is found)."""
    n = int(inputs[0].shape[0])
    with _recording(model) as whole:
        _outputs(model, inputs)
    per_sample = []
    for i in range(n):
        with _recording(model) as calls:
            _outputs(model, tuple(x[i:i + 1] for x in inputs))
        per_sample.append(calls)
    for j, (name, module, outs) in enumerate(whole):
        if all(j < len(s) for s in per_sample) and any(
                _mixing(o, [s[j][2][k] for s in per_sample], n) for k, o in enumerate(outs)
                if all(k < len(s[j][2]) for s in per_sample)):
            return f", first in {f'submodule {name!r}' if name else 'the model itself'} ({type(module).__name__})"
    return ""


@contextlib.contextmanager
def _recording(model: torch.nn.Module) -> Iterator[list[tuple[str, torch.nn.Module, list[torch.Tensor]]]]:
    """Record (name, module, output tensors) of every module call, in the order the calls return."""
    calls: list = []
    hooks = [m.register_forward_hook(lambda mod, args, out, name=name: calls.append(
        (name, mod, [o for o in pytree.tree_leaves(out) if isinstance(o, torch.Tensor)])))
        for name, m in model.named_modules()]
    try:
        yield calls
    finally:
        for h in hooks:
            h.remove()
