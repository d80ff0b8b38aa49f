"""`RuntimeModel`: a compiled model as the runtime sees it (netlists + run manifest + arrays); callable."""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from ..codegen.manifest import DevicePart, HostProgram, RunManifest
from ..errors import UsageError
from ..ir import ShapeOnly
from ..netlist import Netlist
from ..passes.loopback import STATE
from .executor import check_manifest, run
from .generate import check_step_start, generate, generation_perf
from .inputs import InputError, checked_inputs
from .outputs import rebuild
from .perf import ModelPerf
from .training import epoch_counts, is_training_netlist, training_step_perf


class ShapeOnlyError(UsageError):
    """A run or an image of a model compiled shape-only (`pybuda.ir.ShapeOnly`)."""


class RuntimeModel:
    """Runs a compiled model from its netlists (one per device part; the backend simulator runs them), its run
    manifest (which also holds the host programs) and arrays alone (no framework model, no compiler graphs).
    `save` writes a TTI image; `pybuda.load` reads one back. A single netlist may be given for both sequences.

    `source` says where the netlists came from (the first file, or the TTI image) for messages and summaries."""

    def __init__(self, netlists: Netlist | Sequence[Netlist], netlist_texts: str | Sequence[str],
                 manifest: RunManifest, arrays: dict[str, np.ndarray], source: str | Path = ""):
        self.netlists = [netlists] if isinstance(netlists, Netlist) else list(netlists)
        self.netlist_texts = [netlist_texts] if isinstance(netlist_texts, str) else list(netlist_texts)
        check_manifest(self.netlists, manifest, arrays)
        self.manifest = manifest
        self.arrays = arrays
        self.source = str(source)
        self.tti_path: Path | None = None    # the image it was loaded from (pybuda.load)
        self.intermediates: dict[str, torch.Tensor] = {}    # op -> its saved output, of the last call
        self._perf = None
        # a model with device state (`loopback_outputs`) keeps its simulated devices between calls
        stateful = any(f.kind == STATE for p in manifest.device_parts for f in p.queues.values())
        self._devices: dict | None = {} if stateful else None
        self.shape_only = sorted(k for k, v in arrays.items() if isinstance(v, ShapeOnly))   # arrays without numbers

    def _require_numbers(self, what: str) -> None:
        """ShapeOnlyError for `what` (a run, an image) of a model compiled without some weights' numbers."""
        if self.shape_only:
            raise ShapeOnlyError(f"model {self.name!r} was compiled shape-only (its weights were on torch's meta "
                                 f"device: {len(self.shape_only)} arrays, e.g. {', '.join(self.shape_only[:3])}): its "
                                 f"netlist, placement and estimate (perf) are the model's, but {what} needs the "
                                 "weights' numbers; load the weights and compile again")

    @property
    def devices(self) -> dict:
        """The simulated devices of a model with device state, by netlist index (empty before the first call or
        after `reset_state`; none kept for a stateless model)."""
        return dict(self._devices or {})

    def reset_state(self) -> None:
        """Device state (`loopback_outputs`) back to its compile-time value: the next call loads the device
        afresh."""
        if self._devices is not None:
            self._devices.clear()

    @property
    def netlist(self) -> Netlist | None:
        """The first netlist (None for a model that runs on the host alone)."""
        return self.netlists[0] if self.netlists else None

    @property
    def netlist_text(self) -> str | None:
        return self.netlist_texts[0] if self.netlist_texts else None

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
    def perf(self) -> ModelPerf:
        """The simulator's performance estimate of every netlist, summed (computed once, on first use); of a training
        netlist, one training step of one microbatch (run_fwd, run_bwd, run_opt)."""
        if self._perf is None:
            from ..backend_sim.timing import estimate
            if self.netlists and is_training_netlist(self.netlists[0]):
                self._perf = training_step_perf(self.netlists[0], self.manifest)
            else:
                parts = tuple(estimate(nl, device=self.device, program=p.name)      # every program
                              for nl in self.netlists for p in nl.programs)
                self._perf = ModelPerf(parts, tuple(op.name for op in self.manifest.host_ops()), self.microbatch,
                                       generation=generation_perf(self, parts) if self.manifest.generation else None)
        return self._perf

    @property
    def program_names(self) -> list[str]:
        """The netlists' programs, in run order (a call runs them all)."""
        return [p.name for nl in self.netlists for p in nl.programs]

    @property
    def pages(self) -> int:
        """How many pages the model's paged state holds per sample (`loopback_outputs` of one page; the fewest of
        several; 0: none), each its writer view's entry: the legal `cache_write_index` values are 0 .. pages - 1."""
        return min((q.entries // self.microbatch for nl in self.netlists for q in nl.queues.values()
                    if q.alias is not None), default=0)

    def __call__(self, *inputs, cache_write_index: int | None = None, programs: Sequence[str] | None = None):
        """Run the parts (netlists in the backend simulator, fallback ops on the host) on a microbatch of inputs
        (torch tensors or numpy arrays); returns torch tensors in the structure the torch model returns (a
        PyBudaModule: one tensor, or a tuple). InputError names an input whose count, shape or dtype family differs
        from the compiled ones. A model with paged state takes the page this run writes, `cache_write_index`.
        `programs` runs only those netlist programs (`compile_subgraphs`; see `program_names`), an output none of
        them computes coming back as None."""
        self._require_numbers("a run")
        batch = checked_inputs(self.manifest, inputs)
        params = _write_index(cache_write_index, self.pages)
        if self.manifest.generation is not None:
            check_step_start(self.manifest.generation, batch[self.input_names[1]], cache_write_index)
        if programs is not None and set(programs) - set(self.program_names):
            raise InputError(f"programs={list(programs)!r}: legal: names of {', '.join(self.program_names)}")
        saved = self.manifest.intermediates
        values = [None if v is None else torch.from_numpy(np.ascontiguousarray(v)) for v in run(
            self.netlists, self.manifest, self.arrays, batch, [*self.manifest.outputs, *(v for _, v in saved)],
            self._devices, params, programs)]
        outputs = values[:len(self.manifest.outputs)]
        self.intermediates = {op: value for (op, _), value in zip(saved, values[len(outputs):])}
        return rebuild(self.manifest.output_structure, outputs)

    def generate(self, input_ids, max_new_tokens: int = 20, eos_token_id=None) -> torch.Tensor:
        """Greedy decoding with a compiled decode step (`enable_link_past_cache_ios`): the prompts (batch, n)
        followed by the new token ids, as Hugging Face `generate(do_sample=False)` (`runtime/generate.py`)."""
        return generate(self, input_ids, max_new_tokens, eos_token_id)

    def save(self, path: str | Path) -> Path:
        """Write the model as one TTI image file (atomically); `pybuda.load(path)` runs it in any process."""
        from .tti import save_tti
        self._require_numbers("a TTI image")
        return save_tti(path, self.netlist_texts, self.manifest, self.arrays)

    def summary(self) -> str:
        """Where ops run (the parts in order: host fallback ops, device netlists), epochs, cores and the estimate."""
        perf = self.perf
        training = self.netlists and is_training_netlist(self.netlists[0])
        return "\n".join([
            f"model {self.name} on {self.device}, microbatch {self.microbatch}",
            f"host (CPU fallback) ops: {', '.join(perf.host_ops) if perf.host_ops else 'none'}",
            f"parts: {' -> '.join(_part_text(p) for p in self.manifest.parts)}",
            f"device ops: {sum(len(nl.ops) for nl in self.netlists)}",
            f"netlist: {self.source}",
            f"epochs: {len(perf.epochs)}; cores per epoch: {[e.cores for e in perf.epochs]}",
            *([f"training epochs: {epoch_counts(self.netlists[0])}",
               f"estimated training samples/second ({_step_text(perf)}): {perf.samples_per_second:,.1f}"]
              if training else [f"estimated samples/second: {perf.samples_per_second:,.1f}"]),
        ])


def _write_index(index: int | None, pages: int) -> dict[str, int]:
    """The program parameter of a run's write index; InputError unless a model with `pages` pages gets one of
    them and a model without paged state none."""
    if not pages:
        if index is not None:
            raise InputError(f"cache_write_index={index}: the model has no paged state (loopback_outputs of one page "
                             "of an input)")
        return {}
    if not isinstance(index, int) or not 0 <= index < pages:
        raise InputError(f"cache_write_index={index!r}: the model writes one page of its state each run; legal: "
                         f"the page, 0..{pages - 1}")
    return {"p_cache_write_index": index}


def _part_text(part: HostProgram | DevicePart) -> str:
    if isinstance(part, HostProgram):
        kind = "" if part.epoch_type == "forward" else f" {part.epoch_type}"
        return f"host{kind} ({len(part.ops)} ops)"
    return f"device (netlist {part.netlist})"


def _step_text(perf) -> str:
    """What a training step's estimate sums: its programs, and a host optimizer's transfers."""
    return " + ".join([p.program for p in perf.parts] + (["host optimizer transfers"] if perf.transfer_cycles else []))
