"""Greedy decoding with a compiled decode step (`enable_link_past_cache_ios`, `pybuda.frontend.generation`): each
sequence fills the device's caches page by page from its prompt, then runs one step per new token, reading the
greedy token of the row of its last position. A call takes the page's token ids and first position (their
embeddings, looked up in the host part, cross to the device) and gives back each row's greedy token (two digits
per row where the device picks it: `frontend.generation._greedy_digits`). An encoder-decoder first runs its encoder program once on the sequence's
source (its cross-attention state written on the device), then decodes from its first decoder token. Sequences of
a batch run one after the other, each from fresh device state."""
from __future__ import annotations

import math
from typing import Iterable, Sequence

import torch

from ..backend_sim.timing import PerfReport
from ..codegen.programs import WRITE_INDEX_PARAM
from ..errors import UsageError
from ..netlist.model import Param
from .inputs import InputError
from .perf import GenerationPerf


def generate(model, input_ids, max_new_tokens: int, eos_token_id: int | Iterable[int] | None = None
             ) -> torch.Tensor:
    """The prompts (batch, n) of a causal LM followed by up to `max_new_tokens` greedy tokens each, as Hugging Face
    `generate(do_sample=False)` returns them (of an encoder-decoder, whose `input_ids` are the sources (batch, ...),
    its first decoder token followed by the new ones): a sequence that produced an `eos_token_id` stops, and is
    padded with its first one to the batch's length. `model` is a RuntimeModel. UsageError for a model that is no
    decode step, InputError for prompts that do not fit its caches."""
    spec = model.manifest.generation
    if spec is None or not model.pages:
        raise UsageError("generate needs a compiled decode step: compile a Hugging Face causal LM or "
                         "encoder-decoder with CompilerConfig(enable_link_past_cache_ios=True)")
    page, start_token = spec["page"], spec["decoder_start"]
    stops = [eos_token_id] if isinstance(eos_token_id, int) else list(eos_token_id or ())
    sources = torch.as_tensor(input_ids)
    if start_token is None:
        sources = sources.long()
        sources = sources.reshape(1, -1) if sources.dim() == 1 else sources
    prompt_length = 1 if start_token is not None else sources.shape[-1]
    if sources.dim() < 2 or not prompt_length or prompt_length + max_new_tokens > model.pages * page:
        what, legal = (("prompts", "(batch, n) ids with n >= 1 and n") if start_token is None else
                       ("sources", "a batch of sources and 1"))
        raise InputError(f"generate: {what} of shape {tuple(sources.shape)} and max_new_tokens {max_new_tokens}: "
                         f"legal: {legal} + max_new_tokens <= {model.pages * page}, the positions the compiled "
                         "caches hold (generation_max_length)")
    encode, decode = _programs(model)
    rows = []
    for k in range(sources.shape[0]):
        model.reset_state()
        source = () if start_token is None else (sources[k:k + 1],)
        if source:
            model(torch.zeros(1, page, dtype=torch.long), torch.zeros(1, 1), *source, programs=encode,
                  cache_write_index=0)      # a page index the call takes; the encoder's programs write no page
        prompt = sources[k].tolist() if start_token is None else [start_token]

        def step(ids: torch.Tensor, first: int) -> torch.Tensor:
            out = model(ids, torch.tensor([[float(first)]]), *source, cache_write_index=first // page,
                        programs=decode)
            return _token_ids(out[0] if isinstance(out, (tuple, list)) else out, spec["token_base"])
        rows.append(_decode(step, page, prompt, max_new_tokens, set(stops)))
    width = max(map(len, rows))
    pad = stops[0] if stops else 0
    return torch.tensor([row + [pad] * (width - len(row)) for row in rows], dtype=torch.long)


def check_step_start(spec: dict, start, page_index: int) -> None:
    """InputError unless a decode step's `start` input is the first position of the page it writes (the step's
    mask counts whole pages)."""
    first = float(start.reshape(-1)[0])
    if first != page_index * spec["page"]:
        raise InputError(f"decode step: start {first:g} with cache_write_index {page_index}; legal: the first "
                         f"position of the page written, cache_write_index * {spec['page']} = "
                         f"{page_index * spec['page']}")


def generation_perf(model, parts: Sequence[PerfReport]) -> GenerationPerf:
    """The generation estimate of a decode step (`GenerationPerf`) from its programs' estimates (`parts`, in
    `model.program_names` order) at the compiled prompt and generation length."""
    spec = model.manifest.generation
    encode, decode = _programs(model)
    cycles = {name: part.total_cycles for name, part in zip(model.program_names, parts)}
    host = {name: q for nl in model.netlists for name, q in nl.queues.items() if q.loc == "host"}
    step_queues = set().union(*(nl.queues_of(p) for nl in model.netlists for p in decode)) & set(host)
    pcie = sum(math.prod(host[q].shape) * host[q].df.tile_bytes for q in step_queues)
    return GenerationPerf(spec["prompt_length"], spec["max_length"] - spec["prompt_length"], spec["page"],
                          parts[0].clock_hz, sum(cycles[p] for p in encode), sum(cycles[p] for p in decode), pcie)


def _programs(model) -> tuple[list[str], list[str]]:
    """The programs run once per sequence (an encoder's: they write no page) and those run every step."""
    decode = [p.name for nl in model.netlists for p in nl.programs
              if any(isinstance(i, Param) and WRITE_INDEX_PARAM in i.names for i in p.instructions)]
    return [p for p in model.program_names if p not in decode], decode


def _token_ids(tokens: torch.Tensor, base: int | None) -> torch.Tensor:
    """The step's greedy token of each row (1, page): given as indices (base None), or as (high, low) digits of
    that base."""
    if base is None:
        return tokens.long()
    digits = tokens.round().long()
    return digits[..., 0] * base + digits[..., 1]


def _decode(step, page: int, prompt: list[int], new_tokens: int, stops: set[int]) -> list[int]:
    tokens, filled = list(prompt), 0          # filled: the pages the caches hold whole
    while len(tokens) < len(prompt) + new_tokens:
        last = len(tokens) - 1
        current = last // page
        for earlier in range(filled, current):    # a prompt's earlier pages, into the caches
            step(_page_ids(tokens, earlier, page), earlier * page)
        token = int(step(_page_ids(tokens, current, page), current * page)[0, last % page])
        filled = current + 1 if last % page == page - 1 else current
        tokens.append(token)
        if token in stops:
            break
    return tokens


def _page_ids(tokens: list[int], index: int, page: int) -> torch.Tensor:
    """Page `index` of `tokens` (1, page), positions past the last 0."""
    ids = torch.zeros(1, page, dtype=torch.long)
    chunk = tokens[index * page:(index + 1) * page]
    ids[0, :len(chunk)] = torch.tensor(chunk)
    return ids
