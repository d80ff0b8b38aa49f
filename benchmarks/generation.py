"""Greedy generation with the KV cache on the device (`enable_link_past_cache_ios`) against Hugging Face
`generate(do_sample=False)`: for small GPT-2, Llama, Falcon, T5 and Whisper configurations with random weights
(the T5 and Whisper source: the prompt ids, 16 x 64 random features), how many of the new
tokens equal Hugging Face's (up to the first difference, and in all) per data format, for a long continuation,
and the wall-clock seconds per token of the simulation. Prints one Markdown row per model and format.

    PYTHONPATH=. python benchmarks/generation.py                       # 256 new tokens, Float32 and Float16_b
    PYTHONPATH=. python benchmarks/generation.py --new 64 --format Float16_b
"""
from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time

import torch
import transformers

import pybuda

PROMPT = torch.tensor([[5, 17, 42, 7, 99, 3, 64, 12]])


@dataclasses.dataclass
class Case:
    """A model, what compile and generate take (a prompt, or an encoder-decoder's source), and how many leading
    ids of both outputs are not new tokens."""

    model: torch.nn.Module
    source: torch.Tensor
    skip: int
    whisper: bool = False     # Hugging Face Whisper's generate returns the new tokens alone


def _random(model: torch.nn.Module) -> torch.nn.Module:
    """Weights that generate varied tokens (a freshly initialised T5, Whisper or Falcon repeats one)."""
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.1)
    return model.eval()


def cases(positions: int) -> dict[str, Case]:
    """The small configurations, random weights (seeded)."""
    torch.manual_seed(0)
    gpt2 = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=256, n_positions=positions)
    llama = transformers.LlamaConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                                     intermediate_size=128, vocab_size=256, max_position_embeddings=positions)
    falcon = transformers.FalconConfig(vocab_size=256, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                                       multi_query=True, parallel_attn=True, alibi=False, bias=False,
                                       new_decoder_architecture=False, max_position_embeddings=positions)
    t5 = transformers.T5Config(vocab_size=256, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
                               relative_attention_num_buckets=8, relative_attention_max_distance=20,
                               decoder_start_token_id=0, eos_token_id=None)
    whisper = transformers.WhisperConfig(vocab_size=256, num_mel_bins=16, d_model=64, encoder_layers=2,
                                         decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
                                         encoder_ffn_dim=128, decoder_ffn_dim=128, max_source_positions=32,
                                         max_target_positions=positions, decoder_start_token_id=2, pad_token_id=0,
                                         bos_token_id=2, eos_token_id=None)
    skip = PROMPT.shape[1]
    return {"gpt2": Case(transformers.GPT2LMHeadModel(gpt2).eval(), PROMPT, skip),
            "llama": Case(transformers.LlamaForCausalLM(llama).eval(), PROMPT, skip),
            "falcon": Case(_random(transformers.FalconForCausalLM(falcon)), PROMPT, skip),
            "t5": Case(_random(transformers.T5ForConditionalGeneration(t5)), PROMPT, 1),
            "whisper": Case(_random(transformers.WhisperForConditionalGeneration(whisper)), torch.randn(1, 16, 64), 1,
                            whisper=True)}


def measure(case: Case, df: str, new: int, length: int) -> tuple[int, int, float]:
    """(tokens equal up to the first difference, tokens equal in all, seconds per token)."""
    config = pybuda.CompilerConfig(enable_link_past_cache_ios=True, default_df_override=df,
                                   generation_max_length=length)
    with tempfile.TemporaryDirectory() as out:
        compiled = pybuda.compile(case.model, case.source, device="n150", config=config, output_dir=out)
        start = time.perf_counter()
        got = compiled.generate(case.source, max_new_tokens=new)[0, case.skip:].tolist()
        seconds = (time.perf_counter() - start) / new
    with torch.no_grad():
        expected = case.model.generate(case.source, max_new_tokens=new, do_sample=False, pad_token_id=0)[0]
    expected = expected.tolist()[0 if case.whisper else case.skip:]
    same = [a == b for a, b in zip(got, expected)]
    prefix = next((k for k, s in enumerate(same) if not s), len(same))
    return prefix, sum(same), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--new", type=int, default=256, help="new tokens per sequence")
    parser.add_argument("--format", action="append", help="data formats (default: Float32 and Float16_b)")
    parser.add_argument("--model", action="append", help="models (default: all)")
    args = parser.parse_args()
    length = -(-(PROMPT.shape[1] + args.new) // 32) * 32
    print(f"prompt {PROMPT.shape[1]} tokens, {args.new} new, caches of {length} positions, n150")
    print("| model | format | equal up to the first difference | equal in all | simulated s/token |")
    print("|---|---|---|---|---|")
    for name, case in cases(length).items():
        if args.model and name not in args.model:
            continue
        for df in args.format or ["Float32", "Float16_b"]:
            prefix, total, seconds = measure(case, df, args.new, length)
            print(f"| {name} | {df} | {prefix}/{args.new} | {total}/{args.new} | {seconds:.3f} |")


if __name__ == "__main__":
    main()
