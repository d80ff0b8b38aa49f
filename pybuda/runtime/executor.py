"""Run one microbatch of a compiled model from its netlists, its run manifest and the arrays the manifest names:
the manifest's parts in order over named values, host programs (CPU fallback) on the CPU one sample at a time,
device parts in the backend simulator (host transforms and tile padding of the inputs, the netlist, output
unpadding and transforms). Nothing of the compiler (graphs, placement) is used."""
from __future__ import annotations

from typing import Collection, Sequence

import numpy as np

from ..backend_sim import Simulator
from ..codegen.manifest import DevicePart, HostProgram, ManifestError, RunManifest
from ..device import get_device
from ..netlist import Netlist
from .feeds import load_arrays, pop_samples, push_samples
from .host import run_host
from .training import is_training_netlist


def run(netlists: list[Netlist], manifest: RunManifest, arrays: dict[str, np.ndarray],
        batch: dict[str, np.ndarray], names: Sequence[str] | None = None,
        devices: dict[int, Simulator] | None = None, params: dict[str, int] | None = None,
        programs: Collection[str] | None = None) -> list[np.ndarray | None]:
    """Outputs (model order, framework layout) of one microbatch of model inputs (by name, float32), or the
    values `names` (e.g. the manifest's intermediates too). Values are kept per sample (a value need not have the
    microbatch as its leading dim). Of a training model, the forward: its backward and optimizer host programs do
    not run. With `devices` (netlist index -> simulator, filled on first use), the device parts keep their DRAM
    between calls: arrays are loaded once, and state the netlists write back persists. `params`: further program
    parameters of the inference programs that take them (`p_cache_write_index`). `programs`: run only these
    inference programs (by name), and of the host programs those whose inputs are there; a value nothing computed
    comes back as None."""
    samples = [{name: x[i:i + 1] for name, x in batch.items()} for i in range(manifest.microbatch)]
    for part in manifest.parts:
        if isinstance(part, HostProgram):
            if part.epoch_type == "forward" and (programs is None or all(i in samples[0] for i in part.inputs)):
                for values in samples:
                    values.update(run_host(part, arrays, values))
        else:
            _run_device(netlists[part.netlist], part, manifest.device, arrays, samples, devices, params or {},
                        programs)
    return [np.concatenate([sample[name] for sample in samples], axis=0) if name in samples[0] else None
            for name in (manifest.outputs if names is None else names)]


def _run_device(netlist: Netlist, part: DevicePart, device: str, arrays: dict[str, np.ndarray],
                samples: list[dict[str, np.ndarray]], devices: dict[int, Simulator] | None,
                params: dict[str, int], programs: Collection[str] | None = None) -> None:
    """Run a device part on every sample (its inference `programs` only, if given: the queues they read pushed,
    those they write popped); adds the values it writes to each sample's values."""
    sim = None if devices is None else devices.get(part.netlist)
    if sim is None:
        sim = Simulator(netlist, device=device)
        load_arrays(sim, part.queues, arrays)
        if devices is not None:
            devices[part.netlist] = sim
    training = is_training_netlist(netlist)
    chosen = [p.name for p in netlist.programs if training or programs is None or p.name in programs]
    used = set(part.queues) if training or programs is None else set().union(*map(netlist.queues_of, chosen))
    for queue, feed in part.queues.items():
        if feed.kind == "input" and queue in used:
            push_samples(sim, queue, feed, [values[feed.feed] for values in samples])
    if training:   # its forward program
        sim.run("run_fwd", p_microbatch_count=1)
    else:
        for program in chosen:     # one per subgraph with compile_subgraphs
            takes = sim.program_params(program)
            sim.run(program, p_loop_count=1, **{k: v for k, v in params.items() if k in takes})
    for queue, feed in part.queues.items():
        if feed.kind == "output" and queue in used:
            for values, value in zip(samples, pop_samples(sim, queue, feed, len(samples))):
                values[feed.feed] = value


def check_manifest(netlists: list[Netlist], manifest: RunManifest, arrays: dict[str, np.ndarray]) -> None:
    """ManifestError listing every way the manifest and arrays fail to describe the netlists' host queues and the
    values the parts read."""
    get_device(manifest.device)
    problems = []
    known = set(manifest.input_names)
    parts = manifest.device_parts
    if sorted(p.netlist for p in parts) != list(range(len(netlists))):
        problems.append(f"the device parts run netlists {[p.netlist for p in parts]}; the model has "
                        f"{len(netlists)} netlist(s)")
    for part in manifest.parts:
        if isinstance(part, HostProgram):
            problems += [f"host program reads {name!r}, which no earlier part writes" for name in part.inputs
                         if name not in known]
            problems += [f"host program array {array!r} is missing" for array in part.arrays.values()
                         if array not in arrays]
            problems += [f"host program output {out!r} writes {node!r}, which it has no array of"
                         for out, node in part.writes.items() if node not in part.arrays]
            known |= set(part.outputs)
        elif part.netlist < len(netlists):
            problems += _device_problems(netlists[part.netlist], part, known, arrays)
            known |= {f.feed for f in part.queues.values() if f.kind in ("output", "gradient")}
    problems += [f"output {position} ({name!r}) is written by no part" for position, name in
                 enumerate(manifest.outputs) if name not in known]
    problems += [f"intermediate of op {op!r} ({name!r}) is written by no part" for op, name in manifest.intermediates
                 if name not in known]
    if problems:
        raise ManifestError("the run manifest does not match its netlist:\n  " + "\n  ".join(problems))


def _device_problems(netlist: Netlist, part: DevicePart, known: set[str], arrays: dict[str, np.ndarray]) -> list[str]:
    problems = [f"queue {name!r} is fed by the host but the manifest has no data for it"
                for name, q in netlist.queues.items() if q.input == "HOST" and name not in part.queues]
    for name, feed in part.queues.items():
        queue = netlist.queues.get(name)
        if queue is None:
            problems.append(f"queue {name!r} of the manifest is not in the netlist")
            continue
        rows, cols = queue.effective_tile_dim
        entry = (queue.shape[0], queue.shape[1] * rows, queue.shape[2] * cols)
        if feed.array is not None:
            array = arrays.get(feed.array)
            if array is None:
                problems.append(f"queue {name!r}: array {feed.array!r} is missing")
            elif array.shape[1:] != entry or not 1 <= array.shape[0] <= queue.entries:
                problems.append(f"queue {name!r}: array {feed.array!r} has shape {array.shape}, the queue holds "
                                f"{queue.entries} entries of {entry}")
        elif feed.kind == "input":   # (a loss_gradient queue is fed by the training loop)
            if feed.feed not in known:
                problems.append(f"input queue {name!r} reads {feed.feed!r}, which is neither a model input nor "
                                "written by an earlier part")
            if tuple(feed.device_shape[-3:]) != entry:
                problems.append(f"input queue {name!r}: device shape {feed.device_shape} does not match the queue "
                                f"{entry}")
    return problems
