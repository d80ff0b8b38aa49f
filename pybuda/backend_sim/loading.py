"""How the simulator takes a netlist: `pybuda.netlist.load` (the one reader and its model), the validator rules
the simulator cannot run without, the simulated arch and device, and programs by name, as `SimulatorError`s.
"""
from __future__ import annotations

from typing import Any, Mapping

from pybuda.device import DeviceSpec, arch_spec, get_device
from pybuda.netlist import Netlist, NetlistError, Program, check, load
from pybuda.netlist.model import SUPPORTED_ARCHS

from .errors import SimulatorError

# The validator's rules a netlist must pass to be simulated: positive op dimensions, names that resolve to exactly
# one op or queue, one in_df per input, loops closed. The other rules (formats, L1, grid, ...) are the backend's
# (`pybuda.netlist.validate`); the simulator also runs legacy netlists that break some of them.
REQUIRED_RULES = frozenset({"op.dims", "name.duplicate_op", "input.missing", "op.in_df_count",
                            "program.loop_balance"})


def load_netlist(source: Any) -> Netlist:
    """The model of a netlist given as a path, YAML text, dict or `pybuda.netlist.Netlist`, read by
    `pybuda.netlist.load`; SimulatorError for a netlist the reader rejects or that breaks a REQUIRED_RULES rule."""
    if not isinstance(source, (Netlist, Mapping, str, bytes)) and not hasattr(source, "__fspath__"):
        raise SimulatorError(f"a netlist must be a path, YAML text, a dict or a pybuda.netlist.Netlist, not "
                             f"{type(source).__name__}")
    try:
        netlist = load(source)
    except NetlistError as e:
        raise SimulatorError(str(e)) from None
    broken = [v for v in check(netlist) if v.rule in REQUIRED_RULES]
    if broken:
        raise SimulatorError(str(NetlistError(broken, header="the simulator cannot run this netlist:")))
    return netlist


def select_device(netlist: Netlist, device: str | None = None) -> tuple[str, DeviceSpec]:
    """(arch, device) to simulate: `device`'s (its arch must be listed in the netlist's `devices`), else the
    netlist's first supported arch on that arch's largest single-chip device."""
    spec = get_device(device) if device is not None else None
    if spec is not None:
        if spec.arch not in netlist.archs:
            raise SimulatorError(f"netlist is for arch {netlist.archs}, not {spec.arch}")
        return spec.arch, spec
    arch = netlist.arch
    if arch not in SUPPORTED_ARCHS:
        raise SimulatorError(f"netlist arch {netlist.archs} is not supported; the simulator models "
                             f"{', '.join(SUPPORTED_ARCHS)}")
    return arch, arch_spec(arch)


def program_of(netlist: Netlist, name: str | None = None) -> Program:
    """The program called `name` (default: the first)."""
    if not netlist.programs:
        raise SimulatorError("the netlist has no programs")
    if name is None:
        return netlist.programs[0]
    try:
        return netlist.program(name)
    except KeyError:
        raise SimulatorError(f"no program {name!r}; programs: {', '.join(p.name for p in netlist.programs)}") \
            from None
