"""`enable_link_past_cache_ios` for Hugging Face causal LMs: the model compiled as one decode step over a page of
PAGE positions, its key and value caches device state written one page per run (`loopback_outputs` of a page).

The step (`PagedStep`) takes the page's token ids (1, PAGE) and the first position of the page `start` (1, 1), and
per layer a key and a value cache (1, max_length, hidden): heads merged, every position the model may reach. It
attends from each row of the page to the cached positions before `start` (those from `start` on are masked: the
page being decoded is not cached yet) and causally within the page, and returns the greedy next token of every
row (1, PAGE) and, per layer, the page's keys and values (1, PAGE, hidden), which the device writes into the
caches at page `start // PAGE` (the call's `cache_write_index`). The mask and the positions are computed from
`start` by the compiled model itself: the host passes ids and one number. Each run recomputes the whole current
page (rows past the last token are padding whose results nobody reads), so a prompt fills the caches page by page
and decoding needs one run per token; `RuntimeModel.generate` drives it.

Families: GPT-2 (`model_type` "gpt2"). Others are refused naming the supported ones."""
from __future__ import annotations

import math

import torch

from ..errors import UserInputError

PAGE = 32                      # positions per page: one tile of rows
STEP_INPUTS = ("ids", "start")  # the step's host inputs before the caches


class PagedStep(torch.nn.Module):
    """One decode step of a GPT-2 (`transformers.GPT2LMHeadModel`) over a page (module docstring)."""

    def __init__(self, model: torch.nn.Module, max_length: int):
        super().__init__()
        self.model, self.max_length = model, max_length

    def forward(self, ids: torch.Tensor, start: torch.Tensor, *caches: torch.Tensor) -> tuple:
        lm = self.model.transformer
        heads, width = self.model.config.n_head, self.model.config.n_embd
        positions = (start.reshape(1, 1) + torch.arange(PAGE).reshape(1, PAGE)).long()
        x = lm.wte(ids) + lm.wpe(positions)
        bias = _attention_bias(start, self.max_length)
        pages = []
        for k, block in enumerate(lm.h):
            q, key, value = block.attn.c_attn(block.ln_1(x)).split(width, dim=2)
            pages += [key, value]
            keys = _heads(torch.cat([caches[2 * k], key], dim=1), heads)
            values = _heads(torch.cat([caches[2 * k + 1], value], dim=1), heads)
            scores = _heads(q, heads) @ keys.transpose(-2, -1) / math.sqrt(width // heads) + bias
            attended = (torch.softmax(scores, -1) @ values).transpose(1, 2).reshape(1, PAGE, width)
            x = x + block.attn.c_proj(attended)
            x = x + block.mlp(block.ln_2(x))
        logits = self.model.lm_head(lm.ln_f(x))
        return (torch.argmax(logits, -1).float(), *pages)


def _heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """(1, positions, hidden) as (1, heads, positions, hidden / heads)."""
    return x.reshape(1, x.shape[1], heads, -1).transpose(1, 2)


def _attention_bias(start: torch.Tensor, max_length: int) -> torch.Tensor:
    """(PAGE, max_length + PAGE): 0 where a row of the page may attend (cached positions before `start`, the page's
    own up to the row), a large negative number elsewhere."""
    cached = (torch.arange(max_length).reshape(1, max_length) < start.reshape(1, 1)).float().expand(PAGE, max_length)
    keep = torch.cat([cached, torch.tril(torch.ones(PAGE, PAGE))], dim=-1)
    return (1.0 - keep) * -1e4


def paged_decoder(model: torch.nn.Module, max_length: int | None) -> tuple[torch.nn.Module, tuple, dict[str, int]]:
    """The decode step of a Hugging Face causal LM, its sample inputs (the caches' starting value: zeros) and the
    `loopback_outputs` linking each cache to the page it writes; UserInputError for a model it cannot step."""
    config = getattr(model, "config", None)
    kind = getattr(config, "model_type", None)
    if kind != "gpt2":
        raise UserInputError(f"enable_link_past_cache_ios: {type(model).__name__} (model_type {kind!r}) has no paged "
                             "decode step here; supported: Hugging Face GPT-2 (model_type 'gpt2')")
    limit = config.n_positions
    length = limit if max_length is None else max_length
    if length % PAGE or not PAGE <= length <= limit:
        raise UserInputError(f"generation_max_length {length}: legal: a multiple of {PAGE} up to the model's "
                             f"{limit} positions")
    step = PagedStep(model, length).eval()
    caches = [torch.zeros(1, length, config.n_embd) for _ in range(2 * config.n_layer)]
    sample = (torch.zeros(1, PAGE, dtype=torch.long), torch.zeros(1, 1), *caches)
    return step, sample, {f"caches_{k}": k + 1 for k in range(len(caches))}
