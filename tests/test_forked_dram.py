"""Forked DRAM inputs (`enable_forked_dram_inputs`, the netlist's `forked_dram_inputs`): ops of an epoch that read a
DRAM queue the same way share one read. On a hand-written netlist the shared read halves the bytes the queue's
DRAM channel serves, the forked op reads no DRAM (its reader's core forks a copy), and the validator refuses a fork
whose reader reads the queue another way; a compile with the option writes the fork the balancer priced, and the
simulator runs it numerically and times it at the planner's figure."""
from __future__ import annotations

import torch

import pybuda
from pybuda.arch.movement import channel_bytes, epoch_pipes, epoch_streams, forked_reads
from pybuda.backend_sim import estimate
from pybuda.device import get_device
from pybuda.netlist import check, load
from pybuda.netlist.movement import fed_queues, moving_op
from pybuda.verify import pcc

OP = "buf_size_mb: 2, ublock_order: r, out_df: Float16_b, intermed_df: Float16_b, acc_df: Float16_b, " \
     "math_fidelity: HiFi3"
E150 = get_device("e150")


def _netlist(b_grid: tuple = (1, 2), b_mblock: tuple = (2, 1), fork: bool = True) -> str:
    """Queue `act` (one DRAM buffer of 2x2 tiles) read by nops `a` and `b`; `b` shares `a`'s read when `fork`."""
    forked = ", forked_dram_inputs: [{act: a}]" if fork else ""
    return "\n".join([
        "devices:", "  arch: grayskull", "queues:",
        "  act: {input: HOST, type: queue, entries: 2, grid_size: [1, 1], t: 1, mblock: [2, 2], ublock: [1, 1], "
        "ublock_order: r, df: Float16_b, target_device: 0, loc: dram, dram: [[0, 0x30000000]]}",
        "  out: {input: add, type: queue, entries: 2, grid_size: [1, 2], t: 1, mblock: [2, 1], ublock: [1, 1], "
        "ublock_order: r, df: Float16_b, target_device: 0, loc: dram, dram: [[1, 0x30000000], [2, 0x30000000]]}",
        "graphs:", "  fwd_0:", "    target_device: 0", "    input_count: 2",
        f"    a: {{type: nop, grid_loc: [0, 0], grid_size: [1, 2], inputs: [act], t: 1, mblock: [2, 1], "
        f"ublock: [1, 1], in_df: [Float16_b], {OP}}}",
        f"    b: {{type: nop, grid_loc: [1, 0], grid_size: {list(b_grid)}, inputs: [act]{forked}, t: 1, "
        f"mblock: {list(b_mblock)}, ublock: [1, 1], in_df: [Float16_b], {OP}}}",
        f"    add: {{type: add, grid_loc: [2, 0], grid_size: [1, 2], inputs: [a, b], t: 1, mblock: [2, 1], "
        f"ublock: [1, 1], in_df: [Float16_b, Float16_b], {OP}}}",
        "programs:", "  - run:", "    - var: {$c_mb: 2}", "    - staticvar: {$lptr: 0, $gptr: 0}",
        "    - execute: {graph_name: fwd_0, queue_settings: {",
        "               act: {prologue: false, epilogue: false, zero: false, rd_ptr_local: $lptr, "
        "rd_ptr_global: $gptr}}}",
        "    - varinst: [$lptr, incwrap, $c_mb, 4]", "    - varinst: [$gptr, incwrap, $c_mb, 4]", ""])


def _moving(text: str) -> list:
    nl = load(text)
    graph = nl.graphs["fwd_0"]
    written = fed_queues(nl, graph.ops)
    return [moving_op(nl, graph, op, nl.geometry_of(op), E150, lambda q: False, written.get(op.name, []))
            for op in graph.ops.values()]


def test_a_shared_read_halves_the_channel_bytes_and_the_forked_op_reads_no_dram():
    forked, plain = _moving(_netlist()), _moving(_netlist(fork=False))
    assert forked_reads(plain) == {("b", 0): "a"}     # what the compiler would write, found from the plain netlist
    act_channel = 0
    assert channel_bytes(forked, epoch_pipes(forked))[act_channel] * 2 == \
        channel_bytes(plain, epoch_pipes(plain))[act_channel]
    pipes = [p for p in epoch_pipes(forked) if p.consumer == "b"]
    assert pipes and all(kind == "fork" and name == "a" for p in pipes for kind, name, _, _ in p.sources)
    streams, before = epoch_streams(forked), epoch_streams(plain)
    assert sum(s.dram_readers for (op, _), s in streams.items() if op == "b") == 0
    assert sum(s.dram_readers for (op, _), s in before.items() if op == "b") == 2
    # the reader's cores each fork one copy: one extra stream more than without the fork
    assert sum(s.extra for (op, _), s in streams.items() if op == "a") == \
        sum(s.extra for (op, _), s in before.items() if op == "a") + 2
    assert check(_netlist(), device=E150) == []


def test_a_fork_whose_reader_reads_the_queue_another_way_is_refused():
    violations = check(_netlist(b_grid=(2, 1), b_mblock=(1, 2)), device=E150)
    forked = [v for v in violations if v.rule == "streams.forked_read"]
    assert len(forked) == 1 and "'a' does not read 'act' itself the same way" in forked[0].message, violations
    violations = check(_netlist().replace("forked_dram_inputs: [{act: a}]", "forked_dram_inputs: [{act: b}]"),
                       device=E150)
    assert [v.message for v in violations if v.rule == "streams.forked_read"] == [
        "forked dram input 'act': an op does not share its own read"], violations


class _TwoHeads(torch.nn.Module):
    """One activation read by two projections of the same shape after an epoch break."""

    def __init__(self):
        super().__init__()
        self.a, self.b, self.c = torch.nn.Linear(64, 128), torch.nn.Linear(128, 128), torch.nn.Linear(128, 128)

    def forward(self, x):
        h = torch.relu(self.a(x))
        return self.b(h) * self.c(h)


def test_the_compiler_writes_the_fork_it_priced_and_the_simulator_runs_it(tmp_path):
    torch.manual_seed(0)
    model = _TwoHeads().eval()
    x = torch.randn(32, 64)
    config = pybuda.CompilerConfig(enable_forked_dram_inputs=True)
    config.place_on_new_epoch("matmul_5")      # the projections read the activation from an epoch-to-epoch queue
    compiled = pybuda.compile(model, x, device="e150", config=config, output_dir=tmp_path, verify=True)
    ops = {name: op for g in compiled.netlist.graphs.values() for name, op in g.ops.items()}
    assert ops["matmul_8"].forked_dram_inputs == [("e2e__fused_op_0_0", "matmul_5")]
    assert compiled.placement.forks == {"matmul_8": (("e2e__fused_op_0_0", "matmul_5"),)}
    assert estimate(compiled.netlist).total_cycles == compiled.placement.estimated_cycles
    assert pcc(compiled(x).numpy(), model(x).detach().numpy()) >= 0.99
    config = pybuda.CompilerConfig()
    config.place_on_new_epoch("matmul_5")
    plain = pybuda.compile(model, x, device="e150", output_dir=tmp_path / "plain", config=config)
    assert not any(op.forked_dram_inputs for g in plain.netlist.graphs.values() for op in g.ops.values())
