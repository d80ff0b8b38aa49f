"""Graph-level terms of the timing model (docs/simulator.md "Timing model"), each checked against a hand
computation on a constructed netlist."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from pybuda.arch.cycles import FusedStep, kernel_cycles
from pybuda.arch.operands import OpGeometry, input_buffer_tiles
from pybuda.backend_sim import estimate
from pybuda.dataformat import DataFormat
from pybuda.device import get_device
from pybuda.netlist import load
from pybuda.tools.shared import CALIBRATION_NETLISTS

E150 = get_device("e150")
TILE = DataFormat.Float16_b.tile_bytes
TILES = 8 * 8            # the input queue: t 1, 8 x 8 tiles per input
CALIBRATION = CALIBRATION_NETLISTS


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
    its copy over the NoC (its receiving NIU at the NoC link's 32 B/cycle)."""
    from pybuda.arch.movement import epoch_pipes, link_loads
    from pybuda.netlist.movement import moving_op

    netlist = load(_netlist(20, "host"))
    report = estimate(netlist, "e150")
    op = report.epochs[0].ops[0]
    assert op.terms["pcie_in"] == TILES * TILE / E150.pcie_bw_bytes_per_cycle
    graph = netlist.graphs["g"]
    ops = [moving_op(netlist, graph, o, o.geometry, E150, lambda q: False, [f"out{o.name[2:]}"])
           for o in graph.ops.values()]
    totals, _ = link_loads(E150, ops, epoch_pipes(ops))
    receivers = [(link, b) for link, b in totals.items() if link[0] == "in" and link[2:] == (1, 1)]   # op0's core
    assert receivers == [(("in", 0, 1, 1), TILES * TILE)]     # one copy of x, at 32 B/cycle
    assert op.terms["noc_link"] >= TILES * TILE / E150.noc_link_bytes_per_cycle


def test_readers_on_one_dram_channel_share_it():
    """20 cores read x, whose one buffer is in channel 0: the channel carries 20 copies per input at one
    channel's bandwidth, and that limits every reader (each also writes 64 tiles to a less busy channel)."""
    report = estimate(_netlist(20, "dram"), "e150")
    channel0 = 20 * TILES * TILE / E150.dram_channel_bw_bytes_per_cycle
    for op in report.epochs[0].ops:
        assert op.terms["dram_channel"] == channel0 and op.limiter == "dram_channel"
    assert report.epochs[0].limiter == "dram_channel"
    assert "DRAM channel" in report.to_text()


def _fork_join_netlist(chain: int, short_edge_min_tiles: int | None) -> str:
    """fork (a nop reading DRAM queue x) feeds `chain` matmuls in a row (the long path: each multiplies by its
    prologued 8 x 8-tile weight, m_k 8, so its output block is complete only at the end of the input) and,
    directly, input 1 of the join (an add whose input 0 is the chain's end); all on 1x1 grids, t 1, 8 x 8 tiles
    per input."""
    blocking = "t: 1, mblock: [8, 8], ublock: [1, 1]"
    common = (f"out_df: Float16_b, intermed_df: Float16_b, acc_df: Float16_b, math_fidelity: HiFi4, {blocking}, "
              "buf_size_mb: 2, ublock_order: r")
    names = ["fork"] + [f"long{i}" for i in range(chain)]
    ops = [f"    fork: {{type: nop, grid_loc: [0, 0], grid_size: [1, 1], inputs: [x], in_df: [Float16_b], {common}}}"]
    ops += [f"    {names[i + 1]}: {{type: matmul, grid_loc: [{1 + i // 12}, {i % 12}], grid_size: [1, 1], "
            f"inputs: [{names[i]}, w{i}], in_df: [Float16_b, Float16_b], {common}, "
            "attributes: {m_k: 8, u_kt: 1}}" for i in range(chain)]
    min_tiles = f", input_buf_min_size_tiles: [0, {short_edge_min_tiles}]" if short_edge_min_tiles else ""
    ops.append(f"    join: {{type: add, grid_loc: [0, 1], grid_size: [1, 1], inputs: [{names[-1]}, fork], "
               f"in_df: [Float16_b, Float16_b], {common}{min_tiles}}}")
    queue = f"entries: 8, grid_size: [1, 1], {blocking}, df: Float16_b, target_device: 0, loc: dram"
    weights = "".join(f"  w{i}: {{input: HOST, type: ram, {queue.replace('entries: 8', 'entries: 1')}, "
                      f"dram: [[{2 + i % 6}, 0x0]]}}\n" for i in range(chain))
    prologue = "".join(f", w{i}: {{prologue: true, epilogue: false, zero: false, rd_ptr_global: $z, "
                       "wr_ptr_global: $z}" for i in range(chain))
    return ("devices: {arch: grayskull}\nqueues:\n"
            f"  x: {{input: HOST, type: queue, {queue}, dram: [[0, 0x0]]}}\n"
            f"  y: {{input: join, type: queue, {queue}, dram: [[1, 0x0]]}}\n" + weights +
            "graphs:\n  g:\n    target_device: 0\n    input_count: 8\n" + "\n".join(ops) + "\n"
            "programs:\n  - p:\n    - var: {$z: 0}\n    - execute: {graph_name: g, queue_settings: {x: {prologue: "
            f"false, epilogue: false, zero: false, rd_ptr_local: $z, rd_ptr_global: $z}}{prologue}}}}}\n")


