"""Greedy decoding with a compiled decode step (`enable_link_past_cache_ios`, `pybuda.frontend.generation`): each
sequence fills the device's caches page by page from its prompt, then runs one step per new token, reading the
greedy token of the row of its last position; only token ids and the page's first position cross to the device,
only the page's token ids come back. Sequences of a batch run one after the other, each from empty caches."""
from __future__ import annotations

from typing import Callable, Iterable

import torch

from ..errors import UsageError
from ..frontend.generation import PAGE, STEP_INPUTS
from .inputs import InputError

Step = Callable[..., object]   # (ids (1, PAGE), start (1, 1), cache_write_index=page) -> next ids per row


def generate(step: Step, input_names: list[str], pages: int, reset: Callable[[], None], input_ids,
             max_new_tokens: int, eos_token_id: int | Iterable[int] | None = None) -> torch.Tensor:
    """The prompts (batch, n) followed by up to `max_new_tokens` greedy tokens each, as Hugging Face
    `generate(do_sample=False)` returns them: a sequence that produced an `eos_token_id` stops, and is padded with
    its first one to the batch's length. UsageError for a model that is no decode step, InputError for prompts
    that do not fit its caches."""
    if tuple(input_names[:len(STEP_INPUTS)]) != STEP_INPUTS or not pages:
        raise UsageError("generate needs a compiled decode step: compile a Hugging Face causal LM with "
                         "CompilerConfig(enable_link_past_cache_ios=True)")
    prompts = torch.as_tensor(input_ids).long()
    prompts = prompts.reshape(1, -1) if prompts.dim() == 1 else prompts
    stops = [eos_token_id] if isinstance(eos_token_id, int) else list(eos_token_id or ())
    if prompts.dim() != 2 or not prompts.shape[1] or prompts.shape[1] + max_new_tokens > pages * PAGE:
        raise InputError(f"generate: prompts of shape {tuple(prompts.shape)} and max_new_tokens {max_new_tokens}: "
                         f"legal: (batch, n) ids with n >= 1 and n + max_new_tokens <= {pages * PAGE}, the "
                         "positions the compiled caches hold (generation_max_length)")
    rows = []
    for prompt in prompts.tolist():
        reset()
        rows.append(_decode(step, prompt, max_new_tokens, set(stops)))
    width = max(map(len, rows))
    pad = stops[0] if stops else 0
    return torch.tensor([row + [pad] * (width - len(row)) for row in rows], dtype=torch.long)


def _decode(step: Step, prompt: list[int], new_tokens: int, stops: set[int]) -> list[int]:
    tokens, filled = list(prompt), 0          # filled: the pages the caches hold whole
    while len(tokens) < len(prompt) + new_tokens:
        last = len(tokens) - 1
        page = last // PAGE
        for earlier in range(filled, page):    # a prompt's earlier pages, into the caches
            _run(step, tokens, earlier)
        token = int(_run(step, tokens, page)[0, last % PAGE])
        filled = page + 1 if last % PAGE == PAGE - 1 else page
        tokens.append(token)
        if token in stops:
            break
    return tokens


def _run(step: Step, tokens: list[int], page: int) -> torch.Tensor:
    """The step on page `page` of `tokens` (positions past the last are 0): the greedy token of every row."""
    ids = torch.zeros(1, PAGE, dtype=torch.long)
    chunk = tokens[page * PAGE:(page + 1) * PAGE]
    ids[0, :len(chunk)] = torch.tensor(chunk)
    out = step(ids, torch.tensor([[float(page * PAGE)]]), cache_write_index=page)
    return (out[0] if isinstance(out, (tuple, list)) else out).long()
