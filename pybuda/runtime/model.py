"""`RuntimeModel`: a compiled model as the runtime sees it (netlist + run manifest + arrays); callable."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ..codegen.manifest import RunManifest
from ..netlist import Netlist
from .executor import check_manifest, run
from .inputs import checked_inputs
from .outputs import rebuild


class RuntimeModel:
    """Runs a netlist in the backend simulator from the netlist, its run manifest and arrays alone (no framework
    model, no compiler graphs). `save` writes a TTI image; `pybuda.load` reads one back.

    `source` says where the netlist came from (its file, or the TTI image) for messages and summaries."""

    def __init__(self, netlist: Netlist, netlist_text: str, manifest: RunManifest, arrays: dict[str, np.ndarray],
                 source: str | Path = ""):
        check_manifest(netlist, manifest, arrays)
        self.netlist = netlist
        self.netlist_text = netlist_text
        self.manifest = manifest
        self.arrays = arrays
        self.source = str(source)
        self.tti_path: Path | None = None    # the image it was loaded from (pybuda.load)
        self._perf = None

    @property
    def name(self) -> str:
        return self.manifest.model

    @property
    def device(self) -> str:
        return self.manifest.device

    @property
    def microbatch(self) -> int:
        return self.manifest.microbatch

    @property
    def input_names(self) -> list[str]:
        return self.manifest.input_names

    @property
    def input_shapes(self) -> list[tuple]:
        """Shape of each input for one call (the leading dim is the microbatch)."""
        return [i.shape for i in self.manifest.inputs]

    @property
    def output_names(self) -> list[str]:
        return list(self.manifest.outputs)

    @property
    def perf(self):
        """The simulator's performance estimate of the netlist (computed once, on first use)."""
        if self._perf is None:
            from ..backend_sim.timing import estimate
            self._perf = estimate(self.netlist, device=self.device)
        return self._perf

    def __call__(self, *inputs):
        """Run the netlist in the backend simulator on a microbatch of inputs (torch tensors or numpy arrays);
        returns torch tensors in the structure the torch model returns (a PyBudaModule: one tensor, or a tuple).
        InputError names an input whose count, shape or dtype family differs from the compiled ones."""
        batch = checked_inputs(self.manifest, inputs)
        outputs = run(self.netlist, self.manifest, self.arrays, batch)
        return rebuild(self.manifest.output_structure,
                       [torch.from_numpy(np.ascontiguousarray(o)) for o in outputs])

    def save(self, path: str | Path) -> Path:
        """Write the model as one TTI image file (atomically); `pybuda.load(path)` runs it in any process."""
        from .tti import save_tti
        return save_tti(path, self.netlist_text, self.manifest, self.arrays)

    def summary(self) -> str:
        """Where ops run (host fallback vs device), the netlist, epochs, cores and the estimate."""
        host_ops = self.manifest.host.op_names() if self.manifest.host else []
        perf = self.perf
        return "\n".join([
            f"model {self.name} on {self.device}, microbatch {self.microbatch}",
            f"host (CPU fallback) ops: {', '.join(host_ops) if host_ops else 'none'}",
            f"device ops: {len(self.netlist.ops)}",
            f"netlist: {self.source}",
            f"epochs: {len(perf.epochs)}; cores per epoch: {[e.cores for e in perf.epochs]}",
            f"estimated samples/second: {perf.samples_per_second:,.1f}",
        ])
