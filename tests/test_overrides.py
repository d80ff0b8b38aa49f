"""Overrides that shape op models and the schedule (`override_u_kt`, `override_input_buffer_multiplier`,
`override_dram_parameters`, `insert_nop`, `add_schedule_constraint`), the op-model options
(`enable_enumerate_u_kt`, `enable_single_buffer_fallback`) and the balancer's fork-join buffering: each
changes the netlist as asked, keeps the outputs, and an impossible one names the legal choices."""
from __future__ import annotations

import numpy as np
import pytest
import torch

import pybuda
from pybuda.backend_sim import estimate
from pybuda.balancer import BalancerError
from pybuda.balancer.schedule import check_orderings
from pybuda.ir import Graph
from pybuda.ir.graph import GraphError
from pybuda.verify import pcc

from models import MLP, Attention, torch_attention, torch_mlp

K_TILES = 8     # MLP(d_in=256): mm1's inner dimension in tiles


def _mlp(tmp_path, name: str = "out"):
    model, x = MLP(d_in=256), torch.randn(2, 64, 256)
    compiled = pybuda.compile(model, x, output_dir=tmp_path / name)
    out, expected = compiled(x).numpy(), torch_mlp(model, x).numpy()
    assert pcc(out, expected) >= 0.99 and np.allclose(out, expected, atol=0.02)
    return compiled


def _ops(compiled) -> dict:
    return {name: op for g in compiled.netlist.graphs.values() for name, op in g.ops.items()}


