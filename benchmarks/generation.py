"""Greedy generation with the KV cache on the device (`enable_link_past_cache_ios`) against Hugging Face
`generate(do_sample=False)`: for small GPT-2 and Llama configurations with random weights, how many of the new
tokens equal Hugging Face's (up to the first difference, and in all) per data format, for a long continuation,
and the wall-clock seconds per token of the simulation. Prints one Markdown row per model and format.

    PYTHONPATH=. python benchmarks/generation.py                       # 256 new tokens, Float32 and Float16_b
    PYTHONPATH=. python benchmarks/generation.py --new 64 --format Float16_b
"""
from __future__ import annotations

import argparse
import tempfile
import time

import torch
import transformers

import pybuda

PROMPT = torch.tensor([[5, 17, 42, 7, 99, 3, 64, 12]])


def models(positions: int) -> dict[str, torch.nn.Module]:
    """The small configurations, random weights (seeded)."""
    torch.manual_seed(0)
    gpt2 = transformers.GPT2Config(n_layer=2, n_embd=64, n_head=2, vocab_size=256, n_positions=positions)
    llama = transformers.LlamaConfig(num_hidden_layers=2, hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                                     intermediate_size=128, vocab_size=256, max_position_embeddings=positions)
    return {"gpt2": transformers.GPT2LMHeadModel(gpt2).eval(), "llama": transformers.LlamaForCausalLM(llama).eval()}


def measure(model: torch.nn.Module, df: str, new: int, length: int) -> tuple[int, int, float]:
    """(tokens equal up to the first difference, tokens equal in all, seconds per token)."""
    config = pybuda.CompilerConfig(enable_link_past_cache_ios=True, default_df_override=df,
                                   generation_max_length=length)
    with tempfile.TemporaryDirectory() as out:
        compiled = pybuda.compile(model, PROMPT, device="n150", config=config, output_dir=out)
        start = time.perf_counter()
        got = compiled.generate(PROMPT, max_new_tokens=new)[0, PROMPT.shape[1]:].tolist()
        seconds = (time.perf_counter() - start) / new
    with torch.no_grad():
        expected = model.generate(PROMPT, max_new_tokens=new, do_sample=False, pad_token_id=0)[0, PROMPT.shape[1]:]
    same = [a == b for a, b in zip(got, expected.tolist())]
    prefix = next((k for k, s in enumerate(same) if not s), len(same))
    return prefix, sum(same), seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--new", type=int, default=256, help="new tokens per sequence")
    parser.add_argument("--format", action="append", help="data formats (default: Float32 and Float16_b)")
    args = parser.parse_args()
    length = -(-(PROMPT.shape[1] + args.new) // 32) * 32
    print(f"prompt {PROMPT.shape[1]} tokens, {args.new} new, caches of {length} positions, n150")
    print("| model | format | equal up to the first difference | equal in all | simulated s/token |")
    print("|---|---|---|---|---|")
    for name, model in models(length).items():
        for df in args.format or ["Float32", "Float16_b"]:
            prefix, total, seconds = measure(model, df, args.new, length)
            print(f"| {name} | {df} | {prefix}/{args.new} | {total}/{args.new} | {seconds:.3f} |")


if __name__ == "__main__":
    main()
