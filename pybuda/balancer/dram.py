"""DRAM queue placement (pybuda-balancer.md §4.6): a DRAM channel and an address for every buffer of every DRAM
queue of the plan (`queues.QueuePlan`), as the backend's allocator does it.

Channels, per buffer (a queue's buffers spread over channels, one per grid cell of its writer, or per channel for
host-written queues), by `dram_placement_algorithm`:
- ROUND_ROBIN: the next channel in turn, over all buffers of all queues in plan order;
- ROUND_ROBIN_FLIP_FLOP: round robin within one half of the channels, the half chosen by the parity of the epoch
  that writes the queue (queues the host writes: all channels), so an epoch's writes and the next epoch's reads
  use different channels;
- GREATEST_CAPACITY: the channel with the most free bytes;
- CLOSEST: the channel nearest (NoC hops) to the cores that read and write the queue, the least used one among
  equally near ones.
Parameters, constants and sparse operands go to the channels nearest their readers whatever the policy, each
buffer of a queue to a channel its other buffers do not use while there is one (so a weight's buffers still spread
over every channel). `manual_dram_queue_placement` pins a queue's buffers to a channel. A buffer that does not
fit its channel goes to the next channel that has room.

Before the plan exists (while the balancer compares candidate plans), a queue's buffers are assumed in
consecutive channels from one its name picks (`assumed_channels`); the plan's final cost and the netlist use the
placement.

Addresses: static queues (inputs, parameters, constants, sparse operands, outputs) first, from the bottom of each
channel; epoch-to-epoch queues dynamically, over their lifetime (the program allocates them before their writer's
epoch and frees them after their last reader's), first fit at the lowest address free during that lifetime.
When the device's DRAM cannot hold the model, `DramFullError` says by how much.
"""
from __future__ import annotations

import bisect
import collections

import dataclasses
import zlib

from ..device import DeviceSpec
from ..errors import UserInputError
from .queues import QueuePlan

DRAM_BASE = 0x10000000     # first DRAM byte the allocator hands out on every channel
ALIGN = 32


def assumed_channels(queue: str, buffers: int, channels: int) -> tuple[int, ...]:
    """The channels a queue's `buffers` buffers are assumed in before placement: consecutive channels from the one
    the CRC-32 of its name picks (deterministic, spread like a placement that does not know the plan)."""
    first = zlib.crc32(queue.encode()) % channels
    return tuple((first + i) % channels for i in range(buffers))


class DramFullError(UserInputError):
    """The device's DRAM cannot hold the model's queues; the message says what they need and what there is."""


@dataclasses.dataclass(frozen=True)
class DramPlacement:
    """(channel, address) of every buffer of every DRAM queue (channels of the queue's chip), which queues are
    allocated dynamically, and the chip of each queue not on chip 0 with the device it is on."""

    buffers: dict
    dynamic: frozenset
    chips: dict = dataclasses.field(default_factory=dict)
    device: DeviceSpec | None = None

    def channels(self, queue: str) -> tuple:
        """The `DeviceSpec.system_channel` ids of the queue's buffers."""
        chip = self.chips.get(queue, 0)
        return tuple(self.device.system_channel(chip, ch) if chip else ch for ch, _ in self.buffers[queue])


def place_dram(queues: dict[str, QueuePlan], device: DeviceSpec, policy: str, manual: dict[str, int],
               cores: dict[str, list[tuple]]) -> DramPlacement:
    """Place every DRAM queue of `queues`, each in the DRAM of its chip; `cores`: the (row, col) cores of each op
    (for CLOSEST and parameters); `manual`: queue -> pinned channel. A queue that aliases another (a paged
    state's writer view) is that queue's buffers."""
    dram = [q for q in queues.values() if q.loc == "dram" and q.alias is None]
    chips = sorted({q.chip for q in dram})
    for chip in chips:
        _check_capacity([q for q in dram if q.chip == chip], device, chip if len(chips) > 1 else None)
    choosers = {chip: _Chooser(device, policy, cores) for chip in chips}
    spaces = {chip: _Space(device) for chip in chips}
    buffers: dict[str, tuple] = {}
    for q in sorted(dram, key=lambda q: q.lifetime is not None):        # static first
        placed = []
        for _ in range(q.buffers):
            preferred = [manual[q.name]] if q.name in manual else choosers[q.chip].order(q, spaces[q.chip], placed)
            placed.append(spaces[q.chip].allocate(q, preferred))
        buffers[q.name] = tuple(placed)
    buffers.update({q.name: buffers[q.alias] for q in queues.values() if q.alias is not None})
    return DramPlacement(buffers, frozenset(q.name for q in dram if q.lifetime is not None),
                         {q.name: q.chip for q in dram if q.chip}, device)


