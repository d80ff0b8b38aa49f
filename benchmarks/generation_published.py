"""The published generative rows (`../shared/reference/generation.md` §6) compiled at full size with random weights
(`enable_link_past_cache_ios`, Float16_b; Falcon-7B with its weights on the meta device: a shape-only compile, its
7 billion weights held nowhere) and estimated: per row and device, our prefill latency, decode cycles per step, PCIe
bytes per step and tokens/s (tokens over the prefill and the decode steps of the batch's sequences, the encoder
included, counted as the published benchmark counts them: new tokens, and Falcon's prompt tokens too) next to the
published tokens/s. Prints one Markdown row each (the table of `docs/models.md`).

    PYTHONPATH=. python benchmarks/generation_published.py                 # every row, e150 and n150
    PYTHONPATH=. python benchmarks/generation_published.py --model t5-large --device n150
"""
from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from typing import Callable

import torch
import transformers

import pybuda
from pybuda.config import AMPNodeProperties


@dataclasses.dataclass(frozen=True)
class Row:
    """A published row: the model, its sample input (the batch of sequences), the caches' positions, the new tokens
    per sequence, the published tokens/s by device; whether the published count includes the prompt tokens (the
    Falcon benchmark steps its prompt through decode and counts it) and mixed-precision rules."""

    build: Callable[[], torch.nn.Module]
    sample: Callable[[], torch.Tensor]
    positions: int
    new_tokens: int
    published: dict
    counts_prompt: bool = False
    amp: tuple = ()


FALCON_7B = transformers.FalconConfig(vocab_size=65024, hidden_size=4544, num_hidden_layers=32, num_attention_heads=71,
                                      multi_query=True, parallel_attn=True, new_decoder_architecture=False,
                                      alibi=False, bias=False, max_position_embeddings=2048)

ROWS = {
    "t5-large": Row(lambda: transformers.T5ForConditionalGeneration(transformers.T5Config(
        vocab_size=32128, d_model=1024, d_kv=64, d_ff=4096, num_layers=24, num_heads=16, decoder_start_token_id=0)),
        lambda: torch.randint(2, 32000, (1, 64)), 64, 63, {"e150": 30, "n150": 75}),
    "flan-t5-large": Row(lambda: transformers.T5ForConditionalGeneration(transformers.T5Config(
        vocab_size=32128, d_model=1024, d_kv=64, d_ff=2816, num_layers=24, num_heads=16,
        feed_forward_proj="gated-gelu", tie_word_embeddings=False, decoder_start_token_id=0)),
        lambda: torch.randint(2, 32000, (1, 64)), 64, 63, {"e150": 25, "n150": 71}),
    "whisper-small": Row(lambda: transformers.WhisperForConditionalGeneration(transformers.WhisperConfig(
        vocab_size=51865, num_mel_bins=80, d_model=768, encoder_layers=12, decoder_layers=12,
        encoder_attention_heads=12, decoder_attention_heads=12, encoder_ffn_dim=3072, decoder_ffn_dim=3072,
        max_source_positions=1500, max_target_positions=448, decoder_start_token_id=50258)),
        lambda: torch.randn(1, 80, 3000), 288, 256, {"e150": 3.7, "n150": 16}),
    # 32 users, a 128-token prompt each, one new token (the benchmark's hellaswag task); Bfp8_b matmul weights
    "falcon-7b": Row(lambda: _on_meta(lambda: transformers.FalconForCausalLM(FALCON_7B)),
                     lambda: torch.randint(2, 65000, (32, 128)), 2048, 1, {"n150": 76}, counts_prompt=True,
                     amp=(AMPNodeProperties(op_type="matmul", input_df={1: (pybuda.DataFormat.Bfp8_b, True)}),)),
}


def _on_meta(build: Callable[[], torch.nn.Module]) -> torch.nn.Module:
    with torch.device("meta"):
        return build()


def row(name: str, device: str) -> str:
    spec = ROWS[name]
    torch.manual_seed(0)
    model, sample = spec.build().eval(), spec.sample()
    config = pybuda.CompilerConfig(enable_link_past_cache_ios=True, default_df_override="Float16_b",
                                   generation_max_length=spec.positions, amp_properties=list(spec.amp))
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        compiled = pybuda.compile(model, sample, device=device, config=config, output_dir=out)
        seconds = time.perf_counter() - start
        generation = dataclasses.replace(compiled.perf.generation, new_tokens=spec.new_tokens)
    ours, theirs = generation.tokens_per_second, spec.published[device]
    if spec.counts_prompt:      # the prompt's tokens too, over the same time
        ours *= (generation.prompt_length + spec.new_tokens) / spec.new_tokens
    return (f"| {name} | {device} | {generation.batch} | {generation.prompt_length} | {spec.new_tokens} | "
            f"{generation.prefill_seconds * 1e3:,.1f} | {generation.decode_seconds_per_token * 1e3:,.2f} | "
            f"{generation.pcie_bytes_per_token / 1e6:,.2f} | {ours:,.1f} | {theirs} | {ours / theirs:.2f} | "
            f"{seconds:.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", choices=list(ROWS), help="rows (default: all)")
    parser.add_argument("--device", action="append", choices=["e150", "n150"],
                        help="devices (default: each one a row was published for)")
    args = parser.parse_args()
    print("| model | device | batch | decoder prompt | new tokens | prefill ms | decode ms/step | PCIe MB/step | "
          "tokens/s (ours) | tokens/s (published) | ours/published | compile s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.model or list(ROWS):
        for device in args.device or list(ROWS[name].published):
            print(row(name, device), flush=True)


if __name__ == "__main__":
    main()
