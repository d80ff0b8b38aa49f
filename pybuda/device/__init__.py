"""Device descriptions as data: worker grid, L1, DRAM, clock and bandwidths per device name."""
from __future__ import annotations

import dataclasses
import functools
from importlib import resources

import yaml

from ..dataformat import DataFormat
from ..errors import UserInputError
from .soc import read_soc_descriptor


@dataclasses.dataclass(frozen=True)
class DeviceSpec:
    """One Tenstorrent device as the compiler and the simulator see it."""

    name: str
    arch: str
    grid_rows: int
    grid_cols: int
    chips: int
    clock_hz: float
    l1_size: int
    l1_usable: int
    dram_channels: int
    dram_channel_bytes: int
    dram_bw_bytes_per_cycle: float
    dram_channel_bw_bytes_per_cycle: float
    noc_link_bytes_per_cycle: float
    pcie_bw_bytes_per_cycle: float
    dest_tiles_16b: int
    dest_tiles_32b: int
    epoch_switch_cycles: int
    l1_data_buffer_base: int = 0x33000   # L1 below this holds firmware, kernels, tile headers and the overlay blob
    gather_multicast_streams: int = 3    # per worker core (data-movement.md §3): gather/multicast stream IDs
    extra_streams: int = 24              # general-purpose streams (relays, DRAM reads, forks, gathers)
    dram_reader_streams: int = 8
    dram_writer_streams: int = 8
    dram_input_buffers: int = 39         # distinct DRAM buffers one core reads (legacy kMaxDRAMInQueues)
    fan_out_streams: int = 16            # destinations one producer core feeds (legacy kMaxFanOutStreams)
    op_consumers: int = 8                # data users of one op (legacy kMaxDRAMOutQueues)
    input_operands: int = 16             # input operand stream IDs of a core
    overlay_blob_bytes: int = 65536      # per core, plus an op's extra overlay_size
    phase_bytes: int = 38                # blob bytes per stream phase
    noc_size: tuple = ()        # (x, y) of the NoC torus
    noc_worker_x: tuple = ()    # NoC x of each logical worker column
    noc_worker_y: tuple = ()    # NoC y of each logical worker row (harvested rows removed)
    noc_dram: tuple = ()        # NoC (x, y) of each DRAM channel
    ethernet_bw_bytes_per_cycle: float = 0.0   # one chip-to-chip ethernet link
    chip_links: int = 0         # ethernet links between the chips of a multi-chip device
    mmio_chip: int = 0          # the chip the host reaches over PCIe (the others through it)

    def noc_hops(self, core: tuple, channel: int) -> int:
        """NoC hops between logical worker core (row, col) and DRAM channel `channel`: the shorter of the two
        NoCs (one routes +x/+y, the other -x/-y, both around the torus)."""
        x, y = self.noc_worker_x[core[1]], self.noc_worker_y[core[0]]
        dx, dy = self.noc_dram[channel]
        w, h = self.noc_size
        forward = (dx - x) % w + (dy - y) % h
        return min(forward, (x - dx) % w + (y - dy) % h)

    def dest_tiles(self, acc_df: DataFormat | None) -> int:
        """Tiles the dest register holds for one ublock accumulated in `acc_df` (16-bit when not given)."""
        return self.dest_tiles_32b if acc_df in (DataFormat.Float32, DataFormat.Int32) else self.dest_tiles_16b

    def phase_budget(self, overlay_size: int = 0) -> int:
        """Stream phases one side (consuming or producing) of a core may use: half the overlay blob (with an op's
        extra `overlay_size` beyond the default 64 KiB) over the bytes per phase (data-movement.md §3.4)."""
        blob = self.overlay_blob_bytes + max(0, overlay_size - self.overlay_blob_bytes)
        return blob // self.phase_bytes // 2

    @property
    def l1_data_buffer_bytes(self) -> int:
        """L1 bytes per core the backend can give op buffers: everything above `l1_data_buffer_base`."""
        return self.l1_size - self.l1_data_buffer_base

    @property
    def cores(self) -> int:
        return self.grid_rows * self.grid_cols

    @property
    def chip_link_bw_bytes_per_cycle(self) -> float:
        """Bytes per cycle between the chips over all their ethernet links (0 on a single chip)."""
        return self.chip_links * self.ethernet_bw_bytes_per_cycle

    def system_channel(self, chip: int, channel: int) -> int:
        """One id per DRAM channel of the whole device: `channel` of chip `chip` (chip 0's ids are its channels)."""
        return chip * self.dram_channels + channel

    def with_soc_descriptor(self, path: str) -> "DeviceSpec":
        """This device with the worker rows the legacy SoC descriptor at `path` lists (`pybuda.device.soc`: a board
        with harvested rows); UserInputError naming the field where it describes another chip."""
        soc = read_soc_descriptor(path)
        where = f"SoC descriptor {path!r}"
        for name, theirs, ours in (("arch_name", soc.arch, self.arch), ("grid", soc.noc_size, self.noc_size),
                                   ("worker_l1_size", soc.l1_size, self.l1_size),
                                   ("dram (channels)", soc.dram_channels, self.dram_channels),
                                   ("functional_workers (NoC x of the columns)", soc.worker_x, self.noc_worker_x)):
            if theirs != ours:
                raise UserInputError(f"{where}: {name} {theirs}, device {self.name} has {ours}; a descriptor here "
                                     f"describes the device's own chip, with harvested worker rows at most")
        missing = [f"{x}-{y}" for y in soc.worker_y for x in soc.worker_x if (x, y) not in soc.workers]
        if missing:
            raise UserInputError(f"{where}: functional_workers lack {', '.join(missing[:4])}: a row is either whole "
                                 "or harvested")
        alien = sorted(set(soc.worker_y) - set(self.noc_worker_y))
        if alien:
            raise UserInputError(f"{where}: functional_workers in NoC rows {alien}, which hold no workers on "
                                 f"{self.name}; its worker rows: {list(self.noc_worker_y)}")
        return dataclasses.replace(self, grid_rows=len(soc.worker_y), noc_worker_y=soc.worker_y)

    def harvested(self, mask: int) -> "DeviceSpec":
        """This device with the worker rows of `mask` harvested (bit r: NoC row r, see
        `pybuda.config.get_harvesting_mask`): netlist grids are logical, so the usable grid loses one row per
        harvested row (the runtime maps the others around them)."""
        rows = bin(mask).count("1")
        if rows >= self.grid_rows:
            raise UserInputError(f"harvesting_mask {mask:#x} harvests {rows} rows; device {self.name} has "
                                 f"{self.grid_rows} worker rows, so at most {self.grid_rows - 1} can be harvested")
        if not rows:
            return self
        kept = tuple(y for y in self.noc_worker_y if not (mask >> y) & 1)[:self.grid_rows - rows]
        return dataclasses.replace(self, grid_rows=self.grid_rows - rows, noc_worker_y=kept)


