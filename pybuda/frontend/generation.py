"""`enable_link_past_cache_ios` for Hugging Face causal LMs and encoder-decoders: the model compiled as one decode
step over a page of PAGE positions, its key and value caches device state written one page per run
(`loopback_outputs` of a page).

The step (`PagedStep`) takes the page's token ids (1, PAGE) and the first position of the page `start` (1, 1), a
page boundary, and per layer a key and a value cache (1, max_length, hidden): heads merged, every position the
model may reach. It attends from each row of the page to the cached positions before `start` (those from `start`
on are masked: the page being decoded is not cached yet) and causally within the page, and returns the greedy next
token of every row and, per layer, the page's keys and values (1, PAGE, hidden), which the device writes into the
caches at page `start // PAGE` (the call's `cache_write_index`). The mask (and T5's relative position bias) is
computed from `start` on the device, in whole numbers of pages (exact in a 16-bit format, as positions are not);
the embedding lookups run in the compiled model's host part. The greedy token is picked on the device and
returned as two base-DIGIT_BASE digits (1, PAGE, 2) (`_greedy_digits`), or, where the device format cannot hold
them exactly, as indices (1, PAGE) picked on the host. Each run recomputes the whole current page (rows past the
last token are padding whose results nobody reads), so a prompt fills the caches page by page and decoding needs
one run per token; `RuntimeModel.generate` drives it.

An encoder-decoder's step (`EncoderDecoderStep`) also takes the source and holds the encoder, which writes every
layer's cross-attention keys and values whole into device state; it compiles to a program of its own.

Families (`FAMILIES`, by `model_type`): GPT-2, Llama (rotary positions, grouped-query attention), Falcon, T5 (and
FLAN-T5) and Whisper; others are refused naming them."""
from __future__ import annotations

import math
import warnings

import torch

from ..dataformat import DataFormat
from ..errors import UserInputError

PAGE = 32                      # positions per page: one tile of rows
DIGIT_BASE = 256               # the greedy token crosses as two digits of this base (`_greedy_digits`)


