"""Greedy decoding with a compiled decode step (`enable_link_past_cache_ios`, `pybuda.frontend.generation`): each
sequence fills the device's caches page by page from its prompt, then runs one step per new token, reading the
greedy token of the row of its last position. A call takes the page's token ids and first position (their
embeddings, looked up in the host part, cross to the device) and gives back each row's greedy token (two digits
per row where the device picks it: `frontend.generation._greedy_digits`). An encoder-decoder first runs its
encoder program once on the sequence's source (its cross-attention state written on the device), then decodes
from its first decoder token. A step decodes the compiled microbatch of sequences at once (each sample its own
caches); a batch runs a microbatch at a time, each from fresh device state (the last one filled up with copies
of its last sequence)."""
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
    rows: list[list[int]] = []
    batch = model.microbatch
    for first in range(0, sources.shape[0], batch):       # a microbatch of sequences at once
        chunk = sources[first:first + batch]
        real = chunk.shape[0]
        chunk = torch.cat([chunk, chunk[-1:].expand(batch - real, *chunk.shape[1:])]) if real < batch else chunk
        model.reset_state()
        source = () if start_token is None else (chunk,)
        if source:
            model(torch.zeros(batch, page, dtype=torch.long), torch.zeros(batch, 1), *source, programs=encode,
                  cache_write_index=0)      # a page index the call takes; the encoder's programs write no page
        prompts = chunk.tolist() if start_token is None else [[start_token]] * batch

        def step(ids: torch.Tensor, position: int, source=source) -> torch.Tensor:
            out = model(ids, torch.full((batch, 1), float(position)), *source, cache_write_index=position // page,
                        programs=decode)
            return _token_ids(out[0] if isinstance(out, (tuple, list)) else out, spec["token_base"])
        rows += _decode(step, page, prompts, max_new_tokens, set(stops))[:real]
    width = max(map(len, rows))
    pad = stops[0] if stops else 0
    return torch.tensor([row + [pad] * (width - len(row)) for row in rows], dtype=torch.long)


def check_step_start(spec: dict, start, page_index: int) -> None:
    """InputError unless a decode step's `start` input is, for every sequence of the microbatch, the first position
    of the page it writes (the step's mask counts whole pages; the sequences share the write index)."""
    expected = page_index * spec["page"]
    wrong = [float(first) for first in start.reshape(-1) if float(first) != expected]
    if wrong:
        raise InputError(f"decode step: start {wrong[0]:g} with cache_write_index {page_index}; legal: the first "
                         f"position of the page written, cache_write_index * {spec['page']} = {expected}, for "
                         "every sequence")


def generation_perf(model, parts: Sequence[PerfReport]) -> GenerationPerf:
    """The generation estimate of a decode step (`GenerationPerf`) from its programs' estimates (`parts`, in
    `model.program_names` order) at the compiled prompt and generation length and microbatch."""
    spec = model.manifest.generation
    encode, decode = _programs(model)
    cycles = {name: part.total_cycles for name, part in zip(model.program_names, parts)}
    host = {name: q for nl in model.netlists for name, q in nl.queues.items() if q.loc == "host"}
    step_queues = set().union(*(nl.queues_of(p) for nl in model.netlists for p in decode)) & set(host)
    pcie = model.microbatch * sum(math.prod(host[q].shape) * host[q].df.tile_bytes for q in step_queues)
    return GenerationPerf(spec["prompt_length"], spec["max_length"] - spec["prompt_length"], spec["page"],
                          parts[0].clock_hz, sum(cycles[p] for p in encode), sum(cycles[p] for p in decode), pcie,
                          model.microbatch)


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


def _decode(step, page: int, prompts: list[list[int]], new_tokens: int, stops: set[int]) -> list[list[int]]:
    """Greedy decoding of prompts of one length at once: `step(ids (batch, page), first position)` gives the greedy
    token of every row of every sequence's page; a sequence that produced a stop token ends there."""
    tokens, filled = [list(p) for p in prompts], 0       # filled: the pages the caches hold whole
    done = [False] * len(tokens)
    length = len(tokens[0])
    while length < len(prompts[0]) + new_tokens and not all(done):
        last = length - 1
        current = last // page
        for earlier in range(filled, current):    # a prompt's earlier pages, into the caches
            step(_page_ids(tokens, earlier, page), earlier * page)
        new = step(_page_ids(tokens, current, page), current * page)[:, last % page].tolist()
        filled = current + 1 if last % page == page - 1 else current
        for seq, token, finished in zip(tokens, new, done):
            if not finished:
                seq.append(int(token))
        done = [d or seq[-1] in stops for d, seq in zip(done, tokens)]
        length += 1
    return tokens


def _page_ids(tokens: list[list[int]], index: int, page: int) -> torch.Tensor:
    """Page `index` of each sequence (batch, page), positions past a sequence's last 0."""
    ids = torch.zeros(len(tokens), page, dtype=torch.long)
    for row, seq in zip(ids, tokens):
        chunk = seq[index * page:(index + 1) * page]
        row[:len(chunk)] = torch.tensor(chunk, dtype=torch.long)
    return ids