@pytest.mark.parametrize("u_kt", [1, 2])
def test_override_u_kt_sets_the_inner_block(tmp_path, u_kt):
    assert _ops(_mlp(tmp_path, "base"))["mm1"].attributes.u_kt == K_TILES    # the balancer fills L1: the largest
    pybuda.override_u_kt("mm1", u_kt)
    mm1 = _ops(_mlp(tmp_path))["mm1"]
    assert (mm1.attributes.u_kt, mm1.attributes.m_k) == (u_kt, K_TILES // u_kt)


def test_impossible_u_kt_names_the_legal_values(tmp_path):
    pybuda.override_u_kt("mm1", 3)
    with pytest.raises(BalancerError, match=r"override_u_kt\('mm1', 3\).*legal: 1, 2, 4, 8"):
        _mlp(tmp_path)
    pybuda.reset_configuration()
    pybuda.override_u_kt("_fused_op_0", 1)
    with pytest.raises(BalancerError, match="no inner dimension"):
        _mlp(tmp_path)


def test_override_input_buffer_multiplier_sizes_the_input_buffer(tmp_path):
    assert _ops(_mlp(tmp_path, "base"))["mm2"].input_buf_min_size_tiles is None
    sizes = {}
    for multiplier in (4, 8):
        pybuda.reset_configuration()
        pybuda.override_op_size("mm2", (1, 1))
        pybuda.override_input_buffer_multiplier("mm2", 0, multiplier=multiplier)
        mm2 = _ops(_mlp(tmp_path, f"m{multiplier}"))["mm2"]
        assert mm2.input_buf_min_size_tiles[1] == 0
        sizes[multiplier] = mm2.input_buf_min_size_tiles[0]
    # input 0 of a 1x1 matmul: the whole (2 x 4) tiles of one input per t slice, times the multiplier
    assert sizes == {4: 4 * 2 * 4, 8: 8 * 2 * 4}


def test_input_buffer_multiplier_on_a_missing_operand_names_the_legal_indices(tmp_path):
    pybuda.override_input_buffer_multiplier("mm2", 5, multiplier=2)
    with pytest.raises(BalancerError, match="legal operand_index: 0-1"):
        _mlp(tmp_path)


def test_override_dram_parameters_streams_the_weights_from_dram(tmp_path):
    def prologued(compiled) -> dict:
        return {q: s.prologue for _, ex in compiled.netlist.executes() for q, s in ex.queue_settings.items()}

    assert prologued(_mlp(tmp_path, "base"))["mlp.w1"] is True
    pybuda.override_dram_parameters("mm1", True)
    compiled = _mlp(tmp_path)
    assert prologued(compiled)["mlp.w1"] is False and prologued(compiled)["mlp.w2"] is True
    assert "mlp.w1" not in compiled.placement.models["mm1"].prologue


def test_default_dram_parameters_streams_every_weight_but_the_exempted(tmp_path):
    def prologued(compiled) -> dict:
        return {q: s.prologue for _, ex in compiled.netlist.executes() for q, s in ex.queue_settings.items()}

    pybuda.config._get_global_compiler_config().default_dram_parameters = True
    assert {prologued(_mlp(tmp_path, "all"))[w] for w in ("mlp.w1", "mlp.w2")} == {False}
    pybuda.override_dram_parameters("mm2", False)           # the op's own override wins
    compiled = _mlp(tmp_path, "exempt")
    assert prologued(compiled)["mlp.w1"] is False and prologued(compiled)["mlp.w2"] is True


@pytest.mark.parametrize("count", [1, 2])
def test_insert_nop_puts_nops_on_the_edge(tmp_path, count):
    pybuda.insert_nop("_fused_op_0", "mm2", nop_count=count)
    ops = _ops(_mlp(tmp_path))
    names = [f"buffer_{k}__fused_op_0_mm2" for k in range(count)]
    assert all(ops[n].type == "nop" for n in names)
    assert ops[names[0]].inputs == ["_fused_op_0"] and ops["mm2"].inputs[0] == names[-1]


def test_insert_nop_on_a_missing_edge_names_the_operands(tmp_path):
    pybuda.insert_nop("mm1", "mm2")
    with pytest.raises(GraphError, match=r"'mm2' does not read 'mm1'; its operands: \['_fused_op_0', 'mlp.w2'\]"):
        _mlp(tmp_path)


def test_add_schedule_constraint_orders_independent_ops(tmp_path):
    model, x = Attention(), torch.randn(2, 64, 64)

    def order(name: str) -> list:
        compiled = pybuda.compile(model, x, output_dir=tmp_path / name)
        assert pcc(compiled(x).numpy(), torch_attention(model, x).numpy()) >= 0.99
        return [n for g in compiled.netlist.graphs.values() for n in g.ops]

    base = order("base")
    assert base.index("q_mm") < base.index("v_mm")
    pybuda.add_schedule_constraint(["v_mm", "q_mm"])
    constrained = order("constrained")
    assert constrained.index("v_mm") < constrained.index("q_mm")


def test_schedule_constraint_against_the_dependencies_names_the_cycle(tmp_path):
    pybuda.add_schedule_constraint(["mm2", "mm1"])
    with pytest.raises(BalancerError, match="contradict the graph's dependencies .cycle"):
        _mlp(tmp_path)


class ForkJoin(pybuda.PyBudaModule):
    """gelu -> (six matmuls | nothing) -> add: a long and a short path from one fork to one join."""

    def __init__(self, layers: int = 6, d: int = 256):
        super().__init__("fj")
        g = torch.Generator().manual_seed(3)
        self.weights = [pybuda.Parameter(torch.randn(d, d, generator=g) / d ** 0.5) for _ in range(layers)]
        for i, w in enumerate(self.weights):
            setattr(self, f"w{i}", w)

    def forward(self, x):
        h = y = pybuda.op.Gelu("fork", x)
        for i, w in enumerate(self.weights):
            y = pybuda.op.Matmul(f"mm{i}", y, w)
        return pybuda.op.Add("join", y, h)

    def reference(self, x: torch.Tensor) -> torch.Tensor:
        h = y = torch.nn.functional.gelu(x)
        for w in self.weights:
            y = y @ w.value()
        return y + h


def test_fork_join_buffering_grows_the_joins_short_path_input(tmp_path):
    """With u_kt 1 every matmul accumulates a whole input before it hands on (its latency is its per-input time),
    so the short path must hold several inputs: the balancer grows the join's input buffer from the fork until
    the stall is down to the epoch's pace, and without that buffer the same netlist would stall."""
    model, x = ForkJoin(), torch.randn(16, 128, 256)
    for i in range(len(model.weights)):
        pybuda.override_u_kt(f"mm{i}", 1)
    pybuda.set_configuration_options(input_queues_on_host=False, output_queues_on_host=False)
    compiled = pybuda.compile(model, x, output_dir=tmp_path)
    assert pcc(compiled(x).numpy(), model.reference(x).numpy()) >= 0.99
    join = _ops(compiled)["join"]
    assert join.inputs[1] == "fork" and join.input_buf_min_size_tiles[0] == 0 < join.input_buf_min_size_tiles[1]

    def join_timing(netlist):
        (epoch,) = estimate(netlist, "e150").epochs
        pace = max(max(v for k, v in o.terms.items() if k != "fork_join") for o in epoch.ops)
        return next(o for o in epoch.ops if o.name == "join").terms["fork_join"], pace

    stall, pace = join_timing(compiled.netlist)
    assert stall <= pace
    join.input_buf_min_size_tiles = None
    unbuffered, _ = join_timing(compiled.netlist)
    assert unbuffered > 1.5 * pace


@pytest.mark.parametrize("daisy_chain", [False, True])
def test_insert_nop_for_several_dests_shares_or_daisy_chains(tmp_path, daisy_chain):
    """The layernorm's centred input feeds its square (both operands) and the fused scale-and-shift: one NOP both
    read, or (daisy_chain) one per dest, the second continuing from the first."""
    model, x = Attention(), torch.randn(2, 64, 64)
    src, dests = "ln.dc.subtract.2", ["ln.dc.multiply.3", "_fused_op_5"]
    pybuda.insert_nop(src, dests, daisy_chain=daisy_chain)
    compiled = pybuda.compile(model, x, output_dir=tmp_path)
    assert pcc(compiled(x).numpy(), torch_attention(model, x).numpy()) >= 0.99
    ops = _ops(compiled)
    first, second = (f"buffer_0_{src}_{d}" for d in dests)
    assert ops[first].inputs == [src] and ops[dests[0]].inputs == [first, first]
    if daisy_chain:
        assert ops[second].inputs == [first] and ops[dests[1]].inputs[0] == second
    else:
        assert second not in ops and ops[dests[1]].inputs[0] == first



class _Scaled(pybuda.PyBudaModule):
    """x times a (1, 1) parameter: the multiply's second operand broadcasts along r, c and z."""

    def __init__(self):
        super().__init__("scaled")
        self.s = pybuda.Parameter(torch.full((1, 1), 0.5), requires_grad=False)

    def forward(self, x):
        return pybuda.op.Multiply("mul", x, self.s)


def test_broadcast_splitting_puts_a_nop_after_each_broadcast_but_the_last(tmp_path):
    x = torch.randn(1, 2, 64, 128)
    config = pybuda.CompilerConfig(enable_broadcast_splitting=True, default_df_override="Float32")
    compiled = pybuda.compile(_Scaled(), x, config=config, output_dir=tmp_path)
    assert pcc(compiled(x).numpy(), (x * 0.5).numpy()) >= 0.999
    ops = _ops(compiled)
    nops = [name for name, o in ops.items() if "_splt_brcst_" in name]
    assert [ops[n].type for n in nops] == ["nop", "nop"]
    edges = [ops[n].input_tms[0] for n in nops] + [ops["mul"].input_tms[1]]
    assert [[tm[0] for tm in tms] for tms in edges] == [["broadcast"]] * 3       # one broadcast per edge
    assert ops["mul"].inputs[1] == nops[1] and ops[nops[1]].inputs == [nops[0]]
    plain = _ops(pybuda.compile(_Scaled(), x, output_dir=tmp_path / "plain"))
    assert len(plain) == 1 and len(plain["mul"].input_tms[1]) == 3


def test_schedule_constraint_across_device_segments_or_off_device_says_so():
    """Orderings are kept per device segment: one whose ops are in two segments, or not on the device at all
    (on the CPU, fused away), is refused with the reason."""
    def segment(*ops: str) -> Graph:
        g = Graph()
        g.add_input("x", (1, 1, 32, 32))
        for op in ops:
            g.add_op(op, "nop", ["x"], shape=(1, 1, 32, 32))
        return g

    graphs = [segment("a", "b"), segment("c")]
    check_orderings([["b", "a"], ["c", "c"]], graphs)
    with pytest.raises(BalancerError, match="in different device segments"):
        check_orderings([["a", "c"]], graphs)
    with pytest.raises(BalancerError, match=r"'x' is not an op of a device graph"):
        check_orderings([["a", "x"]], graphs)


def test_insert_queues_routes_the_edge_through_a_dram_queue(tmp_path):
    """insert_queues (producer, consumer, operand): the consumer reads the producer's output from a DRAM queue in
    the same epoch; the estimate (which counts the queue's DRAM traffic) is the balancer's plan, the outputs are
    the same."""
    config = pybuda.CompilerConfig()
    config.insert_queues.append(("mm1", "bias1", 0))
    model, x = MLP(d_in=256), torch.randn(2, 64, 256)
    compiled = pybuda.compile(model, x, output_dir=tmp_path / "q", config=config)
    ops, queues = _ops(compiled), compiled.netlist.queues
    queue = ops["bias1"].inputs[0]
    assert queues[queue].input == "mm1" and ops["mm1"].graph == ops["bias1"].graph
    assert compiled.placement.estimated_cycles == estimate(compiled.netlist_path).total_cycles
    plain = _mlp(tmp_path)
    assert not any(queue.startswith("e2e_mm1") for queue in plain.netlist.queues)    # without it: from mm1's cores
    assert np.array_equal(compiled(x).numpy(), plain(x).numpy())


def test_insert_queues_on_a_missing_edge_names_the_operands(tmp_path):
    config = pybuda.CompilerConfig()
    config.insert_queues.append(("mm1", "bias1", 1))
    with pytest.raises(BalancerError, match=r"insert_queues entry \('mm1', 'bias1', 1\): op 'bias1' does not read "
                                            r"op 'mm1' at operand 1; its operands are 0: mm1, 1: "):
        pybuda.compile(MLP(d_in=256), torch.randn(2, 64, 256), output_dir=tmp_path, config=config)


def test_output_buffer_multiplier_sizes_the_output_buffer(tmp_path):
    """internal_override_output_buffer_multiplier: the op's buf_size_mb is 2 x the multiplier, its L1 counts it,
    the estimate is still the plan and the outputs are the same."""
    config = pybuda.CompilerConfig()
    config.balancer_op_override("mm1", "output_buffer_multiplier", 2)
    model, x = MLP(d_in=256), torch.randn(2, 64, 256)
    compiled = pybuda.compile(model, x, output_dir=tmp_path / "b", config=config)
    ops = _ops(compiled)
    assert ops["mm1"].buf_size_mb == 4 and ops["mm2"].buf_size_mb == 2
    plain = _mlp(tmp_path)
    assert compiled.placement.models["mm1"].l1_bytes > plain.placement.models["mm1"].l1_bytes
    assert compiled.placement.estimated_cycles == estimate(compiled.netlist_path).total_cycles
    assert np.array_equal(compiled(x).numpy(), plain(x).numpy())


def test_impossible_output_buffer_multiplier_explains_itself(tmp_path):
    config = pybuda.CompilerConfig()
    config.balancer_op_override("mm1", "output_buffer_multiplier", 4096)   # 8192 mblocks: no L1 holds them
    with pytest.raises(BalancerError, match=r"no legal op model fits the .* B of usable L1 on e150 with "
                                            r"internal_override_output_buffer_multiplier\('mm1', multiplier=4096\) "
                                            r"\(buf_size_mb 8192; the backend also needs 4096 and the op's t"):
        pybuda.compile(MLP(d_in=256), torch.randn(2, 64, 256), output_dir=tmp_path, config=config)


def test_auto_transposing_placement_turns_a_grid_only_when_enabled():
    """A 10x10 matmul leaves a 10x2 strip of e150's 10x12 grid: a 2x10 op fits there turned (one epoch) when the
    placer may transpose (the default here), and goes to an epoch of its own when it may not (the legacy default)."""
    class TwoOps(pybuda.PyBudaModule):
        def __init__(self):
            super().__init__("two")
            self.w = pybuda.Parameter(torch.randn(320, 320) / 20)

        def forward(self, x, y):
            return pybuda.op.Matmul("a", x, self.w), pybuda.op.Exp("b", y)

    x, y = torch.randn(1, 320, 320), torch.randn(1, 64, 320)
    placements = {}
    for auto in (True, False):
        pybuda.reset_configuration()
        pybuda.override_op_size("a", (10, 10))
        pybuda.override_op_size("b", (2, 10))
        pybuda.config.set_auto_transposing_placement(auto)
        graphs = pybuda.compile(TwoOps(), x, y, output_dir=None).netlist.graphs.values()
        placements[auto] = [(g.name, name, bool(o.grid_transpose)) for g in graphs for name, o in g.ops.items()]
    assert placements[True] == [("fwd_0_0", "a", False), ("fwd_0_0", "b", True)]
    assert placements[False] == [("fwd_0_0", "a", False), ("fwd_0_1", "b", False)]


def test_enumerate_u_kt_keeps_the_smaller_u_kt_that_holds_the_weights_in_l1(tmp_path):
    """On n150 a 9216 -> 128 linear's largest fitting u_kt (96) leaves no L1 for its weights, which are then read
    from DRAM every input; `enable_enumerate_u_kt` (the default) also offers u_kt 72, which holds them, and the
    balancer takes it; False offers the largest only."""
    model, x = torch.nn.Linear(9216, 128), torch.randn(4, 32, 9216)
    plans = {}
    for enumerate_u_kt in (True, False):
        config = pybuda.CompilerConfig(enable_enumerate_u_kt=enumerate_u_kt)
        compiled = pybuda.compile(model, x, device="n150", config=config, output_dir=tmp_path / str(enumerate_u_kt))
        (matmul,) = [m for name, m in compiled.placement.models.items() if name.startswith("matmul")]
        plans[enumerate_u_kt] = matmul, compiled.placement.estimated_cycles
        out, expected = compiled(x).numpy(), model(x).detach().numpy()
        assert pcc(out, expected) >= 0.99
    (wide, wide_cycles), (largest, largest_cycles) = plans[True], plans[False]
    assert (largest.u_kt, largest.prologue) == (96, frozenset())
    assert wide.u_kt < 96 and wide.prologue and wide_cycles < largest_cycles


def test_single_buffer_fallback_fits_an_output_only_single_buffered(tmp_path):
    """A 13x23-tile output (prime dimensions: one core) without t-streaming fits n150's L1 only with one output
    mblock: the error says `enable_single_buffer_fallback` would fit it, and with it the op has buf_size_mb 1."""
    class Exp(torch.nn.Module):
        def forward(self, x):
            return torch.exp(x) * 0.5

    x = torch.randn(1, 13 * 32, 23 * 32)
    with pytest.raises(BalancerError, match=r"enable_single_buffer_fallback=True\) it has 1 legal model"):
        pybuda.compile(Exp(), x, device="n150", config=pybuda.CompilerConfig(enable_t_streaming=False),
                       output_dir=tmp_path / "double")
    config = pybuda.CompilerConfig(enable_t_streaming=False, enable_single_buffer_fallback=True)
    compiled = pybuda.compile(Exp(), x, device="n150", config=config, output_dir=tmp_path / "single")
    assert [op.buf_size_mb for op in _ops(compiled).values()] == [1]
    out, expected = compiled(x).numpy(), Exp()(x).numpy()
    assert pcc(out, expected) >= 0.99 and np.allclose(out, expected, rtol=0.02, atol=0.02)