def _short_path_inputs(min_tiles: int) -> float:
    """Inputs' worth the short path holds: the fork's output buffer (2 mblocks = 2 inputs at t 1) and the join's
    input buffer on that edge (one-tile granules, ~32 KB latency hiding, at least `min_tiles`; 64 tiles/input)."""
    return 2 + input_buffer_tiles(1, TILE, min_tiles=min_tiles) / TILES


def test_fork_join_stalls_when_the_short_path_cannot_cover_the_long_one():
    """Six matmuls on the long path, nothing on the short one: the fork may run only as many inputs ahead of the
    join as the short path holds, so the join runs one input per (long latency - short latency) / held (an
    accumulating matmul's latency is its whole per-input time)."""
    report = estimate(_fork_join_netlist(6, None), "e150")
    ops = {o.name: o for o in report.epochs[0].ops}
    long_latency = sum(ops[f"long{i}"].limiter_cycles for i in range(6))
    stall = long_latency / _short_path_inputs(0)
    join = ops["join"]
    assert join.terms["fork_join"] == pytest.approx(stall)
    assert stall > max(v for k, v in join.terms.items() if k != "fork_join")
    assert join.limiter == "fork_join" and report.epochs[0].limiter == "fork_join"
    assert report.epochs[0].pipeline_cycles == pytest.approx(stall)
    assert "fork-join" in report.to_text()


def test_fork_join_buffers_that_cover_the_difference_remove_the_stall():
    """The same fork-join with the join's short-edge input buffer raised to 10 inputs (input_buf_min_size_tiles,
    what the legacy compiler's fork-join buffering writes): the stall falls below the slowest op's limiter, so
    the epoch runs at that op's pace again."""
    report = estimate(_fork_join_netlist(6, 10 * TILES), "e150")
    ops = {o.name: o for o in report.epochs[0].ops}
    long_latency = sum(ops[f"long{i}"].limiter_cycles for i in range(6))
    join = ops["join"]
    assert join.terms["fork_join"] == pytest.approx(long_latency / _short_path_inputs(10 * TILES))
    slowest = max(o.limiter_cycles for o in ops.values() if o.name != "join")
    assert join.terms["fork_join"] < slowest
    assert report.epochs[0].limiter != "fork_join" and report.epochs[0].pipeline_cycles == slowest


def test_fused_op_costs_its_sub_ops():
    """A fused op costs its sub-ops on their own blocking through the kernel model; a sub-op reading dest skips
    half a datacopy of its tiles, one writing dest the other half, down to a fifth of its cost (BERT-Large's
    softmax head: multiply -> dest, add(dest) -> dest, exp(dest))."""
    path = CALIBRATION / "perf_lib__graph_tests__grayskull__inference__bert_large_lofi_bfp8b_v3.yaml"
    nl = load(str(path))
    op = nl.graphs["fwd_4"].ops["_fused_op_42"]
    sub = {s.type: FusedStep(OpGeometry(s.type, tuple(op.grid_size), op.t, tuple(s.mblock), tuple(s.ublock),
                                        dataclasses.replace(s.attrs, approximate_mode=True)))
           for s in nl.fused_op_of(op).sub_ops}
    cost = {k: np.float32(kernel_cycles("grayskull", s.op, op.out_df, op.math_fidelity)) for k, s in sub.items()}
    nop = {k: np.float32(kernel_cycles("grayskull", dataclasses.replace(s.op, type="nop"), op.out_df,
                                       op.math_fidelity)) for k, s in sub.items()}
    expected = int(max(cost["multiply"] * np.float32(0.2), cost["multiply"] - nop["multiply"] / np.float32(2))
                   + max(cost["add"] * np.float32(0.2), cost["add"] - np.float32(2) * nop["add"] / np.float32(2))
                   + max(cost["exp"] * np.float32(0.2), cost["exp"] - nop["exp"] / np.float32(2)))
    timed = next(o for o in estimate(nl).ops if o.name == "_fused_op_42")
    assert timed.kernel_cycles == expected
    assert expected > 2 * kernel_cycles("grayskull", op.geometry, op.out_df, op.math_fidelity)  # the lone nop


def test_a_fused_op_of_one_sub_op_costs_that_op():
    """Against every eltwise and SFPU sweep row: one sub-op, no dest, costs what the op costs."""
    from pybuda.arch.cycles import fused_op_cycles
    from pybuda.arch.sweeps import estimate as sweep_estimate
    from pybuda.arch.sweeps import file_op, read_sweep, sweep_files
    from pybuda.tools.shared import OP_SWEEPS

    checked = 0
    for path in sweep_files(OP_SWEEPS):
        op_type, _ = file_op(path)
        if op_type in ("matmul", "reduce", "splice", "depthwise") or "int" in path.name:
            continue
        for row in read_sweep(path)[:20]:
            assert fused_op_cycles(row.arch, (FusedStep(row.op),), row.out_df, row.math_fidelity) == \
                sweep_estimate(row), (path.name, row)
            checked += 1
    assert checked > 200