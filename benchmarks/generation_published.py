"""The published generative rows (`../shared/reference/generation.md` §6: tokens/s at batch 1) compiled at full size
with random weights (`enable_link_past_cache_ios`, Float16_b) and estimated: per row and device, our prefill latency,
decode cycles per token, PCIe bytes per token and tokens/s (new tokens over the prefill and the decode steps of one
sequence, the encoder included, as the published figures count them) next to the published tokens/s. Prints one
Markdown row each (the table of `docs/models.md`).

    PYTHONPATH=. python benchmarks/generation_published.py                 # every row, e150 and n150
    PYTHONPATH=. python benchmarks/generation_published.py --model t5-large --device n150
"""
from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time

import torch
import transformers

import pybuda

# name -> (model builder, sample input, caches' positions, new tokens, published tokens/s by device)
ROWS = {
    "t5-large": (lambda: transformers.T5ForConditionalGeneration(transformers.T5Config(
        vocab_size=32128, d_model=1024, d_kv=64, d_ff=4096, num_layers=24, num_heads=16, decoder_start_token_id=0)),
        lambda: torch.randint(2, 32000, (1, 64)), 64, 63, {"e150": 30, "n150": 75}),
    "flan-t5-large": (lambda: transformers.T5ForConditionalGeneration(transformers.T5Config(
        vocab_size=32128, d_model=1024, d_kv=64, d_ff=2816, num_layers=24, num_heads=16,
        feed_forward_proj="gated-gelu", tie_word_embeddings=False, decoder_start_token_id=0)),
        lambda: torch.randint(2, 32000, (1, 64)), 64, 63, {"e150": 25, "n150": 71}),
    "whisper-small": (lambda: transformers.WhisperForConditionalGeneration(transformers.WhisperConfig(
        vocab_size=51865, num_mel_bins=80, d_model=768, encoder_layers=12, decoder_layers=12,
        encoder_attention_heads=12, decoder_attention_heads=12, encoder_ffn_dim=3072, decoder_ffn_dim=3072,
        max_source_positions=1500, max_target_positions=448, decoder_start_token_id=50258)),
        lambda: torch.randn(1, 80, 3000), 288, 256, {"e150": 3.7, "n150": 16}),
}


def row(name: str, device: str) -> str:
    build, sample, positions, new, published = ROWS[name]
    torch.manual_seed(0)
    model = build().eval()
    config = pybuda.CompilerConfig(enable_link_past_cache_ios=True, default_df_override="Float16_b",
                                   generation_max_length=positions)
    with tempfile.TemporaryDirectory() as out:
        start = time.perf_counter()
        compiled = pybuda.compile(model, sample(), device=device, config=config, output_dir=out)
        seconds = time.perf_counter() - start
        generation = dataclasses.replace(compiled.perf.generation, new_tokens=new)
    ours, theirs = generation.tokens_per_second, published[device]
    return (f"| {name} | {device} | 1 | {generation.prompt_length} | {new} | {generation.prefill_seconds * 1e3:,.1f} | "
            f"{generation.decode_seconds_per_token * 1e3:,.2f} | {generation.pcie_bytes_per_token / 1e6:,.2f} | "
            f"{ours:,.1f} | {theirs} | {ours / theirs:.2f} | {seconds:.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", choices=list(ROWS), help="rows (default: all)")
    parser.add_argument("--device", action="append", choices=["e150", "n150"], help="devices (default: both)")
    args = parser.parse_args()
    print("| model | device | batch | decoder prompt | new tokens | prefill ms | decode ms/token | PCIe MB/token | "
          "tokens/s (ours) | tokens/s (published) | ours/published | compile s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.model or list(ROWS):
        for device in args.device or ["e150", "n150"]:
            print(row(name, device), flush=True)


if __name__ == "__main__":
    main()
