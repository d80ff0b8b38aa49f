"""Which chip of a multi-chip device each op runs on (pybuda-balancer.md §4.4). The `set_chip_break` /
`place_on_new_chip` entries split the schedule at their first op (in schedule order) into parts, one chip each:
the last part on the chip with the PCIe link (the legacy wormhole placer's MMIO-last order: the host reads the
outputs there), the earlier ones on the other chips in turn. A chip break also starts an epoch. Without chip
breaks every op is on the chip with the PCIe link.

A queue sits in the DRAM of the chip that writes it; a queue the host writes (input, parameter, constant, sparse
operand) on the chip of its readers, or on the PCIe chip when they are on several."""
from __future__ import annotations

from typing import Iterable

from ..device import DeviceSpec
from .op_model import BalancerError


def first_of_entries(entries: Iterable, schedule: list[str]) -> list[str]:
    """Per break entry (an op name or a list of names), its first op in schedule order (entries naming no op of
    the schedule are skipped), in schedule order."""
    order = {op: i for i, op in enumerate(schedule)}
    firsts = set()
    for entry in entries:
        present = [n for n in ([entry] if isinstance(entry, str) else entry) if n in order]
        if present:
            firsts.add(min(present, key=order.get))
    return sorted(firsts, key=order.get)


def chip_assignment(schedule: list[str], chip_breaks: Iterable[str], device: DeviceSpec) -> dict[str, int]:
    """The chip of every op of the schedule; a BalancerError when the device has too few chips for the breaks."""
    position = {op: i for i, op in enumerate(schedule)}
    starts = sorted(position[b] for b in chip_breaks)
    if starts and device.chips == 1:
        raise BalancerError(f"set_chip_break({schedule[starts[0]]!r}): device {device.name} has one chip; chip "
                            "breaks need a multi-chip device (n300), or use set_epoch_break")
    if len(starts) >= device.chips:
        names = ", ".join(repr(schedule[s]) for s in starts)
        raise BalancerError(f"set_chip_break: {len(starts)} chip breaks ({names}) need {len(starts) + 1} chips; "
                            f"device {device.name} has {device.chips}: at most {device.chips - 1} chip breaks")
    order = [c for c in range(device.chips) if c != device.mmio_chip][:len(starts)] + [device.mmio_chip]
    chips, part = {}, 0
    for i, op in enumerate(schedule):
        while part < len(starts) and starts[part] <= i:
            part += 1
        chips[op] = order[part]
    return chips


def home_chip(reader_chips: Iterable[int], device: DeviceSpec) -> int:
    """The chip a host-written queue sits on: its readers' chip, or the PCIe chip when they are on several."""
    chips = set(reader_chips)
    return chips.pop() if len(chips) == 1 else device.mmio_chip

