"""Legacy SoC descriptors (`backend_device_descriptor_path`): the YAML the legacy backend described a chip with
(`grid: {x_size, y_size}`, `functional_workers: [x-y, ...]`, `dram: [[x-y, ...], ...]`, `worker_l1_size`,
`arch_name`). A descriptor names the worker cores a board has: one whose rows are a subset of the device's
(harvested rows missing) gives the compile that logical grid, as `harvesting_mask` does; the arch, the NoC size,
the worker columns, the L1 size and the DRAM channels must be the device's (other chips are not modelled)."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml

from ..errors import UserInputError

ARCH_NAMES = {"GRAYSKULL": "grayskull", "WORMHOLE_B0": "wormhole_b0"}


@dataclasses.dataclass(frozen=True)
class SocDescriptor:
    """What a SoC descriptor says about the chip."""

    path: str
    arch: str
    noc_size: tuple[int, int]
    workers: frozenset            # NoC (x, y) of each functional worker core
    dram_channels: int
    l1_size: int

    @property
    def worker_x(self) -> tuple[int, ...]:
        return tuple(sorted({x for x, _ in self.workers}))

    @property
    def worker_y(self) -> tuple[int, ...]:
        return tuple(sorted({y for _, y in self.workers}))


def read_soc_descriptor(path: str | Path) -> SocDescriptor:
    """Parse a SoC descriptor; UserInputError naming the file and the field that is missing or malformed."""
    where = f"SoC descriptor {str(path)!r}"
    try:
        data = yaml.safe_load(Path(path).read_text())
    except OSError as e:
        raise UserInputError(f"{where} (backend_device_descriptor_path) cannot be read: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise UserInputError(f"{where} is not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise UserInputError(f"{where}: expected a mapping of fields (grid, functional_workers, dram, "
                             "worker_l1_size, arch_name)")

    def field(name: str):
        if name not in data:
            raise UserInputError(f"{where}: missing field {name!r}")
        return data[name]

    arch = str(field("arch_name"))
    if arch not in ARCH_NAMES:
        raise UserInputError(f"{where}: arch_name {arch!r}; legal: {', '.join(ARCH_NAMES)}")
    grid = field("grid")
    try:
        noc_size = (int(grid["x_size"]), int(grid["y_size"]))
        workers = frozenset(_core(c) for c in field("functional_workers"))
        dram = [_core(channel[0]) for channel in field("dram")]
        l1_size = int(field("worker_l1_size"))
    except (KeyError, TypeError, ValueError) as e:
        raise UserInputError(f"{where}: malformed grid, functional_workers, dram or worker_l1_size ({e}); cores "
                             "are written x-y") from None
    if not workers:
        raise UserInputError(f"{where}: functional_workers lists no core")
    return SocDescriptor(str(path), ARCH_NAMES[arch], noc_size, workers, len(dram), l1_size)


def _core(text) -> tuple[int, int]:
    """A core written `x-y` as (x, y)."""
    x, y = str(text).split("-")
    return int(x), int(y)
