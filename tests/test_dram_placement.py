"""DRAM queue placement (pybuda/balancer/dram.py) and the queue plan it places (pybuda/balancer/queues.py): the
channel policies, parameters, manual pins, addresses over queue lifetimes, capacity, determinism, and the same
placement through `pybuda.compile` into the netlist, with the user's DRAM-channel overrides."""
from __future__ import annotations

import dataclasses
import random
import zlib

import pytest
import torch
import yaml

import pybuda
from pybuda.balancer import BalancerError
from pybuda.balancer.dram import (ALIGN, DRAM_BASE, DramFullError, DramPlacement, _aligned, assumed_channels,
                                  place_dram)
from pybuda.balancer.op_model import OpModel
from pybuda.balancer.queues import QueuePlan, e2e_queue_blocking, host_queue_grid, plan_queues
from pybuda.dataformat import DataFormat
from pybuda.device import get_device

E150 = get_device("e150")      # grayskull: 8 channels of 1 GiB
N150 = get_device("n150")      # wormhole_b0: 6 channels of 2 GiB
POLICIES = ("ROUND_ROBIN", "ROUND_ROBIN_FLIP_FLOP", "GREATEST_CAPACITY", "CLOSEST")
TILE = DataFormat.Float16_b.tile_bytes


def queue(name: str, kind: str = "input", grid: tuple = (1, 1), entries: int = 1, lifetime: tuple | None = None,
          writer: str = "HOST", readers: tuple = (), df: DataFormat = DataFormat.Float16_b, t: int = 1,
          mblock: tuple = (1, 1), loc: str = "dram") -> QueuePlan:
    """A hand-made queue; an e2e queue's writer epoch is the first epoch of its lifetime."""
    qtype = "ram" if kind in ("parameter", "constant", "sparse") else "queue"
    return QueuePlan(name, kind, writer, qtype, entries, grid, t, mblock, (1, 1), df, loc, lifetime, readers,
                     lifetime[0] if lifetime else -1)


def plan(*queues: QueuePlan) -> dict[str, QueuePlan]:
    return {q.name: q for q in queues}


