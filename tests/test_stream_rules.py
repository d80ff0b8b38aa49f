"""The per-core stream resource rules (shared/reference/data-movement.md §3, §6), one test each: the same small
netlist at the limit passes and one over it is refused, the error naming the op, the core, the resource, the count
and the limit. Where a netlist this small can reach the device's own limit (fan-out 16, DRAM input buffers 39,
consumers 8) it does; elsewhere the netlist's count is derived by hand in the test and the device's limit is set to
it and one below."""
from __future__ import annotations

import dataclasses

import pytest

from pybuda.arch.tilemap import edge_reads
from pybuda.device import get_device
from pybuda.netlist import check, load
from pybuda.tools.shared import CALIBRATION_NETLISTS

Q = "ublock_order: r, df: Float16_b, target_device: 0, loc: dram"
OP = "buf_size_mb: 2, ublock_order: r, out_df: Float16_b, intermed_df: Float16_b, acc_df: Float16_b, " \
     "math_fidelity: HiFi3"
E150 = get_device("e150")


def _netlist(queues: list[str], ops: list[str], inputs: list[str]) -> str:
    settings = ",\n".join(f"               {q}: {{prologue: false, epilogue: false, zero: false, rd_ptr_local: $lptr, "
                          "rd_ptr_global: $gptr}" for q in inputs)
    return "\n".join([
        "devices:", "  arch: grayskull", "queues:", *(f"  {q}" for q in queues),
        "graphs:", "  fwd_0:", "    target_device: 0", "    input_count: 2", *(f"    {o}" for o in ops),
        "programs:", "  - run:", "    - var: {$c_zero: 0, $c_mb: 2}", "    - staticvar: {$lptr: 0, $gptr: 0}",
        "    - execute: {graph_name: fwd_0, queue_settings: {", settings + "}}",
        "    - varinst: [$lptr, incwrap, $c_mb, 4]", "    - varinst: [$gptr, incwrap, $c_mb, 4]", ""])


def _nop(name: str, loc: tuple, grid: tuple, src: str, mblock: tuple) -> str:
    return (f"{name}: {{type: nop, grid_loc: {list(loc)}, grid_size: {list(grid)}, inputs: [{src}], t: 1, "
            f"mblock: {list(mblock)}, ublock: [1, 1], in_df: [Float16_b], {OP}}}")


def fan_out(consumers: int) -> str:
    """`src` on one core feeds `wide` on 4x4 cores (a tile each: 16 destinations) and `consumers - 1` one-core
    nops (one each)."""
    act = f"act: {{input: HOST, type: queue, entries: 2, grid_size: [1, 1], t: 1, mblock: [4, 4], ublock: [1, 1], " \
          f"{Q}, dram: [[0, 0x30000000]]}}"
    extra = [_nop(f"n{k}", (0, 1 + k), (1, 1), "src", (4, 4)) for k in range(consumers - 1)]
    return _netlist([act], [_nop("src", (0, 0), (1, 1), "act", (4, 4)), _nop("wide", (1, 0), (4, 4), "src", (1, 1)),
                            *extra], ["act"])


def dram_buffers(rows: int, cols: int) -> str:
    """`src` on one core reads a queue of rows x cols buffers (a tile each): that many DRAM input buffers."""
    allocs = ", ".join(f"[{k % 8}, {hex(0x30000000 + 0x100000 * k)}]" for k in range(rows * cols))
    act = f"act: {{input: HOST, type: queue, entries: 2, grid_size: [{rows}, {cols}], t: 1, mblock: [1, 1], " \
          f"ublock: [1, 1], {Q}, dram: [{allocs}]}}"
    return _netlist([act], [_nop("src", (0, 0), (1, 1), "act", (rows, cols))], ["act"])


def matmul(outputs: int = 1) -> str:
    """`a` (2x2 cores, a 2x2 block each) is the first operand of `mm` (2x2 cores), queue `w` its second; `mm`
    writes `outputs` queues. A matmul's first operand is multicast along each grid row from its first core, the
    second along each column from its last row: core [1, 0] of mm hosts two multicasts (row 1, column 0), and
    extra streams for its gather from two `a` cores (2) and its DRAM read of `w` (1): 3."""
    act = f"act: {{input: HOST, type: queue, entries: 2, grid_size: [1, 1], t: 1, mblock: [4, 4], ublock: [1, 1], " \
          f"{Q}, dram: [[0, 0x30000000]]}}"
    w = f"w: {{input: HOST, type: queue, entries: 2, grid_size: [1, 1], t: 1, mblock: [4, 4], ublock: [1, 1], {Q}, " \
        f"dram: [[2, 0x30000000]]}}"
    def dram(k: int) -> str:
        return ", ".join(f"[{3 + k}, {hex(0x30000000 + 0x1000000 * j)}]" for j in range(4))
    outs = [f"out{k}: {{input: mm, type: queue, entries: 2, grid_size: [2, 2], t: 1, mblock: [1, 1], "
            f"ublock: [2, 2], {Q}, dram: [{dram(k)}]}}" for k in range(outputs)]
    mm = (f"mm: {{type: matmul, grid_loc: [2, 0], grid_size: [2, 2], inputs: [a, w], t: 1, mblock: [1, 1], "
          f"ublock: [2, 2], in_df: [Float16_b, Float16_b], {OP}, attributes: {{m_k: 4, u_kt: 1}}}}")
    return _netlist([act, w, *outs], [_nop("a", (0, 0), (2, 2), "act", (2, 2)), mm], ["act", "w"])


