"""Host values in and out of a simulator's queues, as the run manifest's feeds describe them: arrays loaded into
rams, samples pushed in the device layout (host transforms, tile padding), entries popped back to the framework
layout."""
from __future__ import annotations

from typing import Iterable

import numpy as np

from ..backend_sim import Simulator
from ..codegen.manifest import QueueFeed
from ..passes.host_io import from_device_layout, to_device_layout


def load_arrays(sim: Simulator, queues: dict[str, QueueFeed], arrays: dict[str, np.ndarray]) -> None:
    """Every queue fed by an array (parameters, constants, sparse operands, optimizer state) gets it."""
    for queue, feed in queues.items():
        if feed.array is not None:
            sim.push(queue, arrays[feed.array])


def push_samples(sim: Simulator, queue: str, feed: QueueFeed, samples: Iterable[np.ndarray]) -> None:
    """One entry per sample (framework layout, a leading dim of 1) in the queue's device layout."""
    sim.push(queue, np.stack([to_device_layout(x, feed.host_transforms, feed.device_shape)
                              .reshape(feed.device_shape[-3:]) for x in samples]))


def pop_samples(sim: Simulator, queue: str, feed: QueueFeed, count: int) -> list[np.ndarray]:
    """`count` entries of an output queue, each back in the framework layout."""
    return [from_device_layout(sim.pop(queue), feed.logical_shape, feed.host_transforms) for _ in range(count)]
