"""`enable_link_past_cache_ios` for Hugging Face causal LMs: the model compiled as one decode step over a page of
PAGE positions, its key and value caches device state written one page per run (`loopback_outputs` of a page).

The step (`PagedStep`) takes the page's token ids (1, PAGE) and the first position of the page `start` (1, 1), and
per layer a key and a value cache (1, max_length, hidden): heads merged, every position the model may reach. It
attends from each row of the page to the cached positions before `start` (those from `start` on are masked: the
page being decoded is not cached yet) and causally within the page, and returns the greedy next token of every
row (1, PAGE) and, per layer, the page's keys and values (1, PAGE, hidden), which the device writes into the
caches at page `start // PAGE` (the call's `cache_write_index`). The mask and the positions are computed from
`start` by the compiled model (its host part ahead of the device, with the embedding lookups: the caller passes
ids and one number; the embeddings and the mask cross to the device each run). Each run recomputes the whole current
page (rows past the last token are padding whose results nobody reads), so a prompt fills the caches page by page
and decoding needs one run per token; `RuntimeModel.generate` drives it.

Families (`FAMILIES`, by `model_type`): GPT-2 and Llama (rotary positions, grouped-query attention); others are
refused naming them."""
from __future__ import annotations

import torch

from ..errors import UserInputError

PAGE = 32                      # positions per page: one tile of rows
STEP_INPUTS = ("ids", "start")  # the step's host inputs before the caches


class PagedStep(torch.nn.Module):
    """One decode step of a causal LM over a page (module docstring); a family gives the embedding, one layer and
    the head (`GPT2Step`, `LlamaStep`)."""

    def __init__(self, model: torch.nn.Module, max_length: int):
        super().__init__()
        self.model, self.max_length = model, max_length

    def forward(self, ids: torch.Tensor, start: torch.Tensor, *caches: torch.Tensor) -> tuple:
        positions = (start.reshape(1, 1) + torch.arange(PAGE).reshape(1, PAGE)).long()
        bias = _attention_bias(start, self.max_length)
        x, rotary = self.embed(ids, positions)
        pages = []
        for k, layer in enumerate(self.layers()):
            x, key, value = self.layer(k, layer, x, caches[2 * k], caches[2 * k + 1], bias, rotary)
            pages += [key, value]
        return (torch.argmax(self.logits(x), -1).float(), *pages)


class GPT2Step(PagedStep):
    """Hugging Face GPT-2 (`GPT2LMHeadModel`): learned positions, fused QKV, LayerNorm before each half."""

    @staticmethod
    def cache_width(config) -> int:
        return config.n_embd

    @staticmethod
    def positions(config) -> int:
        return config.n_positions

    def layers(self):
        return self.model.transformer.h

    def embed(self, ids, positions):
        lm = self.model.transformer
        return lm.wte(ids) + lm.wpe(positions), None

    def layer(self, k, block, x, keys, values, bias, rotary):
        config, width = self.model.config, self.model.config.n_embd
        q, key, value = block.attn.c_attn(block.ln_1(x)).split(width, dim=2)
        head = width // config.n_head
        scaling = (head ** -0.5 if config.scale_attn_weights else 1.0) / \
            (k + 1 if config.scale_attn_by_inverse_layer_idx else 1)
        attended = _attend(_heads(q, config.n_head), keys, key, values, value, config.n_head, scaling, bias)
        x = x + block.attn.c_proj(attended)
        return x + block.mlp(block.ln_2(x)), key, value

    def logits(self, x):
        return self.model.lm_head(self.model.transformer.ln_f(x))


class LlamaStep(PagedStep):
    """Hugging Face Llama (`LlamaForCausalLM`): rotary positions, grouped-query attention (the caches hold the
    key/value heads only), RMSNorm before each half."""

    @staticmethod
    def cache_width(config) -> int:
        return config.num_key_value_heads * _head_dim(config)

    @staticmethod
    def positions(config) -> int:
        return config.max_position_embeddings

    def layers(self):
        return self.model.model.layers

    def embed(self, ids, positions):
        x = self.model.model.embed_tokens(ids)
        return x, self.model.model.rotary_emb(x, positions)

    def layer(self, k, layer, x, keys, values, bias, rotary):
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
        config, attn = self.model.config, layer.self_attn
        heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
        h = layer.input_layernorm(x)
        q, key = apply_rotary_pos_emb(_heads(attn.q_proj(h), heads), _heads(attn.k_proj(h), kv_heads), *rotary)
        key = key.transpose(1, 2).reshape(1, PAGE, -1)          # heads merged again, as the cache holds them
        value = attn.v_proj(h)
        x = x + attn.o_proj(_attend(q, keys, key, values, value, kv_heads, attn.scaling, bias))
        return x + layer.mlp(layer.post_attention_layernorm(x)), key, value

    def logits(self, x):
        return self.model.lm_head(self.model.model.norm(x))


FAMILIES = {"gpt2": GPT2Step, "llama": LlamaStep}    # model_type -> its step


def _head_dim(config) -> int:
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


def _attend(q, keys, key, values, value, kv_heads: int, scaling: float, bias) -> torch.Tensor:
    """Attention of a page's query heads q (1, heads, PAGE, d) over the cached positions and the page's own (each
    (1, positions, kv_heads * d), heads merged): a group of query heads sharing a key/value head one under the
    other, so the key/value heads are never repeated; (1, PAGE, heads * d)."""
    _, heads, _, d = q.shape
    group = heads // kv_heads
    keys = _heads(torch.cat([keys, key], dim=1), kv_heads)
    values = _heads(torch.cat([values, value], dim=1), kv_heads)
    scores = q.reshape(1, kv_heads, group * PAGE, d) @ keys.transpose(-2, -1) * scaling + bias.repeat(group, 1)
    attended = torch.softmax(scores, -1) @ values
    return attended.reshape(1, heads, PAGE, d).transpose(1, 2).reshape(1, PAGE, heads * d)


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
    family = FAMILIES.get(kind)
    if family is None or not hasattr(model, "lm_head"):
        raise UserInputError(f"enable_link_past_cache_ios: {type(model).__name__} (model_type {kind!r}) has no paged "
                             "decode step here; supported: Hugging Face causal LMs (with their LM head) of "
                             f"model_type {', '.join(map(repr, FAMILIES))}")
    limit = family.positions(config)
    length = limit if max_length is None else max_length
    if length % PAGE or not PAGE <= length <= limit:
        raise UserInputError(f"generation_max_length {length}: legal: a multiple of {PAGE} up to the model's "
                             f"{limit} positions")
    step = family(model, length).eval()
    caches = [torch.zeros(1, length, family.cache_width(config)) for _ in range(2 * config.num_hidden_layers)]
    sample = (torch.zeros(1, PAGE, dtype=torch.long), torch.zeros(1, 1), *caches)
    return step, sample, {f"caches_{k}": k + 1 for k in range(len(caches))}