def _check_capacity(dram: list[QueuePlan], device: DeviceSpec, chip: int | None) -> None:
    """DramFullError if the static queues plus the most dynamic bytes live at once exceed the DRAM of one chip
    (`chip`, None on a single-chip plan)."""
    static = sum(q.buffers * _aligned(q.buffer_bytes) for q in dram if q.lifetime is None)
    epochs = {e for q in dram if q.lifetime for e in range(q.lifetime[0], q.lifetime[1] + 1)}
    dynamic = max((sum(q.buffers * _aligned(q.buffer_bytes) for q in dram if q.lifetime and
                       q.lifetime[0] <= e <= q.lifetime[1]) for e in epochs), default=0)
    have = device.dram_channels * (device.dram_channel_bytes - DRAM_BASE)
    if static + dynamic > have:
        weights = sum(q.buffers * _aligned(q.buffer_bytes) for q in dram if q.kind in ("parameter", "constant"))
        remedy = ("weights in a smaller format shrink them (configure_mixed_precision(op_type='matmul', input_df="
                  "{1: (DataFormat.Bfp8_b, True)}), or default_df_override)" if weights > have // 2 else
                  "a smaller microbatch shrinks the input, output and epoch-to-epoch queues")
        raise DramFullError(f"the model's DRAM queues need {static + dynamic:,} bytes ({static:,} static: inputs, "
                            f"parameters, constants, outputs, of which {weights:,} parameters and constants; "
                            f"{dynamic:,} for the epoch-to-epoch queues live at once) but {device.name}"
                            f"{'' if chip is None else f' chip {chip}'} has {have:,} bytes of DRAM for queues: "
                            f"{static + dynamic - have:,} bytes too many; {remedy}")


