"""Where a queue's buffers sit in DRAM: the channel of each buffer, a function of the queue's name alone so that
the compiler's allocator (which places them) and the balancer's cost (which runs before any allocation) agree."""
from __future__ import annotations

import zlib


def queue_channels(name: str, buffers: int, channels: int) -> tuple[int, ...]:
    """DRAM channel of each of the `buffers` buffers (grid cells, row-major) of queue `name`: consecutive
    channels from the one the name's CRC-32 picks."""
    first = zlib.crc32(name.encode()) % channels
    return tuple((first + i) % channels for i in range(buffers))
