"""Which chip of a multi-chip device each op runs on (pybuda-balancer.md §4.4). The `set_chip_break` /
`place_on_new_chip` entries split the schedule at their first op (in schedule order) into parts, one chip each:
the last part on the chip with the PCIe link (the legacy wormhole placer's MMIO-last order: the host reads the
outputs there), the earlier ones on the other chips in turn; `override_op_placement(op, chip_id=)` puts the part
holding op on that chip instead. A chip break also starts an epoch. Without chip breaks or pins every op is on the
chip with the PCIe link.

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


def chip_assignment(schedule: list[str], chip_breaks: Iterable[str], device: DeviceSpec,
                    pinned: dict[str, int] | None = None) -> dict[str, int]:
    """The chip of every op of the schedule: the parts between chip breaks in the default order (module
    docstring), except that a part holding an op of `pinned` (`override_op_placement(op, chip_id=)`) runs on that
    chip and the others take the chips left. A BalancerError when the device has too few chips for the breaks, a
    pin names no chip of the device, or the pins of one part (or of two parts on one chip) disagree."""
    position = {op: i for i, op in enumerate(schedule)}
    starts = sorted(position[b] for b in chip_breaks)
    if starts and device.chips == 1:
        raise BalancerError(f"set_chip_break({schedule[starts[0]]!r}): device {device.name} has one chip; chip "
                            "breaks need a multi-chip device (n300), or use set_epoch_break")
    if len(starts) >= device.chips:
        names = ", ".join(repr(schedule[s]) for s in starts)
        raise BalancerError(f"set_chip_break: {len(starts)} chip breaks ({names}) need {len(starts) + 1} chips; "
                            f"device {device.name} has {device.chips}: at most {device.chips - 1} chip breaks")
    part_of = {op: sum(s <= i for s in starts) for op, i in position.items()}
    chip_of_part = _pinned_parts(part_of, pinned or {}, device)
    free = [c for c in range(device.chips) if c != device.mmio_chip and c not in chip_of_part.values()]
    unpinned = [p for p in range(len(starts) + 1) if p not in chip_of_part]
    if unpinned and device.mmio_chip not in chip_of_part.values():     # the last free part on the PCIe chip
        chip_of_part[unpinned.pop()] = device.mmio_chip
    chip_of_part.update(zip(unpinned, free))
    return {op: chip_of_part[part] for op, part in part_of.items()}


def _pinned_parts(part_of: dict[str, int], pinned: dict[str, int], device: DeviceSpec) -> dict[int, int]:
    """The chip of each schedule part holding a pinned op (pins of ops off the schedule are skipped)."""
    chip_of_part: dict[int, int] = {}
    pinned_by: dict[int, str] = {}
    for op, chip in pinned.items():
        if op not in part_of:
            continue
        if not 0 <= chip < device.chips:
            raise BalancerError(f"override_op_placement({op!r}, chip_id={chip}): device {device.name} has chips "
                                f"0..{device.chips - 1}")
        part = part_of[op]
        if chip_of_part.get(part, chip) != chip:
            raise BalancerError(f"override_op_placement: {pinned_by[part]!r} (chip_id={chip_of_part[part]}) and "
                                f"{op!r} (chip_id={chip}) are in one part of the schedule, which runs on one chip; "
                                f"set_chip_break between them, or pin them to one chip")
        other = next((p for p, c in chip_of_part.items() if c == chip and p != part), None)
        if other is not None:
            raise BalancerError(f"override_op_placement: {pinned_by[other]!r} and {op!r} (chip_id={chip}) are in "
                                "different parts of the schedule (between chip breaks), and a chip runs one part; "
                                "pin them to different chips, or remove the chip break between them")
        chip_of_part[part], pinned_by[part] = chip, op
    return chip_of_part


def home_chip(reader_chips: Iterable[int], device: DeviceSpec) -> int:
    """The chip a host-written queue sits on: its readers' chip, or the PCIe chip when they are on several."""
    chips = set(reader_chips)
    return chips.pop() if len(chips) == 1 else device.mmio_chip