def refused(text: str, rule: str, device=E150) -> list[str]:
    return [e.message for e in check(load(text), device=device) if e.rule == rule]


def test_fan_out_at_16_passes_and_17_is_refused():
    assert check(load(fan_out(1)), device=E150) == []
    assert refused(fan_out(2), "streams.fan_out") == \
        ["core [0, 0] of op src uses 17 output destinations; a core has 16"]


def test_dram_input_buffers_at_39_pass_and_40_are_refused():
    assert check(load(dram_buffers(3, 13)), device=E150) == []
    assert refused(dram_buffers(5, 8), "streams.dram_buffers") == \
        ["core [0, 0] of op src uses 40 DRAM input buffers; a core has 39"]


def test_an_op_feeds_at_most_8_users():
    assert "streams.consumers" not in {e.rule for e in check(load(fan_out(8)), device=E150)}
    assert refused(fan_out(9), "streams.consumers") == ["op src feeds 9 data users; an op feeds at most 8"]


@pytest.mark.parametrize("rule, field, text, count, message", [
    ("streams.multicast", "gather_multicast_streams", matmul(), 2,
     "core [1, 0] of op mm uses 2 multicast streams; a core has 1"),
    ("streams.extra", "extra_streams", matmul(), 3, "core [1, 0] of op mm uses 3 extra streams; a core has 2"),
    # a one-core producer feeding 16 destinations forks its output buffer 15 times, and reads its queue (1)
    ("streams.extra", "extra_streams", fan_out(1), 16, "core [0, 0] of op src uses 16 extra streams; a core has 15"),
    ("streams.dram_readers", "dram_reader_streams", matmul(), 1,
     "core [1, 0] of op mm uses 1 DRAM reader streams; a core has 0"),
    ("streams.dram_writers", "dram_writer_streams", matmul(2), 2,
     "core [0, 0] of op mm uses 2 DRAM writer streams; a core has 1"),
    ("streams.inputs", "input_operands", matmul(), 2, "op mm has 2 inputs; a core has 1 input operand streams"),
], ids=lambda v: v if isinstance(v, str) and "." in v and " " not in v else None)
def test_stream_rule_at_its_limit_passes_and_over_it_is_refused(rule, field, text, count, message):
    assert refused(text, rule, dataclasses.replace(E150, **{field: count})) == []
    assert message in refused(text, rule, dataclasses.replace(E150, **{field: count - 1}))


def test_stream_phases_within_half_the_overlay_blob():
    """`src` sends one pipe to each of its 16 destinations: 16 producer phases; half a blob of 16 x 2 phases of
    38 B holds them, one byte less does not."""
    text = fan_out(1)
    assert refused(text, "overlay.phases", dataclasses.replace(E150, overlay_blob_bytes=16 * 2 * 38)) == []
    assert refused(text, "overlay.phases", dataclasses.replace(E150, overlay_blob_bytes=16 * 2 * 38 - 1)) == \
        ["core [0, 0] of op src uses 16 producer stream phases; a core has 15"]


CALIBRATION = sorted(p.name for p in CALIBRATION_NETLISTS.glob("*.yaml")) if CALIBRATION_NETLISTS.is_dir() else []


@pytest.mark.parametrize("name", CALIBRATION)
def test_the_calibration_netlists_validate_under_every_rule(name):
    """They ran on silicon: the stream rules (and every other) accept them, as they accept the real corpus
    (`tests/test_netlist_corpus.py`)."""
    assert check(load(CALIBRATION_NETLISTS / name)) == []


def test_the_calibration_netlists_are_there():
    if not CALIBRATION_NETLISTS.is_dir():
        pytest.skip("netlist corpus not available")
    assert len(CALIBRATION) == 3


def test_an_edge_to_a_grid_no_device_has_maps_to_nothing():
    """A mutant's grid of 2^40 rows (found by the property test): the edge is not mapped (grid.bounds reports the
    op) instead of sizing arrays by it."""
    assert edge_reads((1, 2, 2), (1, 1), (), None, None, (1 << 40, 1), "rows") == ()
    assert edge_reads((1, 2, 2), (1 << 40, 1), (), None, None, (1, 1), "rows") == ()
    assert edge_reads((1, 2, 2), (1, 1), (), None, None, (2, 1), "rows") != ()
