"""Graph-level terms of the timing model (docs/simulator.md "Timing model"), each checked against a hand
computation on a constructed netlist."""
from __future__ import annotations

import zlib

from pybuda.arch.dram import queue_channels
from pybuda.backend_sim import estimate
from pybuda.dataformat import DataFormat
from pybuda.device import get_device

E150 = get_device("e150")
TILE = DataFormat.Float16_b.tile_bytes
TILES = 8 * 8            # the input queue: t 1, 8 x 8 tiles per input


def _netlist(readers: int, loc: str) -> str:
    """`readers` nops on 1x1 grids, each reading the whole input queue x (at `loc`) and writing its own DRAM
    output queue; x's one buffer sits in channel 0."""
    where = "host: [0x0]" if loc == "host" else "dram: [[0, 0x0]]"
    blocking = "t: 1, mblock: [8, 8], ublock: [1, 1]"
    queues = f"  x: {{input: HOST, type: queue, entries: 1, grid_size: [1, 1], {blocking}, df: Float16_b, " \
             f"target_device: 0, loc: {loc}, {where}}}\n"
    queues += "".join(f"  out{i}: {{input: op{i}, type: queue, entries: 1, grid_size: [1, 1], {blocking}, "
                      f"df: Float16_b, target_device: 0, loc: dram, dram: [[{1 + i % 7}, 0x0]]}}\n"
                      for i in range(readers))
    ops = "".join(f"    op{i}: {{type: nop, grid_loc: [{i // 12}, {i % 12}], grid_size: [1, 1], inputs: [x], "
                  f"in_df: [Float16_b], out_df: Float16_b, intermed_df: Float16_b, acc_df: Float16_b, "
                  f"math_fidelity: HiFi4, {blocking}, buf_size_mb: 2, ublock_order: r}}\n" for i in range(readers))
    return ("devices: {arch: grayskull}\nqueues:\n" + queues + "graphs:\n  g:\n    target_device: 0\n"
            "    input_count: 4\n" + ops + "programs:\n  - p:\n    - var: {$z: 0}\n    - execute: {graph_name: g, "
            "queue_settings: {x: {prologue: false, epilogue: false, zero: false, rd_ptr_local: $z, "
            "rd_ptr_global: $z}}}\n")


def test_host_input_crosses_pcie_once_per_input():
    """20 cores read the same host queue: PCIe carries its bytes once per input (not 20 times); each core gets
    its copy over the NoC."""
    report = estimate(_netlist(20, "host"), "e150")
    op = report.epochs[0].ops[0]
    assert op.terms["pcie_in"] == TILES * TILE / E150.pcie_bw_bytes_per_cycle
    assert op.terms["noc_in"] == TILES * TILE / E150.noc_bw_bytes_per_cycle


def test_readers_on_one_dram_channel_share_it():
    """20 cores read x, whose one buffer is in channel 0: the channel carries 20 copies per input at one
    channel's bandwidth, and that limits every reader (each also writes 64 tiles to a less busy channel)."""
    report = estimate(_netlist(20, "dram"), "e150")
    channel0 = 20 * TILES * TILE / E150.dram_channel_bw_bytes_per_cycle
    for op in report.epochs[0].ops:
        assert op.terms["dram_channel"] == channel0 and op.limiter == "dram_channel"
    assert report.epochs[0].limiter == "dram_channel"
    assert "DRAM channel" in report.to_text()


def test_queue_channels_are_consecutive_from_the_names_pick():
    """The balancer and the netlist writer place a queue's buffers with the same function of its name."""
    first = zlib.crc32(b"e2e_matmul_3_0") % 8
    assert queue_channels("e2e_matmul_3_0", 10, 8) == tuple((first + i) % 8 for i in range(10))
    assert sorted(queue_channels("w", 6, 6)) == list(range(6))   # as many buffers as channels: one in each
