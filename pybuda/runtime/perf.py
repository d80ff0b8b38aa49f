"""`ModelPerf`: the estimate of a compiled model over all its parts: each netlist's simulator estimate (its
epochs, ops and the transfers its queues model), summed, plus host transfers outside the programs (a host
optimizer's gradients and parameters over PCIe); host (CPU fallback) ops and the host optimizer's arithmetic are
listed, not timed."""
from __future__ import annotations

import dataclasses

from ..backend_sim.timing import PerfReport


@dataclasses.dataclass(frozen=True)
class ModelPerf:
    """`parts`: one PerfReport per netlist program (`compile_subgraphs`: several), in run order; `host_ops`: the
    ops run on the host; `transfer_cycles`: device cycles of host transfers outside the programs."""

    parts: tuple[PerfReport, ...]
    host_ops: tuple[str, ...]
    samples: int
    transfer_cycles: int = 0

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
        return "\n".join(lines)

    summary = to_text
