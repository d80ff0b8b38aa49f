"""Generation with the KV cache on the device (issue 36): Hugging Face GPT-2, Llama, Falcon, T5 and Whisper
compiled with `enable_link_past_cache_ios` as a paged decode step (an encoder-decoder's encoder as a program of its
own, run once per sequence); `generate` equals Hugging Face `generate(do_sample=False)` token for token at Float32,
the caches are pushed once per sequence and never again, a saved image generates too; misuse says what is legal."""
from __future__ import annotations

import pytest
import torch
import transformers

import pybuda

PROMPT = torch.tensor([[5, 17, 42, 7, 99]])


@pytest.fixture(scope="module")
def gpt2():
    config = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=128, n_positions=128,
                                     bos_token_id=0, eos_token_id=1)
    torch.manual_seed(0)
    return transformers.GPT2LMHeadModel(config).eval()


@pytest.fixture(scope="module")
def compiled(gpt2, tmp_path_factory):
    config = pybuda.CompilerConfig(enable_link_past_cache_ios=True, default_df_override="Float32",
                                   generation_max_length=96)
    return pybuda.compile(gpt2, PROMPT, device="n150", config=config, output_dir=tmp_path_factory.mktemp("gpt2"))


def _hf(model, prompts, new, **kwargs):
    with torch.no_grad():
        return model.generate(prompts, max_new_tokens=new, do_sample=False, pad_token_id=0, **kwargs)


def test_generate_equals_hugging_face_and_keeps_the_caches_on_the_device(gpt2, compiled):
    assert compiled.runtime.pages == 3 and compiled.runtime.input_names[:2] == ["ids", "start"]
    out = compiled.generate(PROMPT, max_new_tokens=32)
    assert out.tolist() == _hf(gpt2, PROMPT, 32).tolist()
    (device,) = compiled.runtime.devices.values()
    pushes = [t.queue for t in device.transfers if t.kind == "push"]
    caches = [q for q in compiled.netlist.queues if q.startswith("caches_")]
    assert len(caches) == 4 and all(pushes.count(q) == 1 for q in caches)      # loaded once, never again
    assert len(device.executed) == 32 * len(compiled.netlist.graphs)            # one step per new token
    popped = {t.queue for t in device.transfers if t.kind == "pop"}
    assert not popped & set(caches)
    # the greedy token is picked on the device: one tile of digits comes back per step, never the logits
    assert [compiled.netlist.queues[q].shape for q in popped] == [(1, 1, 1)]


def test_the_estimate_gives_prefill_decode_cycles_and_tokens_per_second(compiled):
    generation = compiled.perf.generation
    assert (generation.prompt_length, generation.new_tokens, generation.encoder_cycles) == (5, 91, 0)
    step = compiled.perf.decode_cycles / generation.clock_hz
    assert compiled.perf.decode_cycles == compiled.perf.total_cycles      # one program: the decode step
    assert compiled.perf.prefill_seconds == pytest.approx(step)           # a 5-token prompt: one page
    assert compiled.perf.tokens_per_second == pytest.approx(91 / (91 * step))
    # in per step: the page's token and position embeddings (32 x 64 each: 2 tiles) and its first position (1
    # tile); out: a tile of digits
    assert generation.pcie_bytes_per_token == 6 * pybuda.DataFormat.Float32.tile_bytes
    assert "tokens/second" in compiled.perf.to_text()


def test_a_prompt_longer_than_a_page_fills_the_caches_page_by_page(gpt2, compiled):
    prompt = torch.randint(2, 128, (1, 40), generator=torch.Generator().manual_seed(1))
    assert compiled.generate(prompt, max_new_tokens=24).tolist() == _hf(gpt2, prompt, 24).tolist()


def test_a_batch_stops_each_sequence_at_its_eos_and_pads_with_it(gpt2, compiled):
    other = torch.tensor([[3, 9, 27, 81, 115]])
    stop = int(compiled.generate(PROMPT, max_new_tokens=4)[0, -1])          # the 4th token of the first prompt
    batch = torch.cat([PROMPT, other])
    out = compiled.generate(batch, max_new_tokens=12, eos_token_id=stop)
    with torch.no_grad():
        expected = gpt2.generate(batch, max_new_tokens=12, do_sample=False, eos_token_id=stop, pad_token_id=stop)
    assert out.tolist() == expected.tolist()


def test_a_step_compiled_for_a_batch_decodes_its_sequences_at_once(gpt2, compiled, tmp_path):
    """Microbatch 3: a run decodes three sequences, each with its own caches (pushed once per microbatch); a batch of
    four runs as two microbatches, the second filled up; the estimate counts a token of each sequence per step."""
    prompts = torch.randint(2, 128, (4, 5), generator=torch.Generator().manual_seed(2))
    batched = pybuda.compile(gpt2, prompts[:3], device="n150", output_dir=tmp_path, config=pybuda.CompilerConfig(
        enable_link_past_cache_ios=True, default_df_override="Float32", generation_max_length=96))
    assert batched.microbatch == 3 and batched.runtime.pages == 3
    assert batched.generate(prompts, max_new_tokens=20).tolist() == _hf(gpt2, prompts, 20).tolist()
    (device,) = batched.runtime.devices.values()         # the second microbatch's
    pushes = [t.queue for t in device.transfers if t.kind == "push"]
    assert all(pushes.count(q) == 1 for q in batched.netlist.queues if q.startswith("caches_"))
    assert len(device.executed) == 20 * len(batched.netlist.graphs)            # 20 steps for 3 sequences
    one, three = compiled.perf.generation, batched.perf.generation
    assert three.batch == 3 and three.tokens_per_second == pytest.approx(
        3 * three.new_tokens / (three.prefill_seconds + (three.new_tokens - 1) * three.decode_seconds_per_token))
    assert three.pcie_bytes_per_token == 3 * one.pcie_bytes_per_token