def _aligned(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


class _Space:
    """Per channel the blocks allocated, by start address: (start, end, first epoch, last epoch); static blocks
    live always. `floor[ch]`: the end of the run of static blocks from the bottom of the channel (nothing fits
    below it, and every block that starts below it ends there), where a fit starts looking. A queue that lives
    some epochs only meets the static blocks above the floor (`above[ch]`) and the blocks alive in those epochs
    (`alive[ch][epoch]`)."""

    def __init__(self, device: DeviceSpec):
        self.device = device
        self.blocks: list[list[tuple]] = [[] for _ in range(device.dram_channels)]
        self.floor = [DRAM_BASE] * device.dram_channels
        self.above: list[list[tuple]] = [[] for _ in range(device.dram_channels)]
        self.alive: list[dict[int, list[tuple]]] = [collections.defaultdict(list)
                                                    for _ in range(device.dram_channels)]

    def free_bytes(self, ch: int) -> int:
        used = max((end for _, end, _, _ in self.blocks[ch]), default=DRAM_BASE)
        return self.device.dram_channel_bytes - used

    def allocate(self, q: QueuePlan, preferred: list[int]) -> tuple:
        """(channel, address) of one buffer of `q`: the first of `preferred`, then the next channels after the
        first preferred one (wrapping), that has room for it during its lifetime."""
        size = _aligned(q.buffer_bytes)
        first, last = q.lifetime if q.lifetime else (-1, 1 << 30)
        start = preferred[0] if preferred else 0           # then onwards from the preferred one, wrapping
        channels = self.device.dram_channels
        order = list(dict.fromkeys([*preferred, *((start + i) % channels for i in range(channels))]))
        for ch in order:
            addr = self._fit(ch, size, q.lifetime)
            if addr is not None:
                block = (addr, addr + size, first, last)
                bisect.insort(self.blocks[ch], block)
                if q.lifetime is None and addr <= self.floor[ch]:
                    self.floor[ch] = max(self.floor[ch], _aligned(addr + size))
                elif q.lifetime is None:
                    bisect.insort(self.above[ch], block)
                else:
                    for epoch in range(first, last + 1):
                        self.alive[ch][epoch].append(block)
                return (ch, addr)
        raise DramFullError(f"queue {q.name!r}: no DRAM channel of {self.device.name} has {size:,} free bytes for "
                            f"one of its {q.buffers} buffers (largest free: {max(map(self.free_bytes, order)):,} "
                            "bytes); a smaller microbatch shrinks the queues")

    def _fit(self, ch: int, size: int, lifetime: tuple[int, int] | None) -> int | None:
        """The lowest address of channel `ch` with `size` bytes free during `lifetime` (first and last epoch; None:
        always), None if there is none."""
        addr = self.floor[ch]
        if lifetime is None:
            blocks = self.blocks[ch][bisect.bisect_left(self.blocks[ch], (addr,)):]
        else:
            met = {b for epoch in range(lifetime[0], lifetime[1] + 1) for b in self.alive[ch].get(epoch, ())}
            blocks = sorted(met.union(self.above[ch]))
        for s, e, _, _ in blocks:
            if addr + size <= s:
                break
            addr = max(addr, _aligned(e))
        return addr if addr + size <= self.device.dram_channel_bytes else None


class _Chooser:
    """The channel order of one buffer under a placement policy."""

    def __init__(self, device: DeviceSpec, policy: str, cores: dict[str, list[tuple]]):
        self.device, self.policy, self.cores = device, policy, cores
        self.next = 0
        self.next_half = [0, 0]
        self.used = [0] * device.dram_channels
        self.hops: dict[str, list[int]] = {}      # the current queue's NoC hops per channel

    def order(self, q: QueuePlan, space: _Space, placed: list[tuple]) -> list[int]:
        """Channels for the next buffer of `q` (`placed`: its buffers so far), the preferred first."""
        taken: dict[int, int] = {}
        for ch, _ in placed:
            taken[ch] = taken.get(ch, 0) + 1
        channels = self._order(q, space, taken)
        self.used[channels[0]] += 1
        return channels

    def _order(self, q: QueuePlan, space: _Space, taken: dict[int, int]) -> list[int]:
        n = self.device.dram_channels
        if self.policy == "CLOSEST" or q.kind in ("parameter", "constant", "sparse", "optimizer_parameter",
                                                 "optimizer_state", "parameter_residual",
                                                 "gradient_accumulator", "state"):
            return self._closest(q, taken)
        if self.policy == "GREATEST_CAPACITY":
            return sorted(range(n), key=lambda ch: (-space.free_bytes(ch), ch))
        if self.policy == "ROUND_ROBIN_FLIP_FLOP" and q.writer != "HOST":
            half = q.writer_epoch % 2
            channels = [ch for ch in range(n) if ch % 2 == half]
            ch = channels[self.next_half[half] % len(channels)]
            self.next_half[half] += 1
            return [ch]
        ch = self.next % n
        self.next += 1
        return [ch]

    def _closest(self, q: QueuePlan, taken: dict[int, int]) -> list[int]:
        """Channels holding fewest of the queue's buffers so far first, then by total NoC hops to the cores of its
        readers and writer, then the least used."""
        if q.name not in self.hops:
            cores = [c for op in (*q.readers, q.writer) for c in self.cores.get(op, ())]
            self.hops = {q.name: [sum(self.device.noc_hops(c, ch) for c in cores)
                                  for ch in range(self.device.dram_channels)]}
        hops = self.hops[q.name]
        return sorted(range(self.device.dram_channels), key=lambda ch: (taken.get(ch, 0), hops[ch], self.used[ch], ch))
