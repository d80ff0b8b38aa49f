"""`ModelPerf`: the estimate of a compiled model over all its parts: each netlist's simulator estimate (its
epochs, ops and the transfers its queues model), summed, plus host transfers outside the programs (a host
optimizer's gradients and parameters over PCIe); host (CPU fallback) ops and the host optimizer's arithmetic are
listed, not timed."""
from __future__ import annotations

import dataclasses

from ..backend_sim.timing import PerfReport
from ..errors import UsageError


@dataclasses.dataclass(frozen=True)
class GenerationPerf:
    """The estimate of generating with a decode step (`enable_link_past_cache_ios`) at the compiled prompt length
    and generation length, for the `batch` sequences a step decodes at once (the compiled microbatch): its encoder
    programs once (an encoder-decoder's; `encoder_cycles`), the prompt page by page (`prefill`, ending with the step
    that gives the first new token), then one step per further token (`step_cycles` each, a token of every
    sequence). `pcie_bytes_per_token`: what crosses PCIe in one step (the host queues the step program reads and
    writes, for every sequence), in the estimate."""

    prompt_length: int
    new_tokens: int
    page: int
    clock_hz: float
    encoder_cycles: int
    step_cycles: int
    pcie_bytes_per_token: int
    batch: int = 1

    @property
    def prefill_steps(self) -> int:
        return -(-self.prompt_length // self.page)

    @property
    def prefill_seconds(self) -> float:
        """Latency to the first new token: the encoder and the prompt's pages."""
        return (self.encoder_cycles + self.prefill_steps * self.step_cycles) / self.clock_hz

    @property
    def decode_seconds_per_token(self) -> float:
        return self.step_cycles / self.clock_hz

    @property
    def tokens_per_second(self) -> float:
        """New tokens per second of the batch's sequences together, the prefill included."""
        seconds = self.prefill_seconds + (self.new_tokens - 1) * self.decode_seconds_per_token
        return self.batch * self.new_tokens / seconds if seconds > 0 else 0.0

    def to_text(self) -> str:
        return "\n".join([
            f"generation: prompt {self.prompt_length} tokens, {self.new_tokens} new tokens, batch {self.batch} "
            "(decoded at once: a token of each sequence per step)",
            f"  prefill (encoder {self.encoder_cycles:,} cycles + {self.prefill_steps} step(s)): "
            f"{self.prefill_seconds * 1e3:,.3f} ms",
            f"  decode step: {self.step_cycles:,} cycles per token ({self.decode_seconds_per_token * 1e3:,.3f} ms), "
            f"{self.pcie_bytes_per_token:,} bytes over PCIe per token",
            f"  tokens/second: {self.tokens_per_second:,.1f}",
        ])


@dataclasses.dataclass(frozen=True)
class ModelPerf:
    """`parts`: one PerfReport per netlist program (`compile_subgraphs`: several), in run order; `host_ops`: the
    ops run on the host; `transfer_cycles`: device cycles of host transfers outside the programs."""

    parts: tuple[PerfReport, ...]
    host_ops: tuple[str, ...]
    samples: int
    transfer_cycles: int = 0
    generation: GenerationPerf | None = None    # a decode step's (`enable_link_past_cache_ios`)

    @property
    def total_cycles(self) -> int:
        return sum(p.total_cycles for p in self.parts) + self.transfer_cycles

    @property
    def seconds(self) -> float:
        transfers = self.transfer_cycles / self.parts[0].clock_hz if self.transfer_cycles else 0.0
        return sum(p.seconds for p in self.parts) + transfers

    @property
    def samples_per_second(self) -> float:
        """Samples per second on the device (0.0 for a model that runs on the host alone)."""
        return self.samples / self.seconds if self.seconds > 0 else 0.0

    @property
    def tokens_per_second(self) -> float:
        """A decode step's new tokens per second at the compiled prompt and generation length (`generation`)."""
        return self._generation().tokens_per_second

    @property
    def prefill_seconds(self) -> float:
        """A decode step's latency to the first new token (`generation`)."""
        return self._generation().prefill_seconds

    @property
    def decode_cycles(self) -> int:
        """A decode step's device cycles per new token (`generation`)."""
        return self._generation().step_cycles

    def _generation(self) -> GenerationPerf:
        if self.generation is None:
            raise UsageError("the generation estimate (tokens_per_second, prefill_seconds, decode_cycles) is a "
                             "decode step's: compile with CompilerConfig(enable_link_past_cache_ios=True)")
        return self.generation

    @property
    def epochs(self) -> list:
        """Every netlist's epochs, in run order."""
        return [e for p in self.parts for e in p.epochs]

    @property
    def ops(self) -> list:
        return [o for p in self.parts for o in p.ops]

    def to_text(self, top_ops: int = 10) -> str:
        """Each device part's summary (see PerfReport.to_text), then the totals and the host ops."""
        lines = []
        for k, part in enumerate(self.parts):
            lines += [f"== device part {k} (netlist {k}) ==", part.to_text(top_ops)]
        if self.transfer_cycles:
            lines.append(f"host optimizer transfers (gradients out, parameters in, over PCIe): "
                         f"{self.transfer_cycles:,} cycles")
        lines.append(f"total: {self.total_cycles:,} cycles over {len(self.parts)} device part(s), "
                     f"{self.samples_per_second:,.1f} samples/s")
        lines.append(f"host (CPU fallback) ops, not timed: {', '.join(self.host_ops) if self.host_ops else 'none'}")
        if self.generation is not None:
            lines.append(self.generation.to_text())
        return "\n".join(lines)

    summary = to_text