def big(name: str, nbytes: int, **kw) -> QueuePlan:
    """A one-tile-per-entry queue of about `nbytes` per buffer (no memory is touched: only sizes)."""
    return queue(name, entries=max(1, nbytes // TILE), **kw)


def check_addresses(placement: DramPlacement, queues: dict[str, QueuePlan], device) -> None:
    """Every DRAM queue placed with one (channel, address) per buffer; addresses aligned, inside the channel's
    allocatable range, and no two blocks on one channel overlapping while both are live."""
    dram = {n: q for n, q in queues.items() if q.loc == "dram"}
    assert set(placement.buffers) == set(dram)
    assert placement.dynamic == {n for n, q in dram.items() if q.lifetime is not None}
    blocks: dict[int, list] = {}
    for name, q in dram.items():
        assert len(placement.buffers[name]) == q.buffers, name
        first, last = q.lifetime if q.lifetime else (float("-inf"), float("inf"))
        for ch, addr in placement.buffers[name]:
            assert 0 <= ch < device.dram_channels, (name, ch)
            assert addr % ALIGN == 0, (name, hex(addr))
            assert addr >= DRAM_BASE, (name, hex(addr))
            assert addr + q.buffer_bytes <= device.dram_channel_bytes, (name, hex(addr))
            blocks.setdefault(ch, []).append((addr, addr + q.buffer_bytes, first, last, name))
    for ch, bs in blocks.items():
        for i, (s1, e1, f1, l1, n1) in enumerate(bs):
            for s2, e2, f2, l2, n2 in bs[i + 1:]:
                if f1 <= l2 and f2 <= l1:
                    assert e1 <= s2 or e2 <= s1, f"channel {ch}: {n1} [{s1:#x},{e1:#x}) overlaps {n2} [{s2:#x},{e2:#x})"


def random_queues(seed: int, device) -> tuple[dict[str, QueuePlan], dict[str, list[tuple]]]:
    """A random mix of every queue kind, with op cores for CLOSEST and the parameters."""
    rng = random.Random(seed)
    ops = [f"op{i}" for i in range(6)]
    cores = {op: [(rng.randrange(device.grid_rows), rng.randrange(device.grid_cols)) for _ in range(rng.randint(1, 4))]
             for op in ops}
    queues = []
    for i in range(rng.randint(8, 20)):
        kind = rng.choice(["input", "parameter", "constant", "sparse", "output", "e2e", "e2e", "e2e"])
        grid = (rng.randint(1, 4), rng.randint(1, 4))
        kw = dict(grid=grid, entries=rng.choice([1, 2, 4, 64]), t=rng.choice([1, 2]), mblock=(rng.randint(1, 3), 1),
                  df=rng.choice([DataFormat.Float16_b, DataFormat.Bfp8_b, DataFormat.Float32, DataFormat.Bfp2]))
        readers = tuple(rng.sample(ops, rng.randint(0, 2)))
        if kind == "e2e":
            first = rng.randrange(5)
            queues.append(queue(f"q{i}", "e2e", lifetime=(first, first + rng.randint(1, 3)), writer=rng.choice(ops),
                                readers=readers, **kw))
        elif kind == "output":
            q = queue(f"q{i}", "output", writer=rng.choice(ops), **kw)
            queues.append(dataclasses.replace(q, writer_epoch=rng.randrange(5)))
        else:
            queues.append(queue(f"q{i}", kind, readers=readers, loc=rng.choice(["dram", "dram", "host"])
                                if kind == "input" else "dram", **kw))
    return plan(*queues), cores


# --- assumed channels ---------------------------------------------------------------------------------------

def test_assumed_channels_are_consecutive_from_the_names_crc():
    for name in ("x", "e2e_mm0_0", "bert.encoder.layer.0.attention.self.query.weight"):
        first = zlib.crc32(name.encode()) % 8
        assert assumed_channels(name, 3, 8) == (first, (first + 1) % 8, (first + 2) % 8)
        assert assumed_channels(name, 11, 8) == tuple((first + i) % 8 for i in range(11))   # wraps, repeats
        assert assumed_channels(name, 1, 6) == (zlib.crc32(name.encode()) % 6,)
        assert assumed_channels(name, 0, 8) == ()
    # the CRC is stable across processes (unlike hash()): a fixed value
    assert zlib.crc32(b"x") == 0x8CDC1683 and assumed_channels("x", 2, 8) == (3, 4)


# --- channel policies -------------------------------------------------------------------------------------------

def test_round_robin_gives_consecutive_buffers_consecutive_channels():
    queues = plan(queue("a", grid=(1, 3)), queue("b", grid=(2, 2)),
                  queue("c", "e2e", grid=(1, 5), lifetime=(0, 1), writer="op"))
    placement = place_dram(queues, E150, "ROUND_ROBIN", {}, {})
    assert placement.channels("a") == (0, 1, 2)
    assert placement.channels("b") == (3, 4, 5, 6)
    assert placement.channels("c") == (7, 0, 1, 2, 3)       # wraps over the 8 channels
    check_addresses(placement, queues, E150)
    # six channels on wormhole
    placement = place_dram(queues, N150, "ROUND_ROBIN", {}, {})
    assert [ch for q in "abc" for ch in placement.channels(q)] == [i % 6 for i in range(12)]


def test_round_robin_places_static_queues_before_dynamic_ones():
    queues = plan(queue("e", "e2e", grid=(1, 2), lifetime=(0, 1), writer="op"), queue("in", grid=(1, 3)),
                  queue("out", "output", grid=(1, 2), writer="op"))
    placement = place_dram(queues, E150, "ROUND_ROBIN", {}, {})
    assert placement.channels("in") == (0, 1, 2)
    assert placement.channels("out") == (3, 4)
    assert placement.channels("e") == (5, 6)
    assert placement.dynamic == {"e"}


def test_round_robin_turns_are_not_taken_by_parameters():
    """Parameters go near their readers whatever the policy; the round robin continues after them."""
    queues = plan(queue("a", grid=(1, 2)), queue("w", "parameter", grid=(1, 1), readers=("mm",)),
                  queue("b", grid=(1, 2)))
    placement = place_dram(queues, E150, "ROUND_ROBIN", {}, {"mm": [(5, 6)]})
    assert placement.channels("a") == (0, 1)
    assert placement.channels("w") == (5,)        # (5, 6) is one NoC hop from channel 5
    assert placement.channels("b") == (2, 3)


def test_flip_flop_splits_channels_by_the_writers_epoch_parity():
    queues = plan(*[queue(f"e{epoch}_{k}", "e2e", grid=(1, 3), lifetime=(epoch, epoch + 1), writer=f"op{epoch}")
                    for epoch in range(4) for k in range(2)])
    for device in (E150, N150):
        placement = place_dram(queues, device, "ROUND_ROBIN_FLIP_FLOP", {}, {})
        check_addresses(placement, queues, device)
        even = {ch for n in queues if int(n[1]) % 2 == 0 for ch in placement.channels(n)}
        odd = {ch for n in queues if int(n[1]) % 2 == 1 for ch in placement.channels(n)}
        assert not even & odd, (device.name, even, odd)
        assert len(even) == len(odd) == device.dram_channels // 2
        assert even | odd == set(range(device.dram_channels))
        # round robin within each half: epoch 0's six buffers, then epoch 2's continue where they stopped
        half = device.dram_channels // 2
        evens = [ch for n in ("e0_0", "e0_1", "e2_0", "e2_1") for ch in placement.channels(n)]
        assert evens == [2 * (i % half) for i in range(12)]
        # an epoch's writes never share a channel with the queues it reads (written by the epoch before)
        for epoch in range(1, 4):
            writes = {ch for k in range(2) for ch in placement.channels(f"e{epoch}_{k}")}
            reads = {ch for k in range(2) for ch in placement.channels(f"e{epoch - 1}_{k}")}
            assert not writes & reads


def test_flip_flop_spreads_host_written_queues_over_all_channels():
    queues = plan(queue("in", grid=(2, 4)), queue("out", "output", grid=(1, 2), writer="op"))
    queues["out"] = dataclasses.replace(queues["out"], writer_epoch=1)
    placement = place_dram(queues, E150, "ROUND_ROBIN_FLIP_FLOP", {}, {})
    assert placement.channels("in") == tuple(range(8))
    assert set(placement.channels("out")) <= {1, 3, 5, 7}       # written by epoch 1


def test_greatest_capacity_avoids_the_full_channel():
    queues = plan(big("huge", 300 << 20), big("medium", 100 << 20),
                  queue("next", grid=(1, 2)), queue("e", "e2e", grid=(2, 4), lifetime=(0, 1), writer="op"))
    placement = place_dram(queues, E150, "GREATEST_CAPACITY", {}, {})
    check_addresses(placement, queues, E150)
    assert placement.channels("huge") == (0,)                 # all equal: the lowest channel
    assert placement.channels("medium") == (1,)               # channel 0 has 300 MiB less
    assert 0 not in placement.channels("next") and 1 not in placement.channels("next")
    assert placement.channels("next") == (2, 3)
    # eight small buffers: the emptier channels 2-7 in turn, never the two full ones
    assert placement.channels("e") == (4, 5, 6, 7, 2, 3, 4, 5)


def test_greatest_capacity_picks_the_channel_with_most_free_bytes_every_time():
    """Replayed independently: before every buffer, its channel has the most free bytes (ties: lowest)."""
    for seed in range(4):
        queues, cores = random_queues(seed, E150)
        queues = {n: q for n, q in queues.items() if q.kind not in ("parameter", "constant", "sparse")}
        placement = place_dram(queues, E150, "GREATEST_CAPACITY", {}, cores)
        check_addresses(placement, queues, E150)
        top = {ch: DRAM_BASE for ch in range(E150.dram_channels)}
        order = sorted((q for q in queues.values() if q.loc == "dram"), key=lambda q: q.lifetime is not None)
        for q in order:
            for ch, addr in placement.buffers[q.name]:
                free = {c: E150.dram_channel_bytes - end for c, end in top.items()}
                assert ch == min(free, key=lambda c: (-free[c], c)), (seed, q.name, ch, free)
                top[ch] = max(top[ch], addr + _aligned(q.buffer_bytes))


def test_closest_puts_a_queue_next_to_its_cores():
    # e150: core (5, 6) is NoC (7, 7), one hop from channel 5 at (7, 6); core (0, 0) is one hop from channel 0
    hops = [E150.noc_hops((5, 6), ch) for ch in range(8)]
    assert hops.index(min(hops)) == 5 and sorted(hops)[:2] == [1, 4]
    cores = {"w": [(5, 6)], "r": [(5, 6)], "w2": [(0, 0)], "r2": [(0, 1)]}
    queues = plan(queue("e", "e2e", lifetime=(0, 1), writer="w", readers=("r",)),
                  queue("e2", "e2e", lifetime=(0, 1), writer="w2", readers=("r2",)),
                  queue("e3", "e2e", grid=(1, 3), lifetime=(0, 1), writer="w", readers=("r",)))
    placement = place_dram(queues, E150, "CLOSEST", {}, cores)
    assert placement.channels("e") == (5,)
    assert placement.channels("e2") == (0,)
    # a queue's buffers spread, nearest first: hops from (5, 6) are 1 (ch 5), 4 (ch 3), 5 (ch 4)
    assert placement.channels("e3") == (5, 3, 4)
    for name, q in queues.items():
        qcores = [c for op in (*q.readers, q.writer) for c in cores[op]]
        total = [sum(E150.noc_hops(c, ch) for c in qcores) for ch in range(8)]
        assert total[placement.channels(name)[0]] == min(total)
    # the same on wormhole: (4, 4) is one hop from channel 5
    placement = place_dram(plan(queue("e", "e2e", lifetime=(0, 1), writer="w", readers=("r",))), N150, "CLOSEST",
                           {}, {"w": [(4, 4)], "r": [(4, 4)]})
    assert placement.channels("e") == (5,)


def test_closest_breaks_ties_by_the_least_used_channel():
    """Queues no placed op touches are equally near every channel: the least used one each time."""
    queues = plan(*[queue(f"in{i}") for i in range(8)], queue("more", grid=(1, 2)))
    placement = place_dram(queues, E150, "CLOSEST", {}, {})
    assert [placement.channels(f"in{i}")[0] for i in range(8)] == list(range(8))
    assert placement.channels("more") == (0, 1)


@pytest.mark.parametrize("policy", POLICIES)
def test_parameters_spread_over_distinct_channels(policy):
    cores = {"mm": [(0, 0)], "mm2": [(5, 6), (5, 7)]}
    queues = plan(queue("w8", "parameter", grid=(2, 4), readers=("mm",)),
                  queue("c3", "constant", grid=(3, 1), readers=("mm2",)),
                  queue("s", "sparse", grid=(2, 1), readers=("mm2",)),
                  queue("w12", "parameter", grid=(3, 4), readers=("mm2",)),
                  queue("w6", "parameter", grid=(2, 3), readers=("mm",)))
    for device in (E150, N150):
        placement = place_dram(queues, device, policy, {}, cores)
        check_addresses(placement, queues, device)
        n = device.dram_channels
        for name, q in queues.items():
            channels = placement.channels(name)
            counts = [channels.count(ch) for ch in range(n)]
            # as spread as possible: each channel holds the floor or the ceiling of buffers / channels
            assert max(counts) - min(counts) <= 1, (device.name, name, channels)
            assert len(set(channels)) == min(q.buffers, n), (device.name, name, channels)
        # the first buffer is the one nearest the readers
        first = place_dram(plan(queues["w8"]), device, policy, {}, cores).channels("w8")[0]
        hops = [device.noc_hops((0, 0), ch) for ch in range(n)]
        assert hops[first] == min(hops) and first == 0


@pytest.mark.parametrize("policy", POLICIES)
def test_manual_pin_puts_every_buffer_on_the_channel(policy):
    cores = {"mm": [(0, 0)], "op": [(1, 1)]}
    queues = plan(queue("in", grid=(2, 2)), queue("w", "parameter", grid=(2, 4), readers=("mm",)),
                  queue("e", "e2e", grid=(2, 3), lifetime=(0, 2), writer="op", readers=("mm",)),
                  queue("f", "e2e", grid=(1, 2), lifetime=(3, 4), writer="op"))
    manual = {"w": 3, "e": 3, "f": 7}
    placement = place_dram(queues, E150, policy, manual, cores)
    check_addresses(placement, queues, E150)
    assert placement.channels("w") == (3,) * 8
    assert placement.channels("e") == (3,) * 6
    assert placement.channels("f") == (7,) * 2
    # buffers of one pinned queue are stacked, not overlapping
    addrs = sorted(a for _, a in placement.buffers["e"])
    assert all(b - a >= queues["e"].buffer_bytes for a, b in zip(addrs, addrs[1:]))


def test_manual_pin_to_a_full_channel_falls_back_to_one_with_room():
    queues = plan(big("hog", E150.dram_channel_bytes - DRAM_BASE - (1 << 20)), big("pinned", 2 << 20))
    placement = place_dram(queues, E150, "ROUND_ROBIN", {"hog": 0, "pinned": 0}, {})
    check_addresses(placement, queues, E150)
    assert placement.channels("hog") == (0,)
    assert placement.channels("pinned") != (0,)


def test_a_full_channel_sends_the_buffer_to_the_next_channel():
    """A buffer whose round-robin turn is a full channel (2) goes to the next one (3), not back to channel 0."""
    queues = plan(big("hog", E150.dram_channel_bytes - DRAM_BASE - (1 << 20)), big("a", 2 << 20),
                  big("b", 2 << 20), big("c", 2 << 20))
    placement = place_dram(queues, E150, "ROUND_ROBIN", {"hog": 2}, {})
    check_addresses(placement, queues, E150)
    turns = {q: placement.channels(q) for q in ("a", "b", "c")}
    assert turns == {"a": (0,), "b": (1,), "c": (3,)}       # a pinned queue takes no turn; c's turn, 2, is full


def test_host_queues_are_not_placed():
    queues = plan(queue("in", grid=(1, 2), loc="host"), queue("out", "output", writer="op", loc="host"),
                  queue("w", "parameter", readers=("op",)))
    placement = place_dram(queues, E150, "ROUND_ROBIN", {}, {"op": [(0, 0)]})
    assert set(placement.buffers) == {"w"}


# --- addresses ----------------------------------------------------------------------------------------------

def test_addresses_start_at_dram_base_and_stack_per_channel():
    queues = plan(queue("a", grid=(1, 2), entries=4), queue("b", grid=(1, 2), entries=3, df=DataFormat.Bfp8_b))
    placement = place_dram(queues, E150, "ROUND_ROBIN", {"a": 0, "b": 0}, {})
    a = queues["a"].buffer_bytes
    assert a == 4 * TILE + 32
    assert placement.buffers["a"] == ((0, DRAM_BASE), (0, DRAM_BASE + a))
    assert placement.buffers["b"] == ((0, DRAM_BASE + 2 * a), (0, DRAM_BASE + 2 * a + queues["b"].buffer_bytes))


@dataclasses.dataclass(frozen=True)
class OddSized(QueuePlan):
    """A queue of `size` bytes per buffer (real formats give multiples of 32: this one need not be)."""

    size: int = 100

    @property
    def buffer_bytes(self) -> int:
        return self.size


def test_addresses_are_aligned_whatever_the_buffer_size():
    base = queue("a", grid=(1, 3))
    queues = plan(OddSized(**{f.name: getattr(base, f.name) for f in dataclasses.fields(base)}, size=100),
                  *[dataclasses.replace(OddSized(**{f.name: getattr(base, f.name) for f in dataclasses.fields(base)}),
                                        name=f"b{i}", size=33 + i, grid=(1, 1)) for i in range(3)])
    placement = place_dram(queues, E150, "ROUND_ROBIN", {"b0": 0, "b1": 0, "b2": 0}, {})
    check_addresses(placement, queues, E150)
    assert placement.buffers["a"] == ((0, DRAM_BASE), (1, DRAM_BASE), (2, DRAM_BASE))
    assert [placement.buffers[f"b{i}"] for i in range(3)] == [((0, DRAM_BASE + 128),), ((0, DRAM_BASE + 192),),
                                                             ((0, DRAM_BASE + 256),)]


def test_dynamic_queues_with_disjoint_lifetimes_reuse_addresses():
    queues = plan(queue("early", "e2e", grid=(2, 4), entries=8, lifetime=(0, 1), writer="op0"),
                  queue("late", "e2e", grid=(2, 4), entries=8, lifetime=(2, 3), writer="op2"),
                  queue("overlap", "e2e", grid=(2, 4), entries=8, lifetime=(1, 2), writer="op1"))
    placement = place_dram(queues, E150, "ROUND_ROBIN", {}, {})
    check_addresses(placement, queues, E150)
    # static first would change nothing here: all dynamic, each over the 8 channels in turn
    assert placement.buffers["early"] == tuple((ch, DRAM_BASE) for ch in range(8))
    assert placement.buffers["late"] == placement.buffers["early"]          # (0, 1) and (2, 3): reused
    size = _aligned(queues["early"].buffer_bytes)
    # (1, 2) overlaps both: above them
    assert placement.buffers["overlap"] == tuple((ch, DRAM_BASE + size) for ch in range(8))


def test_dynamic_queue_fills_the_lowest_gap_of_its_lifetime():
    pins = {"a": 0, "b": 0, "c": 0, "d": 0}
    queues = plan(queue("a", "e2e", entries=4, lifetime=(0, 0), writer="op"),
                  queue("b", "e2e", entries=4, lifetime=(0, 5), writer="op"),
                  queue("c", "e2e", entries=2, lifetime=(1, 2), writer="op"),     # a is dead: its space is free
                  queue("d", "e2e", entries=4, lifetime=(2, 3), writer="op"))     # c holds part of a's space
    placement = place_dram(queues, E150, "ROUND_ROBIN", pins, {})
    check_addresses(placement, queues, E150)
    size4 = _aligned(queues["a"].buffer_bytes)
    assert placement.buffers["a"] == ((0, DRAM_BASE),)
    assert placement.buffers["b"] == ((0, DRAM_BASE + size4),)
    assert placement.buffers["c"] == ((0, DRAM_BASE),)
    assert placement.buffers["d"] == ((0, DRAM_BASE + 2 * size4),)   # the gap under b is too small with c in it


def test_static_queues_never_share_addresses_with_anything():
    queues = plan(queue("e", "e2e", lifetime=(0, 1), writer="op"), queue("in"), queue("out", "output", writer="op"))
    placement = place_dram(queues, E150, "ROUND_ROBIN", {"e": 2, "in": 2, "out": 2}, {})
    check_addresses(placement, queues, E150)
    assert len({a for q in queues for _, a in placement.buffers[q]}) == 3


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("device", [E150, N150], ids=["e150", "n150"])
def test_random_plans_have_sound_addresses(policy, device):
    for seed in range(6):
        queues, cores = random_queues(seed, device)
        manual = {n: seed % device.dram_channels for n in list(queues)[::5] if queues[n].loc == "dram"}
        placement = place_dram(queues, device, policy, manual, cores)
        check_addresses(placement, queues, device)
        for name, ch in manual.items():
            assert set(placement.channels(name)) == {ch}


# --- capacity -----------------------------------------------------------------------------------------------

def test_too_many_bytes_raise_dram_full_error_saying_how_many():
    have = E150.dram_channels * (E150.dram_channel_bytes - DRAM_BASE)
    queues = plan(*[big(f"w{i}", 700 << 20, kind="parameter") for i in range(9)],
                  big("e", 100 << 20, kind="e2e", lifetime=(0, 1), writer="op"))
    need = sum(q.buffers * _aligned(q.buffer_bytes) for q in queues.values())
    assert need > have
    with pytest.raises(DramFullError) as info:
        place_dram(queues, E150, "ROUND_ROBIN", {}, {})
    message = str(info.value)
    assert f"{need - have:,} bytes too many" in message
    assert f"{need:,} bytes" in message and f"{have:,} bytes of DRAM" in message and "e150" in message
    assert "weights in a smaller format" in message      # 6.2 of 6.9 GB are weights: a smaller batch would not do
    assert isinstance(info.value, ValueError)


def test_capacity_counts_only_the_dynamic_bytes_live_at_once():
    """Eight 600 MiB buffers per queue: three such queues are 14.4 GiB, but live at once only 4.8 GiB fit in e150's
    6 GiB; the same three all live at once do not."""
    size = 600 << 20
    disjoint = plan(*[big(f"e{i}", size, grid=(2, 4), kind="e2e", lifetime=(2 * i, 2 * i + 1), writer="op")
                      for i in range(3)])
    placement = place_dram(disjoint, E150, "ROUND_ROBIN", {}, {})
    check_addresses(placement, disjoint, E150)
    assert placement.buffers["e0"] == placement.buffers["e1"] == placement.buffers["e2"]
    overlapping = plan(*[big(f"e{i}", size, grid=(2, 4), kind="e2e", lifetime=(i, i + 1), writer="op")
                         for i in range(3)])
    have = E150.dram_channels * (E150.dram_channel_bytes - DRAM_BASE)
    live = 2 * 8 * _aligned(overlapping["e0"].buffer_bytes)       # at most two live in any epoch
    with pytest.raises(DramFullError, match=f"{live - have:,} bytes too many; a smaller microbatch"):
        place_dram(overlapping, E150, "ROUND_ROBIN", {}, {})


def test_a_buffer_larger_than_any_channel_raises_dram_full_error():
    """The total fits the device, but no channel holds the one buffer."""
    queues = plan(big("wide", E150.dram_channel_bytes - DRAM_BASE + (1 << 20)))
    with pytest.raises(DramFullError, match="'wide'.*no DRAM channel of e150"):
        place_dram(queues, E150, "ROUND_ROBIN", {}, {})


# --- determinism ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("policy", POLICIES)
def test_placement_is_deterministic(policy):
    for seed in range(3):
        queues, cores = random_queues(seed, E150)
        first = place_dram(queues, E150, policy, {}, cores)
        again = place_dram(dict(queues), E150, policy, {}, {k: list(v) for k, v in cores.items()})
        assert first == again
        assert first.buffers == again.buffers and first.dynamic == again.dynamic


# --- host queue grids and the queue plan -------------------------------------------------------------------------

@pytest.mark.parametrize("shape, device, grid", [
    ((1, 1, 64, 64), E150, (2, 2)),          # 4 tiles: every tile its own buffer
    ((1, 1, 128, 128), E150, (2, 4)),        # 16 tiles: 8 buffers, the most columns of (2, 4) and (4, 2)
    ((1, 1, 128, 96), E150, (4, 3)),         # no 8-buffer grid: the fewest beyond 8 (12)
    ((1, 1, 128, 96), N150, (2, 3)),         # 6 channels: 6 buffers
    ((1, 1, 32, 512), E150, (1, 8)),
    ((1, 1, 32, 512), N150, (1, 8)),         # no 6-buffer grid divides 16 columns: 8
    ((1, 1, 1024, 32), E150, (8, 1)),        # 32 tile rows, 10 grid rows: 8
    ((1, 3, 32, 32), E150, (1, 1)),          # one tile per t: one buffer
    ((1, 1, 32 * 7, 32), E150, (7, 1)),      # prime: 7 buffers
])
def test_host_queue_grid(shape, device, grid):
    assert host_queue_grid(shape, device) == grid


def tiles(grid: tuple, mblock: tuple, ublock: tuple) -> tuple:
    """(rows, cols) of tiles per t of a blocking."""
    return tuple(g * m * u for g, m, u in zip(grid, mblock, ublock))


@pytest.mark.parametrize("model, device, grid", [
    (OpModel((1, 1), 1, (4, 24), (1, 1)), E150, (1, 8)),    # one core: its 4x24 tiles over 8 channels
    (OpModel((1, 2), 12, (2, 1), (2, 1)), E150, (4, 2)),    # t-streamed: per t 4x2 tiles, 8 buffers
    (OpModel((1, 1), 1, (4, 24), (1, 1)), N150, (1, 6)),    # 6 channels: 6 buffers, the most columns
    (OpModel((1, 1), 1, (1, 1), (7, 1)), E150, (7, 1)),     # 7 tile rows, one column: 7 buffers
    (OpModel((1, 1), 1, (1, 1), (1, 1)), E150, (1, 1)),     # one tile: one buffer
    (OpModel((2, 4), 1, (2, 3), (1, 2)), E150, (2, 4)),     # 8 cores: the writer's own blocking
    (OpModel((4, 3), 2, (1, 1), (1, 1)), E150, (4, 3)),
    (OpModel((1, 1), 510, (1, 1), (1, 4)), N150, (1, 1)),   # 510 slices x 4 buffers: 2,040 phases to stack them
    (OpModel((1, 1), 100, (1, 1), (1, 4)), N150, (1, 4)),   # 400: within a core's 862 phases
])
def test_e2e_queue_of_a_writer_with_few_cores_spreads_over_the_channels(model, device, grid):
    """An epoch-to-epoch queue holds its writer's output per t (t, RT, CT) in as many buffers as the device has
    DRAM channels where the tiles allow; a writer with at least that many cores keeps its own blocking, and so
    does one whose t slices over those buffers would cost a reader stacking them more than its stream
    phases."""
    queue_grid, mblock, ublock = e2e_queue_blocking(model, device)
    assert queue_grid == grid
    assert tiles(queue_grid, mblock, ublock) == tiles(model.grid, model.mblock, model.ublock)
    if model.cores >= device.dram_channels:
        assert (mblock, ublock) == (model.mblock, model.ublock)


class Chain(pybuda.PyBudaModule):
    """matmul -> gelu, `layers` times; epoch breaks make epoch-to-epoch DRAM queues between layers."""

    def __init__(self, name: str = "chain", d: int = 64, layers: int = 3):
        super().__init__(name)
        g = torch.Generator().manual_seed(0)
        self.layers = layers
        for i in range(layers):
            setattr(self, f"w{i}", pybuda.Parameter(torch.randn(d, d, generator=g) / d ** 0.5))

    def forward(self, x):
        for i in range(self.layers):
            x = pybuda.op.Gelu(f"act{i}", pybuda.op.Matmul(f"mm{i}", x, getattr(self, f"w{i}")))
        return x


def chain_config(**options) -> pybuda.CompilerConfig:
    config = pybuda.CompilerConfig(input_queues_on_host=False, **options)
    config.place_on_new_epoch("mm1")
    config.place_on_new_epoch("mm2")
    return config


def compile_chain(config, tmp_path, device="e150"):
    return pybuda.compile(Chain(), torch.randn(4, 64, 64), device=device, config=config, output_dir=tmp_path)


def netlist_queues(compiled) -> dict:
    return yaml.safe_load(compiled.netlist_path.read_text())["queues"]


def test_plan_queues_of_a_compiled_model(tmp_path):
    compiled = compile_chain(chain_config(), tmp_path)
    placement, graph = compiled.placement, compiled.device_graph
    queues = placement.queues
    assert [q.kind for q in queues.values()] == ["input", "parameter", "parameter", "parameter", "output", "e2e",
                                                 "e2e"]
    assert queues["x"].loc == "dram" and queues["output_0"].loc == "host"
    assert queues["x"].grid == host_queue_grid(graph.node("x").shape, E150) == (2, 2)
    assert queues["x"].entries == queues["output_0"].entries == 4
    assert all(queues[f"chain.w{i}"].entries == 1 and queues[f"chain.w{i}"].type == "ram" for i in range(3))
    for i in range(2):
        e2e = queues[f"e2e_act{i}_0"]
        assert e2e.lifetime == (i, i + 1) and e2e.writer == f"act{i}" and e2e.writer_epoch == i
        writer = placement.models[f"act{i}"]
        assert e2e.readers == (f"mm{i + 1}",) and e2e.t == writer.t
        assert (e2e.grid, e2e.mblock, e2e.ublock) == e2e_queue_blocking(writer, E150)
        assert e2e.grid == (2, 2)      # a 64x64 activation: its 4 tiles over 4 channels, whatever the writer's grid
    # the same plan again from the graph, and the host/DRAM switches
    epoch_of = {n: p.epoch for n, p in placement.placed.items()}
    again = plan_queues(graph, placement.models, epoch_of, E150, 4, False, True)
    assert again == queues and list(again) == list(queues)
    flipped = plan_queues(graph, placement.models, epoch_of, E150, 4, True, False)
    assert flipped["x"].loc == "host" and flipped["output_0"].loc == "dram"
    assert flipped["output_0"].writer == "act2" and flipped["output_0"].writer_epoch == 2
    assert flipped["output_0"].lifetime is None
    # one epoch: no epoch-to-epoch queues
    single = plan_queues(graph, placement.models, {n: 0 for n in epoch_of}, E150, 4, False, True)
    assert not [q for q in single.values() if q.kind == "e2e"]


# --- through compile ------------------------------------------------------------------------------------------

def assert_netlist_matches_placement(compiled) -> dict:
    queues, dram = netlist_queues(compiled), compiled.placement.dram
    placed = {name for name, q in queues.items() if q["loc"] == "dram"}
    assert placed == set(dram.buffers)
    for name in placed:
        assert queues[name]["dram"] == [list(b) for b in dram.buffers[name]], name
    for name, q in queues.items():
        if q["loc"] == "host":
            assert "dram" not in q
    return {name: [tuple(b) for b in queues[name]["dram"]] for name in placed}


def test_compiled_netlist_dram_matches_the_placement_per_algorithm(tmp_path):
    written = {}
    for algorithm in ("ROUND_ROBIN", "CLOSEST", "ROUND_ROBIN_FLIP_FLOP"):
        compiled = compile_chain(chain_config(dram_placement_algorithm=algorithm), tmp_path / algorithm)
        assert compiled.placement.epochs == 3
        assert compiled.placement.dram.dynamic == {"e2e_act0_0", "e2e_act1_0"}
        written[algorithm] = assert_netlist_matches_placement(compiled)
        place = compiled.placement
        cores = {}
        for name, p in place.placed.items():
            rows, cols = place.models[name].grid[::-1] if p.transpose else place.models[name].grid
            cores[name] = [(p.loc[0] + r, p.loc[1] + c) for r in range(rows) for c in range(cols)]
        assert place_dram(place.queues, E150, algorithm, {}, cores) == place.dram
        check_addresses(place.dram, place.queues, E150)
    assert written["ROUND_ROBIN"] != written["CLOSEST"]
    assert set(written["ROUND_ROBIN"]) == set(written["CLOSEST"])
    # the input is the first queue placed: channels 0-3 in turn
    assert [ch for ch, _ in written["ROUND_ROBIN"]["x"]] == [0, 1, 2, 3]
    flip = written["ROUND_ROBIN_FLIP_FLOP"]
    assert {ch for ch, _ in flip["e2e_act0_0"]} <= {0, 2, 4, 6}       # written by epoch 0
    assert {ch for ch, _ in flip["e2e_act1_0"]} <= {1, 3, 5, 7}       # written by epoch 1


def test_override_pins_a_queue_to_a_channel_in_the_netlist(tmp_path):
    config = chain_config()
    config.place_queue_to_chip_dram("e2e_act0_0", chip_id=0, channel=3)
    config.place_queue_to_chip_dram("x", chip_id=None, channel=6)
    compiled = compile_chain(config, tmp_path)
    written = assert_netlist_matches_placement(compiled)
    queues = compiled.placement.queues       # the pins change the cost, so the plan's grids may differ
    assert [ch for ch, _ in written["e2e_act0_0"]] == [3] * queues["e2e_act0_0"].buffers
    assert [ch for ch, _ in written["x"]] == [6] * queues["x"].buffers == [6] * 4
    assert len({a for _, a in written["e2e_act0_0"]}) == queues["e2e_act0_0"].buffers > 1
    check_addresses(compiled.placement.dram, compiled.placement.queues, E150)
    # unpinned, the queue spreads
    default = assert_netlist_matches_placement(compile_chain(chain_config(), tmp_path / "default"))
    assert len({ch for ch, _ in default["e2e_act0_0"]}) > 1


def test_global_override_helper_pins_the_queue(tmp_path):
    pybuda.config.set_configuration_options(input_queues_on_host=False)
    pybuda.config.set_epoch_break("mm1")
    pybuda.config.override_dram_queue_placement("e2e_act0_0", chip_id=0, channel=5)
    compiled = pybuda.compile(Chain(layers=2), torch.randn(2, 64, 64), device="e150", output_dir=tmp_path)
    written = assert_netlist_matches_placement(compiled)
    assert [ch for ch, _ in written["e2e_act0_0"]] == [5] * len(written["e2e_act0_0"])


@pytest.mark.parametrize("name, kwargs, match", [
    ("no_such_queue", dict(chip_id=0, channel=3), r"override_dram_queue_placement\('no_such_queue'\).*no DRAM queue"),
    ("mm1", dict(chip_id=0, channel=3), r"'mm1'.*no DRAM queue"),                       # an op, not a queue
    ("output_0", dict(chip_id=0, channel=3), r"'output_0'.*no DRAM queue"),             # on the host
    ("e2e_act0_0", dict(chip_id=1, channel=3), r"'e2e_act0_0', chip_id=1\): the queue sits on chip 0.*legal chip_id: 0 or"),
    ("e2e_act0_0", dict(chip_id=0, channel=8), r"'e2e_act0_0', channel=8.*channels 0-7"),
])
def test_override_errors_name_the_queue(tmp_path, name, kwargs, match):
    config = chain_config()
    config.place_queue_to_chip_dram(name, **kwargs)
    with pytest.raises(BalancerError, match=match):
        compile_chain(config, tmp_path)


def test_override_error_lists_the_dram_queues(tmp_path):
    config = chain_config()
    config.place_queue_to_chip_dram("nope", chip_id=0, channel=1)
    with pytest.raises(BalancerError) as info:
        compile_chain(config, tmp_path)
    for queue_name in ("x", "chain.w0", "e2e_act0_0", "e2e_act1_0"):
        assert queue_name in str(info.value)


def test_compiled_placement_is_deterministic(tmp_path):
    first = compile_chain(chain_config(dram_placement_algorithm="GREATEST_CAPACITY"), tmp_path / "a")
    again = compile_chain(chain_config(dram_placement_algorithm="GREATEST_CAPACITY"), tmp_path / "b")
    assert first.placement.dram == again.placement.dram
    assert netlist_queues(first) == netlist_queues(again)
