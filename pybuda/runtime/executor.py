"""Run one microbatch of a netlist in the backend simulator from the netlist, its run manifest and the arrays the
manifest names: host program (CPU fallback), host transforms and tile padding of the inputs, the netlist, output
unpadding and transforms. Nothing of the compiler (graphs, placement) is used."""
from __future__ import annotations

import numpy as np

from ..arch.tms import apply_tms
from ..backend_sim import Simulator
from ..codegen.manifest import HostOperand, HostProgram, ManifestError, RunManifest
from ..device import get_device
from ..netlist import Netlist
from ..ops import registry
from ..passes.host_io import from_device_layout, to_device_layout


def run(netlist: Netlist, manifest: RunManifest, arrays: dict[str, np.ndarray],
        batch: dict[str, np.ndarray]) -> list[np.ndarray]:
    """Outputs (model order, framework layout) of one microbatch of model inputs (by name, float32)."""
    sim = Simulator(netlist, device=manifest.device)
    for queue, feed in manifest.queues.items():
        if feed.array is not None:
            sim.push(queue, arrays[feed.array])
    n = manifest.microbatch
    samples = [_sample_feeds(manifest.host, arrays, {k: v[i:i + 1] for k, v in batch.items()}) for i in range(n)]
    for queue, feed in manifest.queues.items():
        if feed.kind == "input":
            sim.push(queue, np.stack([to_device_layout(s[feed.feed], feed.host_transforms, feed.device_shape)
                                      .reshape(feed.device_shape[-3:]) for s in samples]))
    sim.run(p_loop_count=1)
    outputs = []
    for queue in manifest.outputs:
        feed = manifest.queues[queue]
        outputs.append(from_device_layout(np.stack([sim.pop(queue) for _ in range(n)]), feed.logical_shape,
                                          feed.host_transforms))
    return outputs


def _sample_feeds(host: HostProgram | None, arrays: dict[str, np.ndarray],
                  sample: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """One sample's model inputs plus the device feeds the host program computes from them."""
    feeds = dict(sample)
    if host is None:
        return feeds
    values = {name: sample[name] for name in host.inputs}
    values.update({name: arrays[array] for name, array in host.arrays.items()})
    for op in host.ops:
        values[op.name] = registry.evaluate(op.op_type, [_value(values, o) for o in op.operands], op.attrs)
    feeds.update({feed: _value(values, operand) for feed, operand in host.outputs.items()})
    return feeds


def _value(values: dict[str, np.ndarray], operand: HostOperand) -> np.ndarray:
    return apply_tms(values[operand.src], list(operand.tms)) if operand.tms else values[operand.src]


def check_manifest(netlist: Netlist, manifest: RunManifest, arrays: dict[str, np.ndarray]) -> None:
    """ManifestError listing every way the manifest and arrays fail to describe the netlist's host queues."""
    get_device(manifest.device)
    problems = [f"queue {name!r} is fed by the host but the manifest has no data for it"
                for name, q in netlist.queues.items() if q.input == "HOST" and name not in manifest.queues]
    host = manifest.host
    feedable = set(manifest.input_names) | (set(host.outputs) if host else set())
    for name, feed in manifest.queues.items():
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
            elif array.shape != (1, *entry):
                problems.append(f"queue {name!r}: array {feed.array!r} has shape {array.shape}, the queue holds "
                                f"{(1, *entry)}")
        elif feed.kind == "input":
            if feed.feed not in feedable:
                problems.append(f"input queue {name!r} reads {feed.feed!r}, which is neither a model input nor "
                                "computed by the host program")
            if tuple(feed.device_shape[-3:]) != entry:
                problems.append(f"input queue {name!r}: device shape {feed.device_shape} does not match the queue "
                                f"{entry}")
    for position, name in enumerate(manifest.outputs):
        feed = manifest.queues.get(name)
        if feed is None or feed.kind != "output" or feed.position != position:
            problems.append(f"output {position} ({name!r}) is not an output queue of the manifest at that position")
    if host is not None:
        problems += [f"host program reads {name!r}, which is not a model input" for name in host.inputs
                     if name not in manifest.input_names]
        problems += [f"host program array {array!r} is missing" for array in host.arrays.values()
                     if array not in arrays]
    if problems:
        raise ManifestError("the run manifest does not match its netlist:\n  " + "\n  ".join(problems))
