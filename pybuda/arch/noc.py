"""The two NoCs of a chip (shared/reference/data-movement.md §1): each a unidirectional 2-D torus over the NoC
grid (`DeviceSpec.noc_size`), NOC0 routing east then south, NOC1 north then west; every node has one link per
direction per NoC and an NIU (in and out) per NoC. Every link and NIU moves `DeviceSpec.noc_link_bytes_per_cycle`
(32 B/cycle).

A link is a tuple: ("link", noc, x, y, dir) for the link leaving NoC node (x, y) in direction dir ("e", "s" on
NOC0, "n", "w" on NOC1); ("out", noc, x, y) / ("in", noc, x, y) for a node's NIU. Worker cores are at
(`noc_worker_x[col]`, `noc_worker_y[row]`), DRAM channel c's endpoint at `noc_dram[c]`.
"""
from __future__ import annotations

import functools

from ..device import DeviceSpec

NOC0, NOC1 = 0, 1


def core_xy(device: DeviceSpec, core: tuple) -> tuple:
    """NoC (x, y) of worker core (row, col) of the logical grid."""
    return device.noc_worker_x[core[1]], device.noc_worker_y[core[0]]


def dram_xy(device: DeviceSpec, channel: int) -> tuple:
    """NoC (x, y) of DRAM channel `channel` of a chip (its first endpoint)."""
    return tuple(device.noc_dram[channel % device.dram_channels])


def distance(device: DeviceSpec, src: tuple, dst: tuple, noc: int) -> int:
    """Hops from NoC node `src` to `dst` on `noc` (each NoC goes around its rings one way)."""
    w, h = device.noc_size
    dx, dy = (dst[0] - src[0]) % w, (dst[1] - src[1]) % h
    if noc == NOC0:
        return dx + dy
    return (w - dx if dx else 0) + (h - dy if dy else 0)


def shortest_noc(device: DeviceSpec, src: tuple, dst: tuple) -> int:
    """The NoC with fewer hops from `src` to `dst` (ties go to NOC0), as the backend's router picks it."""
    return NOC1 if distance(device, src, dst, NOC0) > distance(device, src, dst, NOC1) else NOC0


@functools.lru_cache(maxsize=1 << 16)
def route(noc_size: tuple, src: tuple, dst: tuple, noc: int) -> tuple:
    """The links a transfer from NoC node `src` to `dst` on `noc` crosses (dimension order: NOC0 east then south,
    NOC1 north then west), without the NIUs."""
    w, h = noc_size
    x, y = src
    links = []
    if noc == NOC0:
        while x != dst[0]:
            links.append(("link", NOC0, x, y, "e"))
            x = (x + 1) % w
        while y != dst[1]:
            links.append(("link", NOC0, x, y, "s"))
            y = (y + 1) % h
    else:
        while y != dst[1]:
            links.append(("link", NOC1, x, y, "n"))
            y = (y - 1) % h
        while x != dst[0]:
            links.append(("link", NOC1, x, y, "w"))
            x = (x - 1) % w
    return tuple(links)


def unicast_links(device: DeviceSpec, src: tuple, dst: tuple, noc: int | None = None) -> tuple:
    """Every link and NIU a unicast from `src` to `dst` loads (the shortest-path NoC unless `noc` is given); none
    when both are the same node (the data stays in the core)."""
    if src == dst:
        return ()
    noc = shortest_noc(device, src, dst) if noc is None else noc
    return (("out", noc, *src), *route(tuple(device.noc_size), src, dst, noc), ("in", noc, *dst))


def multicast_links(device: DeviceSpec, src: tuple, dsts: list, noc: int) -> tuple:
    """Every link and NIU a multicast from `src` along a row (all destinations share y) or a column loads: the
    path from `src` to the farthest destination once, each destination's NIU in (the source core's own copy
    stays in the core)."""
    far = max(dsts, key=lambda d: distance(device, src, d, noc))
    links = [("out", noc, *src), *route(tuple(device.noc_size), src, far, noc)]
    links += [("in", noc, *d) for d in dsts if d != src]
    return tuple(links)


def _worker(device: DeviceSpec, x: int, y: int) -> tuple | None:
    """The logical (row, col) of the worker core at NoC (x, y), or None for another node."""
    if x in device.noc_worker_x and y in device.noc_worker_y:
        return device.noc_worker_y.index(y), device.noc_worker_x.index(x)
    return None


def ends(device: DeviceSpec, link: tuple) -> tuple:
    """(from, to) of a link as logical worker cores (row, col), None for a node that is not a worker core; an
    NIU has one end: its core sends (out) or receives (in)."""
    kind, x, y = link[0], link[2], link[3]
    if kind == "out":
        return _worker(device, x, y), None
    if kind == "in":
        return None, _worker(device, x, y)
    w, h = device.noc_size
    nx, ny = {"e": ((x + 1) % w, y), "s": (x, (y + 1) % h), "n": (x, (y - 1) % h), "w": ((x - 1) % w, y)}[link[4]]
    return _worker(device, x, y), _worker(device, nx, ny)


def describe(device: DeviceSpec, link: tuple) -> str:
    """A link as a report names it: worker cores by their logical (row, col), other nodes by NoC (x, y)."""
    rows = {y: r for r, y in enumerate(device.noc_worker_y)}
    cols = {x: c for c, x in enumerate(device.noc_worker_x)}

    def node(x: int, y: int) -> str:
        if x in cols and y in rows:
            return f"{rows[y]},{cols[x]}"
        channels = [c for c in range(device.dram_channels) if tuple(device.noc_dram[c]) == (x, y)]
        return f"dram{channels[0]}" if channels else f"noc({x},{y})"

    kind, noc = link[0], link[1]
    if kind in ("out", "in"):
        return f"noc{noc} {'sender' if kind == 'out' else 'receiver'} {node(link[2], link[3])}"
    x, y, d = link[2], link[3], link[4]
    w, h = device.noc_size
    nx, ny = {"e": ((x + 1) % w, y), "s": (x, (y + 1) % h), "n": (x, (y - 1) % h), "w": ((x - 1) % w, y)}[d]
    return f"noc{noc} {node(x, y)} -> {node(nx, ny)}"
