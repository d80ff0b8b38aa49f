"""The backend's netlist rules (netlist-format.md §3), applied to the typed model.

`validate(netlist, arch=None)` collects every violation and raises `NetlistError`; `check(...)` returns the
list instead. The rules are the registry of `pybuda.netlist.rules` (one small function per rule id, grouped by
family; docs/netlist.md's rule table is generated from it); `check(..., rules=ids)` applies only some of them.

The arch is the one the backend would select (env `ARCH_NAME` there): `arch` if given (it must be listed in
`devices`), else the first listed arch this project has a device description for. Hardware limits (grid, dest
tiles, DRAM channels and capacity, L1) are read from that arch's device description.
"""
from __future__ import annotations

from ..device import DeviceSpec, arch_spec
from ..errors import UserInputError
from .errors import NetlistError, NetlistViolation
from .model import SUPPORTED_ARCHS, Netlist
from .rules import RULES, Context, run

# --- entry points ---------------------------------------------------------------------------------------------

def check(netlist, arch: str | None = None, chips: int | None = None,
          device: DeviceSpec | str | None = None, rules=None) -> list[NetlistViolation]:
    """Every violation of the backend's rules (empty list: the netlist is valid), by source line.

    `arch` selects among the archs `devices` lists (default: the first one with a device description);
    `device` (a DeviceSpec or a name such as "e75") checks against that device's grid and chip count instead of
    the arch's largest single chip; `chips` bounds target_device; `rules` (rule ids) applies only those rules."""
    if not isinstance(netlist, Netlist):
        from .reader import load
        netlist = load(netlist)
    if isinstance(device, str):
        from ..device import get_device
        device = get_device(device)
    if device is not None:
        arch = arch or device.arch
        chips = chips if chips is not None else device.chips
    archs = netlist.archs
    spec = None
    errors: list[NetlistViolation] = []
    chosen = arch or netlist.arch
    if arch is not None and arch not in archs:
        errors.append(NetlistViolation(netlist.source, netlist.devices.line, "devices", "devices.arch",
                                       f"one of {archs}", arch, f"arch {arch!r} is not listed in devices"))
    if device is not None and device.arch == chosen:
        spec = device
    elif chosen in SUPPORTED_ARCHS:
        spec = arch_spec(chosen)
    else:
        errors.append(NetlistViolation(netlist.source, netlist.devices.line, "devices", "devices.arch",
                                       "grayskull or wormhole_b0", chosen,
                                       f"no device description for arch {chosen!r}; device rules not checked"))
    selected = RULES.values() if rules is None else [RULES[r] for r in _known(rules)]
    c = Context(netlist, chosen, spec, chips)
    return errors + sorted(run(c, selected), key=lambda v: v.line)


def _known(rules) -> list:
    unknown = sorted(set(rules) - set(RULES))
    if unknown:
        raise UserInputError(f"unknown netlist rule id(s) {', '.join(unknown)}; see pybuda.netlist.rules.RULES")
    return sorted(set(rules), key=list(RULES).index)


def validate(netlist, arch: str | None = None, chips: int | None = None,
             device: DeviceSpec | str | None = None) -> Netlist:
    """Apply the backend's rules (see `check`); raise `NetlistError` listing every violation, else return the
    netlist. Accepts a Netlist, a path or YAML text."""
    if not isinstance(netlist, Netlist):
        from .reader import load
        netlist = load(netlist)
    errors = check(netlist, arch, chips, device)
    if errors:
        raise NetlistError(errors)
    return netlist