class PagedStep(torch.nn.Module):
    """One decode step of a causal LM over a page (module docstring); a family gives the embedding, one layer and
    what the head reads (`head_input`: the final norm), the step applies the model's head (`HEAD`) over a padded
    vocabulary (`_padded_vocab`) (`GPT2Step`, `LlamaStep`, ...)."""

    cross = False          # an encoder-decoder (`EncoderDecoderStep`)
    HEAD = "lm_head"       # the model's attribute holding its LM head

    def __init__(self, model: torch.nn.Module, max_length: int, prompt_length: int = 1,
                 decoder_start: int | None = None, device_argmax: bool = True, narrow_exponent: bool = False):
        super().__init__()
        self.model, self.max_length, self.prompt_length = model, max_length, prompt_length
        self.decoder_start = decoder_start     # an encoder-decoder's first decoder token
        self.device_argmax = device_argmax     # the greedy token as two digits (`_greedy_digits`), else an index
        self.narrow_exponent = narrow_exponent   # the device format's largest value is below 2^42 (Float16)
        head = getattr(model, self.HEAD)
        vocab = head.weight.shape[0]
        padded = _padded_vocab(vocab)
        with torch.no_grad():     # the head over a padded vocabulary (`_padded_vocab`): padded tokens never win
            weight = torch.cat([head.weight, head.weight.new_zeros(padded - vocab, head.weight.shape[1])])
            bias = torch.cat([head.bias if head.bias is not None else head.weight.new_zeros(vocab),
                              head.weight.new_full((padded - vocab,), -1e4)])
        self.register_buffer("head_weight", weight, persistent=False)
        self.register_buffer("head_bias", bias, persistent=False)

    def forward(self, ids: torch.Tensor, start: torch.Tensor, *caches: torch.Tensor) -> tuple:
        return self.decode(ids, start, caches)

    def decode(self, ids: torch.Tensor, start: torch.Tensor, caches: tuple) -> tuple:
        """The greedy token of each row of the page and each layer's page of keys and values; `caches` holds each
        layer's caches in turn (self-attention keys, values, then an encoder-decoder's cross-attention ones)."""
        positions = (start.reshape(1, 1) + torch.arange(PAGE).reshape(1, PAGE)).long()
        bias = self.bias(start, positions)
        x, rotary = self.embed(ids, positions)
        per_layer = len(caches) // len(self.layers())
        pages = []
        for k, layer in enumerate(self.layers()):
            x, key, value = self.layer(k, layer, x, caches[per_layer * k:per_layer * (k + 1)], bias, rotary)
            pages += [key, value]
        logits = torch.nn.functional.linear(self.head_input(x), self.head_weight, self.head_bias)
        token = (_greedy_digits(logits, 3 if self.narrow_exponent else 1) if self.device_argmax else
                 torch.argmax(logits, -1).float())
        return (token, *pages)

    def bias(self, start: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """What each row's attention scores over the cached positions and over the page's own add: the mask."""
        return _attention_bias(start, self.max_length)

    @property
    def generation(self) -> dict:
        """How `generate` drives the step (kept in the run manifest): the page, an encoder-decoder's first decoder
        token, the lengths the estimate takes (the compiled prompt's, the caches') and the base of the greedy
        token's two digits (None: the step returns token indices)."""
        return {"page": PAGE, "decoder_start": self.decoder_start, "prompt_length": self.prompt_length,
                "max_length": self.max_length, "token_base": DIGIT_BASE if self.device_argmax else None}


class EncoderDecoderStep(PagedStep):
    """A decode step of an encoder-decoder over a page, with the encoder: its input (`source`) encoded and every
    layer's cross-attention keys and values written whole into device state. The two parts share no values, so
    they compile (`compile_subgraphs`) to two programs of one netlist: the encoder's, run once per sequence, and the
    decode step's, which reads the cross-attention state each step (`runtime/generate.py`)."""

    cross = True

    def forward(self, ids: torch.Tensor, start: torch.Tensor, source: torch.Tensor, *caches: torch.Tensor) -> tuple:
        encoded = self.encode(source)
        cross = [kv for layer in self.layers() for kv in self.cross_kv(layer, encoded)]
        per_layer = [c for k in range(len(self.layers())) for c in
                     (caches[2 * k], caches[2 * k + 1], caches[len(cross) + 2 * k], caches[len(cross) + 2 * k + 1])]
        return (*self.decode(ids, start, tuple(per_layer)), *cross)


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

    def layer(self, k, block, x, caches, bias, rotary):
        (keys, values), config, width = caches, self.model.config, self.model.config.n_embd
        q, key, value = block.attn.c_attn(block.ln_1(x)).split(width, dim=2)
        head = width // config.n_head
        scaling = (head ** -0.5 if config.scale_attn_weights else 1.0) / \
            (k + 1 if config.scale_attn_by_inverse_layer_idx else 1)
        attended = _attend(_heads(q, config.n_head), keys, key, values, value, config.n_head, scaling, bias)
        x = x + block.attn.c_proj(attended)
        return x + block.mlp(block.ln_2(x)), key, value

    def head_input(self, x):
        return self.model.transformer.ln_f(x)


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

    def layer(self, k, layer, x, caches, bias, rotary):
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb
        (keys, values), config, attn = caches, self.model.config, layer.self_attn
        heads, kv_heads = config.num_attention_heads, config.num_key_value_heads
        h = layer.input_layernorm(x)
        q, key = apply_rotary_pos_emb(_heads(attn.q_proj(h), heads), _heads(attn.k_proj(h), kv_heads), *rotary)
        key = key.transpose(1, 2).reshape(1, PAGE, -1)          # heads merged again, as the cache holds them
        value = attn.v_proj(h)
        x = x + attn.o_proj(_attend(q, keys, key, values, value, kv_heads, attn.scaling, bias))
        return x + layer.mlp(layer.post_attention_layernorm(x)), key, value

    def head_input(self, x):
        return self.model.model.norm(x)


class FalconStep(PagedStep):
    """Hugging Face Falcon (`FalconForCausalLM`, the Falcon-7B/40B-style layer): fused QKV with one shared
    key/value head (multi-query) or a key/value head per query head, rotary positions, attention and MLP in parallel
    from one LayerNorm (or one after the other). ALiBi and the new decoder architecture are refused.

    A multi-query model whose width has an awkward tile count runs at a padded width (`_padded_width`), as the
    legacy Falcon-7B demo did by hand (4,544 -> 4,608): Falcon-7B's 4,544 columns are 142 = 2 x 71 tiles, and the
    balancer gives an op only grids that divide its tiles, so every matmul over them would take 2 cores. The
    padding is zeros (weights and norms), one extra query head whose output the padded dense weight drops, and
    LayerNorms over the real width: the same numbers up to rounding."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        config = self.model.config
        width = _padded_width(config) if config.multi_query else config.hidden_size
        self.padded = torch.nn.ModuleList(_PaddedFalconLayer(layer, config, width)
                                          for layer in self.layers()) if width != config.hidden_size else None
        if self.padded is not None:
            with torch.no_grad():
                self.head_weight = _pad(self.head_weight, width)
                ln_f = self.model.transformer.ln_f
                self.register_buffer("ln_f_weight", _pad(ln_f.weight, width), persistent=False)
                self.register_buffer("ln_f_bias", _pad(ln_f.bias, width), persistent=False)
                self.register_buffer("embeddings", _pad(self.model.transformer.word_embeddings.weight, width),
                                     persistent=False)

    @staticmethod
    def cache_width(config) -> int:
        return _falcon_kv_heads(config) * config.hidden_size // config.num_attention_heads

    @staticmethod
    def positions(config) -> int:
        if config.alibi or config.new_decoder_architecture:
            raise UserInputError("enable_link_past_cache_ios: a Falcon with "
                                 f"{'alibi' if config.alibi else 'new_decoder_architecture'} has no paged decode step "
                                 "here; legal: rotary positions and the Falcon-7B layer (new_decoder_architecture "
                                 "False)")
        return config.max_position_embeddings

    def layers(self):
        return self.model.transformer.h

    def embed(self, ids, positions):
        x = (self.model.transformer.word_embeddings(ids) if self.padded is None else
             torch.nn.functional.embedding(ids, self.embeddings))
        return x, self.model.transformer.rotary_emb(x, positions)

    def layer(self, k, layer, x, caches, bias, rotary):
        if self.padded is not None:
            return self.padded[k](x, caches, bias, rotary)
        from transformers.models.falcon.modeling_falcon import apply_rotary_pos_emb
        (keys, values), config, attn = caches, self.model.config, layer.self_attention
        heads, kv_heads = config.num_attention_heads, _falcon_kv_heads(config)
        h = layer.input_layernorm(x)
        qkv = attn.query_key_value(h).reshape(1, PAGE, -1, attn.head_dim)
        if config.multi_query:        # the query heads, then the one key head and the one value head
            q, key, value = qkv[:, :, :heads], qkv[:, :, heads:heads + 1], qkv[:, :, heads + 1:]
        else:                         # per head: its query, key and value
            qkv = qkv.reshape(1, PAGE, heads, 3, attn.head_dim)
            q, key, value = qkv[:, :, :, 0], qkv[:, :, :, 1], qkv[:, :, :, 2]
        q, key = apply_rotary_pos_emb(q.transpose(1, 2), key.transpose(1, 2), *rotary)
        key, value = key.transpose(1, 2).reshape(1, PAGE, -1), value.reshape(1, PAGE, -1)
        attended = attn.dense(_attend(q, keys, key, values, value, kv_heads, attn.inv_norm_factor, bias))
        if config.parallel_attn:
            return x + attended + layer.mlp(h), key, value
        x = x + attended
        return x + layer.mlp(layer.post_attention_layernorm(x)), key, value

    def head_input(self, x):
        if self.padded is not None:
            return _layer_norm(x, self.ln_f_weight, self.ln_f_bias, self.model.config)
        return self.model.transformer.ln_f(x)


class _PaddedFalconLayer(torch.nn.Module):
    """A multi-query Falcon layer at a padded width (`FalconStep`): its weights zero-padded, as buffers, the query
    heads padded to fill the width."""

    def __init__(self, layer: torch.nn.Module, config, width: int):
        super().__init__()
        if config.bias:
            raise UserInputError("enable_link_past_cache_ios: a multi-query Falcon with bias=True at a padded width "
                                 "is not supported yet; legal: bias=False (Falcon-7B)")
        self.config, attn, mlp = config, layer.self_attention, layer.mlp
        self.head_dim, self.scaling, self.act = attn.head_dim, attn.inv_norm_factor, mlp.act
        self.heads = width // attn.head_dim
        queries = config.num_attention_heads * attn.head_dim
        ffn = _padded_width(config, mlp.dense_h_to_4h.weight.shape[0])
        norms = [layer.input_layernorm] + ([] if config.parallel_attn else [layer.post_attention_layernorm])
        weights = {"qkv": torch.cat([_pad(attn.query_key_value.weight[:queries], width, width),
                                     _pad(attn.query_key_value.weight[queries:], width)]),
                   "dense": _pad(attn.dense.weight, width, width), "up": _pad(mlp.dense_h_to_4h.weight, width, ffn),
                   "down": _pad(mlp.dense_4h_to_h.weight, ffn, width)}
        with torch.no_grad():
            for name, value in weights.items():
                self.register_buffer(name, value, persistent=False)
            for k, norm in enumerate(norms):
                self.register_buffer(f"norm{k}_weight", _pad(norm.weight, width), persistent=False)
                self.register_buffer(f"norm{k}_bias", _pad(norm.bias, width), persistent=False)

    def forward(self, x, caches, bias, rotary):
        from transformers.models.falcon.modeling_falcon import apply_rotary_pos_emb
        keys, values = caches
        h = _layer_norm(x, self.norm0_weight, self.norm0_bias, self.config)
        qkv = (h @ self.qkv.T).reshape(1, PAGE, -1, self.head_dim)
        q, key, value = qkv[:, :, :self.heads], qkv[:, :, self.heads:self.heads + 1], qkv[:, :, self.heads + 1:]
        q, key = apply_rotary_pos_emb(q.transpose(1, 2), key.transpose(1, 2), *rotary)
        key, value = key.transpose(1, 2).reshape(1, PAGE, -1), value.reshape(1, PAGE, -1)
        attended = _attend(q, keys, key, values, value, 1, self.scaling, bias) @ self.dense.T
        if self.config.parallel_attn:
            return x + attended + self.act(h @ self.up.T) @ self.down.T, key, value
        x = x + attended
        h = _layer_norm(x, self.norm1_weight, self.norm1_bias, self.config)
        return x + self.act(h @ self.up.T) @ self.down.T, key, value


def _padded_width(config, width: int | None = None) -> int:
    """A width (default: the model's) of more than 8 tiles padded to a multiple of 8 tiles (a row of 8 cores
    divides it) where that stays a multiple of the head dim; else the width."""
    width = config.hidden_size if width is None else width
    tiles = -(-width // 32)
    padded = width if tiles <= 8 else -(-tiles // 8) * 8 * 32
    return padded if padded % (config.hidden_size // config.num_attention_heads) == 0 else width


def _pad(t: torch.Tensor, columns: int, rows: int | None = None) -> torch.Tensor:
    """t zero-padded to `columns` in its last dim (and `rows` in the one before)."""
    pad = (0, columns - t.shape[-1]) + ((0, rows - t.shape[-2]) if rows is not None else ())
    return torch.nn.functional.pad(t.detach(), pad)


def _layer_norm(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, config) -> torch.Tensor:
    """LayerNorm over a padded row's real `config.hidden_size` columns (the padding is zeros, and stays zero with
    zero-padded weight and bias): mean and variance from the sums of x and x * x."""
    n = config.hidden_size
    mean = torch.sum(x, -1, keepdim=True) / n
    variance = torch.sum(x * x, -1, keepdim=True) / n - mean * mean
    return (x - mean) * torch.rsqrt(variance + config.layer_norm_epsilon) * weight + bias


class T5Step(EncoderDecoderStep):
    """Hugging Face T5 and FLAN-T5 (`T5ForConditionalGeneration`): relative position buckets added to the decoder's
    self-attention scores (per head), unscaled attention, RMS norms, the head scaled when tied to the embedding."""

    @staticmethod
    def cache_width(config) -> int:
        return config.num_heads * config.d_kv

    @staticmethod
    def positions(config) -> int:
        return getattr(config, "n_positions", 512)

    def layers(self):
        return self.model.decoder.block

    def encode(self, source):
        return self.model.encoder(input_ids=source).last_hidden_state

    def cross_kv(self, block, encoded):
        attn = block.layer[1].EncDecAttention
        return attn.k(encoded), attn.v(encoded)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        attn = self.model.decoder.block[0].layer[0].SelfAttention
        far = -(-(attn.relative_attention_max_distance + PAGE - 1) // PAGE)   # pages apart: all in the last bucket
        distance = torch.arange(PAGE).reshape(PAGE, 1) - torch.arange(PAGE).reshape(1, PAGE)
        with torch.no_grad():   # block k: (heads, PAGE, PAGE), the bias of a page's rows over a page k pages before
            blocks = [attn.relative_attention_bias(_causal_buckets(distance + PAGE * k,
                                                                   attn.relative_attention_num_buckets,
                                                                   attn.relative_attention_max_distance))
                      .permute(2, 0, 1) for k in range(far + 1)]
        self.register_buffer("position_blocks", torch.stack(blocks), persistent=False)

    def bias(self, start, positions):
        """T5's relative position bias on the device: it depends on how many pages a key's page lies before the
        page's (the bias of the page's own keys is block 0) and is the same from `far` pages on, so the cached part
        is a sum over at most `far` constant blocks tiled over the pages, each switched on where the key's page
        is at least that many pages before (a clamp of whole numbers), plus the mask."""
        pages, blocks = self.max_length // PAGE, self.position_blocks
        before = _pages_before(start, self.max_length).reshape(1, 1, self.max_length)
        cached = torch.zeros(blocks.shape[1], PAGE, self.max_length)
        for k in range(1, min(len(blocks) - 1, pages - 1) + 1):
            step = (blocks[k] - (blocks[k - 1] if k > 1 else 0.0)).repeat(1, 1, pages)
            cached = cached + step * torch.clamp(before - (k - 1), 0.0, 1.0)
        mask_cached, mask_own = super().bias(start, positions)
        return cached.unsqueeze(0) + mask_cached, blocks[0].unsqueeze(0) + mask_own

    def embed(self, ids, positions):
        return self.model.decoder.embed_tokens(ids), None

    def layer(self, k, block, x, caches, bias, rotary):
        keys, values, cross_keys, cross_values = caches
        heads, own, cross = self.model.config.num_heads, block.layer[0], block.layer[1]
        h = own.layer_norm(x)
        key, value = own.SelfAttention.k(h), own.SelfAttention.v(h)
        x = x + own.SelfAttention.o(_attend(_heads(own.SelfAttention.q(h), heads), keys, key, values, value, heads,
                                            1.0, bias))
        h = _heads(cross.EncDecAttention.q(cross.layer_norm(x)), heads)
        x = x + cross.EncDecAttention.o(_attend_encoded(h, cross_keys, cross_values, 1.0))
        return block.layer[2](x), key, value

    def head_input(self, x):
        config = self.model.config
        x = self.model.decoder.final_layer_norm(x)
        if getattr(config, "scale_decoder_outputs", config.tie_word_embeddings):
            x = x * config.d_model ** -0.5
        return x


class WhisperStep(EncoderDecoderStep):
    """Hugging Face Whisper (`WhisperForConditionalGeneration`): the encoder over log-mel input features, learned
    decoder positions, queries scaled before the scores, LayerNorm before each part."""

    HEAD = "proj_out"

    @staticmethod
    def cache_width(config) -> int:
        return config.d_model

    @staticmethod
    def positions(config) -> int:
        return config.max_target_positions

    def layers(self):
        return self.model.model.decoder.layers

    def encode(self, source):
        return self.model.model.encoder(source).last_hidden_state

    def cross_kv(self, layer, encoded):
        return layer.encoder_attn.k_proj(encoded), layer.encoder_attn.v_proj(encoded)

    def embed(self, ids, positions):
        decoder = self.model.model.decoder
        return decoder.embed_tokens(ids) + decoder.embed_positions.weight[positions], None

    def layer(self, k, layer, x, caches, bias, rotary):
        keys, values, cross_keys, cross_values = caches
        heads, own, cross = self.model.config.decoder_attention_heads, layer.self_attn, layer.encoder_attn
        h = layer.self_attn_layer_norm(x)
        key, value = own.k_proj(h), own.v_proj(h)
        x = x + own.out_proj(_attend(_heads(own.q_proj(h) * own.scaling, heads), keys, key, values, value, heads,
                                     1.0, bias))
        h = _heads(cross.q_proj(layer.encoder_attn_layer_norm(x)) * cross.scaling, heads)
        x = x + cross.out_proj(_attend_encoded(h, cross_keys, cross_values, 1.0))
        return x + layer.fc2(layer.activation_fn(layer.fc1(layer.final_layer_norm(x)))), key, value

    def head_input(self, x):
        return self.model.model.decoder.layer_norm(x)


FAMILIES = {"gpt2": GPT2Step, "llama": LlamaStep, "falcon": FalconStep, "t5": T5Step,   # model_type -> its step
            "whisper": WhisperStep}


def _falcon_kv_heads(config) -> int:
    return 1 if config.multi_query else config.num_kv_heads


def _head_dim(config) -> int:
    return getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads


def _attend(q, keys, key, values, value, kv_heads: int, scaling: float, bias: tuple) -> torch.Tensor:
    """Attention of a page's query heads q (1, heads, PAGE, d) over the cached positions and the page's own (each
    (1, positions, kv_heads * d), heads merged): a group of query heads sharing a key/value head one under the
    other, so the key/value heads are never repeated; (1, PAGE, heads * d). The cached positions and the page's
    own are scored apart, one softmax over both (their largest score, their sums): the device concatenates
    neither the caches nor the masks. `bias`: what the scores over each add, (PAGE, positions) or per head."""
    _, heads, _, d = q.shape
    group = heads // kv_heads
    q = q.reshape(1, kv_heads, group * PAGE, d)

    def scores(k: torch.Tensor, add: torch.Tensor) -> torch.Tensor:     # per head (1, heads, PAGE, positions)
        return (q @ _heads(k, kv_heads).transpose(-2, -1) * scaling).reshape(1, heads, PAGE, -1) + add

    cached, own = scores(keys, bias[0]), scores(key, bias[1])
    top = torch.maximum(torch.amax(cached, -1, keepdim=True), torch.amax(own, -1, keepdim=True))
    cached, own = torch.exp(cached - top), torch.exp(own - top)
    total = torch.sum(cached, -1, keepdim=True) + torch.sum(own, -1, keepdim=True)

    def grouped(x: torch.Tensor) -> torch.Tensor:    # the query heads of a key/value head one under the other
        return x.reshape(1, kv_heads, group * PAGE, x.shape[-1])

    attended = (grouped(cached) @ _heads(values, kv_heads) + grouped(own) @ _heads(value, kv_heads)) / grouped(total)
    return attended.reshape(1, heads, PAGE, d).transpose(1, 2).reshape(1, PAGE, heads * d)


def _attend_encoded(q, keys, values, scaling: float) -> torch.Tensor:
    """Cross-attention of a page's query heads q (1, heads, PAGE, d) over the encoded positions' keys and values
    (1, positions, heads * d); (1, PAGE, heads * d)."""
    heads = q.shape[1]
    attended = torch.softmax(q @ _heads(keys, heads).transpose(-2, -1) * scaling, -1) @ _heads(values, heads)
    return attended.transpose(1, 2).reshape(1, PAGE, -1)


def _causal_buckets(distance: torch.Tensor, buckets: int, max_distance: int) -> torch.Tensor:
    """T5's relative position bucket of each query-to-key `distance` (query position - key position) of a
    decoder (`T5Attention._relative_position_bucket`, unidirectional), with the logarithm taken of distances
    where it is finite only: the exact branch and the log branch are both computed, and a select written as
    arithmetic must not meet log(0) = -inf."""
    distance = torch.clamp(distance, min=0)
    exact = buckets // 2
    far = exact + (torch.log(torch.clamp(distance, min=exact).float() / exact) / math.log(max_distance / exact)
                   * (buckets - exact)).long()
    return torch.where(distance < exact, distance, torch.clamp(far, max=buckets - 1))


def _heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    """(1, positions, hidden) as (1, heads, positions, hidden / heads)."""
    return x.reshape(1, x.shape[1], heads, -1).transpose(1, 2)


def _padded_vocab(vocab: int) -> int:
    """The vocabulary the head computes: above a row of 8 tiles, padded to a multiple of 24 tiles, so its one tile
    row of logits spreads over a row of cores on every device (8 and 12 columns). The balancer gives an op only
    grids that divide its tiles, and real vocabularies have awkward tile counts (T5's 1,004 tiles = 4 x 251;
    Whisper's 1,621, a prime: one core reading every head weight)."""
    tiles = -(-vocab // 32)
    return vocab if tiles <= 8 else -(-tiles // 24) * 24 * 32


def _greedy_digits(logits: torch.Tensor, scalings: int) -> torch.Tensor:
    """The greedy token of each row of (1, PAGE, vocab) logits, computed on the device, as its two base-DIGIT_BASE
    digits (1, PAGE, 2) (high, low): whole numbers below 256, exact in a 16-bit format (a vocabulary index is not).
    The first position of the row's maximum wins, as in `torch.argmax` (values closer to it than 2^-42 count as
    equal): per digit, the largest of (DIGIT_BASE - 1 - digit) over those positions."""
    vocab = logits.shape[-1]
    index = torch.arange(vocab).float()
    high = torch.floor(index * (1.0 / DIGIT_BASE)).reshape(1, 1, vocab)
    low = (index.reshape(1, 1, vocab) - high * DIGIT_BASE)
    top = DIGIT_BASE - 1.0
    below = torch.amax(logits, -1, keepdim=True) - logits
    for _ in range(scalings):     # 0 for the maxima, 1 for a value at least 2^-42 below (in `scalings` steps: a
        below = torch.clamp(below * 2.0 ** (42 // scalings), 0.0, 1.0)     # format with a 5-bit exponent takes 3)
    at_max = 1.0 - below
    first_high = top - torch.amax(at_max * (top - high), -1, keepdim=True)
    in_block = at_max * (1.0 - torch.clamp(high - first_high, 0.0, 1.0))   # a maximum's high digit >= the first's
    first_low = top - torch.amax(in_block * (top - low), -1, keepdim=True)
    return torch.cat([first_high, first_low], dim=-1)


def _pages_before(start: torch.Tensor, max_length: int) -> torch.Tensor:
    """(1, max_length): for each cached position, how many pages its page lies before the page at `start` (a
    page boundary), negative or 0 for the page and after: whole numbers of at most max_length / PAGE, so exact in
    every format the device computes them in (a 16-bit format holds integers up to 256 exactly, not positions)."""
    page_of = torch.floor(torch.arange(max_length).float() * (1.0 / PAGE)).reshape(1, max_length)
    return start.reshape(1, 1) * (1.0 / PAGE) - page_of


def _attention_bias(start: torch.Tensor, max_length: int) -> tuple[torch.Tensor, torch.Tensor]:
    """The mask of a page's rows: over the cached positions (PAGE, max_length), 0 where a row may attend (positions
    before the page at `start`) and a large negative number elsewhere, arithmetic only (pages before clamped to
    0..1), so the device computes it from `start`; over the page's own (PAGE, PAGE), causal (a constant)."""
    cached = torch.clamp(_pages_before(start, max_length), 0.0, 1.0).expand(PAGE, max_length)
    return (cached - 1.0) * 1e4, (torch.tril(torch.ones(PAGE, PAGE)) - 1.0) * 1e4


def paged_decoder(model: torch.nn.Module, sample_inputs: tuple, max_length: int | None,
                  df: DataFormat | None = None) -> tuple[PagedStep, tuple, dict[str, int]]:
    """The decode step of a Hugging Face causal LM or encoder-decoder, its sample inputs (as many sequences as the
    first sample input has rows, the microbatch a step decodes at once; the caches' starting value: zeros; an
    encoder-decoder's source: the first sample input, whose shape every generation then takes) and
    the `loopback_outputs` linking each cache to what writes it; UserInputError for a model it cannot step. `df`
    (`default_df_override`) decides where the greedy token is picked: on the device unless the format cannot hold
    its digits exactly (a block format), or the vocabulary exceeds two digits (a warning says so)."""
    config = getattr(model, "config", None)
    kind = getattr(config, "model_type", None)
    family = FAMILIES.get(kind)
    if family is None or not hasattr(model, family.HEAD):
        raise UserInputError(f"enable_link_past_cache_ios: {type(model).__name__} (model_type {kind!r}) has no paged "
                             "decode step here; supported: Hugging Face causal LMs and encoder-decoders (with their "
                             f"LM head) of model_type {', '.join(map(repr, FAMILIES))}")
    limit = family.positions(config)
    length = limit if max_length is None else max_length
    if length % PAGE or not PAGE <= length <= limit:
        raise UserInputError(f"generation_max_length {length}: legal: a multiple of {PAGE} up to the model's "
                             f"{limit} positions")
    prompt = 1 if family.cross else sample_inputs[0].shape[-1]    # an encoder-decoder's: its first decoder token
    if prompt >= length:
        raise UserInputError(f"enable_link_past_cache_ios: the sample prompt has {prompt} tokens; legal: fewer than "
                             f"generation_max_length ({length}), the positions the caches hold")
    step = family(model, length, prompt, _decoder_start(model) if family.cross else None,
                  _device_argmax(config.vocab_size, df), df is not None and df.exponent_family == "a").eval()
    width, layers, batch = family.cache_width(config), len(step.layers()), sample_inputs[0].shape[0]
    caches = [torch.zeros(batch, length, width) for _ in range(2 * layers)]
    sample: tuple = (torch.zeros(batch, PAGE, dtype=torch.long), torch.zeros(batch, 1))
    if step.cross:
        source = sample_inputs[0]
        with torch.no_grad():
            encoded = step.encode(source[:1].to(next(model.parameters()).device)).shape[1]   # (meta: shape-only)
        caches += [torch.zeros(batch, encoded, width) for _ in range(2 * layers)]
        sample += (source,)
    return step, (*sample, *caches), {f"caches_{k}": k + 1 for k in range(len(caches))}


def _device_argmax(vocab: int, df: DataFormat | None) -> bool:
    """Whether the device can pick the greedy token exactly (`_greedy_digits`); warns naming why not."""
    why = (f"its vocabulary of {vocab} tokens exceeds two base-{DIGIT_BASE} digits" if _padded_vocab(vocab) >
           DIGIT_BASE ** 2 else
           f"default_df_override {df.value} cannot hold the token's digits exactly" if df is not None and
           (df.is_bfp or df.mantissa_bits < 7) else "")
    if why:
        warnings.warn(f"enable_link_past_cache_ios: the greedy token is picked on the host, so every step's logits "
                      f"cross PCIe: {why}", UserWarning, stacklevel=3)
    return not why


def _decoder_start(model: torch.nn.Module) -> int:
    """An encoder-decoder's first decoder token, as Hugging Face `generate` picks it (the generation config's or
    the model config's `decoder_start_token_id`, else `bos_token_id`); UserInputError if it has none."""
    for holder in (getattr(model, "generation_config", None), model.config):
        for field in ("decoder_start_token_id", "bos_token_id"):
            token = getattr(holder, field, None)
            if isinstance(token, int):
                return token
    raise UserInputError(f"enable_link_past_cache_ios: {type(model).__name__} names no first decoder token; set "
                         "model.generation_config.decoder_start_token_id")