def test_a_llama_with_grouped_query_attention_generates_like_hugging_face(tmp_path):
    config = transformers.LlamaConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                                      num_key_value_heads=2, intermediate_size=128, vocab_size=300,
                                      max_position_embeddings=128, bos_token_id=0, eos_token_id=1)
    torch.manual_seed(0)
    llama = transformers.LlamaForCausalLM(config).eval()
    compiled = pybuda.compile(llama, PROMPT, device="n150", output_dir=tmp_path, config=pybuda.CompilerConfig(
        enable_link_past_cache_ios=True, default_df_override="Float32", generation_max_length=64))
    # the caches hold the 2 key/value heads of 16 only (never repeated for the 4 query heads), 2 pages of 32
    assert compiled.netlist.queues["caches_0"].element_shape == (2, 32, 32)
    # the head's 300 tokens (10 tiles) padded to 24 tiles: a 768-wide matmul, whose padded tokens never win
    assert any(op.type == "matmul" and op.shape[-1] == 24 for op in compiled.netlist.ops.values())
    assert len(compiled.runtime.manifest.device_parts) == 1      # the grouped heads' mask too is on the device
    assert compiled.generate(PROMPT, max_new_tokens=32).tolist() == _hf(llama, PROMPT, 32).tolist()


def _random(model: torch.nn.Module, seed: int = 0) -> torch.nn.Module:
    """A model whose random weights generate varied tokens (a freshly initialised T5 or Whisper repeats one)."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.1)
    return model.eval()


@pytest.mark.parametrize("multi_query, parallel_attn, hidden, heads", [
    (True, True, 64, 4), (False, False, 64, 4),
    (True, True, 288, 9),       # 9 tiles: run at 16 (`FalconStep`), as Falcon-7B's 142 at 144
    (True, False, 288, 9),
], ids=["falcon-7b-layer", "sequential", "padded-width", "padded-width-sequential"])
def test_falcon_generates_like_hugging_face(multi_query, parallel_attn, hidden, heads, tmp_path):
    config = transformers.FalconConfig(vocab_size=128, hidden_size=hidden, num_hidden_layers=2,
                                       num_attention_heads=heads, multi_query=multi_query,
                                       parallel_attn=parallel_attn, alibi=False, new_decoder_architecture=False,
                                       bias=False, max_position_embeddings=128, bos_token_id=0, eos_token_id=1)
    falcon = _random(transformers.FalconForCausalLM(config))
    compiled = pybuda.compile(falcon, PROMPT, device="n150", output_dir=tmp_path, config=pybuda.CompilerConfig(
        enable_link_past_cache_ios=True, default_df_override="Float32", generation_max_length=64))
    # multi-query: the caches hold the one key/value head (a tile of 16 or 32 columns)
    assert compiled.netlist.queues["caches_0"].element_shape[-1] == (32 if multi_query else 64)
    queues = compiled.netlist.queues
    assert ("padded.0.up" in queues) == (hidden == 288)
    if hidden == 288:       # 288 columns at 512, the feed-forward's 1,152 at 1,280
        assert queues["padded.0.up"].element_shape[-2:] == (512, 1280)   # (in, out): consteval folds the transpose
    expected = _hf(falcon, PROMPT, 32)
    assert len(set(expected[0, 5:].tolist())) > 1       # not one repeated token
    assert compiled.generate(PROMPT, max_new_tokens=32).tolist() == expected.tolist()


def _encoder_runs_once_and_no_cache_is_pushed_again(compiled, steps: int = 32) -> None:
    (device,) = compiled.runtime.devices.values()
    pushes = [t.queue for t in device.transfers if t.kind == "push"]
    caches = [q for q in compiled.netlist.queues if q.startswith("caches_")]
    assert caches and all(pushes.count(q) == 1 for q in caches)
    runs = {}
    for program, execute in compiled.netlist.executes():     # the decoder's (it writes a page): once per token
        decoder = "$p_cache_write_index" in program.instructions[0].names
        runs.setdefault(decoder, set()).add(device.executed.count(execute.graph_name))
    assert runs == {False: {1}, True: {steps}}              # the encoder's: once per sequence


@pytest.mark.parametrize("variant, new", [({}, 32), ({"feed_forward_proj": "gated-gelu", "tie_word_embeddings": False},
                                                      72)], ids=["t5", "flan-t5"])
def test_a_t5_encodes_once_and_generates_like_hugging_face(variant, new, tmp_path):
    config = transformers.T5Config(vocab_size=128, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
                                   relative_attention_num_buckets=8, relative_attention_max_distance=20,
                                   decoder_start_token_id=0, pad_token_id=0, eos_token_id=1, **variant)
    t5 = _random(transformers.T5ForConditionalGeneration(config))
    source = torch.tensor([[5, 17, 42, 7, 99, 3, 8, 12]])
    compiled = pybuda.compile(t5, source, device="n150", output_dir=tmp_path, config=pybuda.CompilerConfig(
        enable_link_past_cache_ios=True, default_df_override="Float32", generation_max_length=96))
    assert compiled.runtime.program_names == ["run_fwd_0", "run_fwd_1"]   # the encoder's and the decode step's
    # FLAN-T5: 72 new tokens reach the third page, whose keys two pages before take the second bias block
    expected = _hf(t5, source, new)
    assert compiled.generate(source, max_new_tokens=new).tolist() == expected.tolist()
    _encoder_runs_once_and_no_cache_is_pushed_again(compiled, new)
    loaded = pybuda.load(compiled.save(tmp_path / "t5.tti"))        # both programs and how to drive them
    assert loaded.generate(source, max_new_tokens=8).tolist() == expected[:, :9].tolist()


def test_whisper_encodes_its_features_once_and_generates_like_hugging_face(tmp_path):
    config = transformers.WhisperConfig(vocab_size=128, num_mel_bins=16, d_model=64, encoder_layers=2,
                                        decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
                                        encoder_ffn_dim=128, decoder_ffn_dim=128, max_source_positions=32,
                                        max_target_positions=64, decoder_start_token_id=2, pad_token_id=0,
                                        bos_token_id=2, eos_token_id=1)
    whisper = _random(transformers.WhisperForConditionalGeneration(config))
    features = torch.randn(1, 16, 64, generator=torch.Generator().manual_seed(0))
    compiled = pybuda.compile(whisper, features, device="n150", output_dir=tmp_path, config=pybuda.CompilerConfig(
        enable_link_past_cache_ios=True, default_df_override="Float32", generation_max_length=64))
    out = compiled.generate(features, max_new_tokens=32)
    with torch.no_grad():   # Whisper's generate returns the new tokens alone
        expected = whisper.generate(features, max_new_tokens=32, do_sample=False)
    assert out[:, 0].tolist() == [2] and out[:, 1:].tolist() == expected.tolist()
    _encoder_runs_once_and_no_cache_is_pushed_again(compiled)


def test_a_saved_image_generates(compiled, tmp_path):
    loaded = pybuda.load(compiled.save(tmp_path / "gpt2.tti"))
    assert loaded.generate(PROMPT, max_new_tokens=8).tolist() == compiled.generate(PROMPT, max_new_tokens=8).tolist()


def test_misuse_says_what_is_legal(gpt2, compiled, tmp_path):
    with pytest.raises(pybuda.InputError, match=r"n \+ max_new_tokens <= 96"):
        compiled.generate(PROMPT, max_new_tokens=92)
    with pytest.raises(pybuda.InputError, match=r"start 5 with cache_write_index 0; legal: .* = 0"):
        compiled(torch.zeros(1, 32, dtype=torch.long), torch.tensor([[5.0]]), cache_write_index=0)
    with pytest.raises(pybuda.InputError, match=r"programs=\['run_fwd_9'\]: legal: names of run_fwd_0"):
        compiled(torch.zeros(1, 32, dtype=torch.long), torch.zeros(1, 1), cache_write_index=0, programs=["run_fwd_9"])
    mlp = pybuda.compile(torch.nn.Linear(32, 32), torch.randn(1, 32), output_dir=tmp_path / "mlp")
    with pytest.raises(pybuda.UsageError, match="compile a Hugging Face causal LM or encoder-decoder"):
        mlp.generate(PROMPT)
    with pytest.raises(pybuda.UsageError, match="tokens_per_second.*is a decode step's"):
        mlp.perf.tokens_per_second
    with pytest.raises(pybuda.UserInputError, match="supported: Hugging Face causal LMs and encoder-decoders.*"
                       "'gpt2', 'llama', 'falcon', 't5', 'whisper'"):
        pybuda.compile(torch.nn.Linear(32, 32), torch.randn(1, 32), output_dir=tmp_path / "other",
                       config=pybuda.CompilerConfig(enable_link_past_cache_ios=True))
    with pytest.raises(pybuda.UserInputError, match="generation_max_length 48: legal: a multiple of 32"):
        pybuda.compile(gpt2, PROMPT, output_dir=tmp_path / "len",
                       config=pybuda.CompilerConfig(enable_link_past_cache_ios=True, generation_max_length=48))


def test_generation_max_length_alone_warns_that_it_has_no_effect(tmp_path):
    with pytest.warns(UserWarning, match="generation_max_length=64 has no effect without enable_link_past_cache_ios"):
        pybuda.compile(torch.nn.Linear(32, 32), torch.randn(1, 32), output_dir=tmp_path,
                       config=pybuda.CompilerConfig(generation_max_length=64))