@functools.lru_cache(maxsize=None)
def _table() -> dict:
    return yaml.safe_load(resources.files(__package__).joinpath("devices.yaml").read_text())


def device_names() -> list[str]:
    return list(_table()["devices"])


def get_device(name: str) -> DeviceSpec:
    """DeviceSpec for "e75", "e150", "n150" or "n300"; ValueError naming the legal devices otherwise."""
    table = _table()
    if name not in table["devices"]:
        raise UserInputError(f"unknown device {name!r}; legal devices: {', '.join(device_names())}")
    dev = table["devices"][name]
    arch = table["archs"][dev["arch"]]
    arch = {k: tuple(tuple(x) if isinstance(x, list) else x for x in v) if isinstance(v, list) else v
            for k, v in arch.items()}
    return DeviceSpec(name=name, arch=dev["arch"], grid_rows=dev["grid"][0], grid_cols=dev["grid"][1],
                      chips=dev["chips"], clock_hz=float(dev["clock_hz"]), chip_links=dev.get("chip_links", 0), **arch)


def arch_spec(arch: str) -> DeviceSpec:
    """The largest single-chip device of an architecture (used for netlists that name only an arch)."""
    for name in ("e150", "n150"):
        spec = get_device(name)
        if spec.arch == arch:
            return spec
    raise UserInputError(f"unknown arch {arch!r}; legal: grayskull, wormhole_b0")
