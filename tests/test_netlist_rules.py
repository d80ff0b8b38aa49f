"""Hand-made negative tests, one or more per rule family of netlist-format.md §3 (and the reader's schema rules):
each breaks a small valid netlist in one way and asserts the named rule, the object and the line."""
from __future__ import annotations

import pytest

from pybuda.dataformat import DataFormat as DF
from pybuda.netlist import (Attributes, EndLoop, Execute, NetlistError, Param, QueueAlloc, QueueSettings, Var,
                            VarInst, check, load, validate)
from pybuda.netlist.model import FusedSubOp

BASE = """\
devices:
  arch: [grayskull, wormhole_b0]

queues:
  act:     {input: HOST, type: queue, entries: 4, grid_size: [1, 1], t: 1, mblock: [2, 2], ublock: [1, 2], ublock_order: r, df: Float16_b, target_device: 0, loc: dram, dram: [[0, 0x30000000]]}
  weights: {input: HOST, type: ram, entries: 1, grid_size: [1, 1], t: 1, mblock: [2, 2], ublock: [2, 1], ublock_order: r, df: Float16_b, target_device: 0, loc: dram, dram: [[1, 0x30000000]]}
  bias:    {input: HOST, type: ram, entries: 1, grid_size: [1, 1], t: 1, mblock: [1, 1], ublock: [1, 2], ublock_order: r, df: Float16_b, target_device: 0, loc: dram, dram: [[2, 0x30000000]]}
  e2e_mm:  {input: mm, type: queue, entries: 4, grid_size: [1, 1], t: 1, mblock: [2, 1], ublock: [1, 2], ublock_order: r, df: Float16_b, target_device: 0, loc: dram, dram: [[3, 0x30000000]]}
  out:     {input: out_nop, type: queue, entries: 4, grid_size: [1, 1], t: 1, mblock: [2, 1], ublock: [1, 2], ublock_order: r, df: Float16_b, target_device: 0, loc: host, host: [0x0]}

graphs:
  fwd_0:
    target_device: 0
    input_count: 4
    mm: {type: matmul, grid_loc: [0, 0], grid_size: [1, 1], inputs: [act, weights],
         t: 1, mblock: [2, 1], ublock: [1, 2], buf_size_mb: 2, ublock_order: r, in_df: [Float16_b, Float16_b], out_df: Float16_b, intermed_df: Float16_b, acc_df: Float16_b, math_fidelity: HiFi3,
         attributes: {m_k: 2, u_kt: 2, min_buffer_input: 0}}
  fwd_1:
    target_device: 0
    input_count: 4
    add: {type: add, grid_loc: [0, 0], grid_size: [1, 1], inputs: [e2e_mm, bias],
         t: 1, mblock: [2, 1], ublock: [1, 2], buf_size_mb: 2, ublock_order: r, in_df: [Float16_b, Float16_b], out_df: Float16_b, intermed_df: Float16_b, acc_df: Float16_b, math_fidelity: HiFi3,
         input_1_tms: [broadcast: {r: 2}]}
    fused: {type: fused_op, grid_loc: [0, 1], grid_size: [1, 1], inputs: [add, bias],
         t: 1, mblock: [2, 1], ublock: [1, 2], buf_size_mb: 2, ublock_order: r, in_df: [Float16_b, Float16_b], out_df: Float16_b, intermed_df: Float16_b, acc_df: Float16_b, math_fidelity: HiFi3,
         input_1_tms: [broadcast: {r: 2}], attributes: {fused_op_id: 0}}
    out_nop: {type: nop, grid_loc: [0, 2], grid_size: [1, 1], inputs: [fused], untilize_output: true,
         t: 1, mblock: [2, 1], ublock: [1, 2], buf_size_mb: 2, ublock_order: r, in_df: [Float16_b], out_df: Float16_b, intermed_df: Float16_b, acc_df: Float16_b, math_fidelity: HiFi3}

programs:
  - run:
    - param: [$p_loop]
    - var: {$c_one: 1, $c_zero: 0, $c_mb: 4}
    - staticvar: {$lptr: 0, $gptr: 0, $lptr_e: 0, $gptr_e: 0}
    - loop: $p_loop
    -   execute: {graph_name: fwd_0, queue_settings: {
               act: {prologue: false, epilogue: false, zero: false, rd_ptr_local: $lptr, rd_ptr_global: $gptr},
               weights: {prologue: true, epilogue: false, zero: false, rd_ptr_global: $c_zero, wr_ptr_global: $c_zero}} }
    -   execute: {graph_name: fwd_1, queue_settings: {
               e2e_mm: {prologue: false, epilogue: false, zero: false, rd_ptr_local: $lptr_e, rd_ptr_global: $gptr_e},
               bias: {prologue: true, epilogue: false, zero: false, rd_ptr_global: $c_zero, wr_ptr_global: $c_zero}} }
    -   varinst: [$lptr, incwrap, $c_mb, 8]
    -   varinst: [$gptr, incwrap, $c_mb, 8]
    -   varinst: [$lptr_e, incwrap, $c_mb, 8]
    -   varinst: [$gptr_e, incwrap, $c_mb, 8]
    - endloop

fused_ops:
  0:
    inputs: 2
    intermediates: 0
    schedules:
      -
        - mul: {type: multiply, inputs: [input0, input1], mblock: [2, 1], ublock: [1, 2], output: dest}
        - ex: {type: exp, inputs: [dest], mblock: [2, 1], ublock: [1, 2], output: output}
"""


def base():
    return load(BASE, file="base.yaml")


def rules(n, **kw) -> set:
    return {e.rule for e in check(n, **kw)}


def violations(n, rule: str, **kw) -> list:
    found = [e for e in check(n, **kw) if e.rule == rule]
    assert found, f"rule {rule} not reported; got {[str(e) for e in check(n, **kw)]}"
    return found


def test_base_netlist_is_valid_on_both_archs():
    n = base()
    assert check(n) == [] and check(n, arch="wormhole_b0") == []
    assert validate(n) is n


def test_error_carries_file_line_object_rule_and_values():
    n = base()
    n.ops["mm"].ublock = (4, 4)
    with pytest.raises(NetlistError) as err:
        validate(n)
    e = next(v for v in err.value.errors if v.rule == "dest.ublock_limit")
    assert (e.file, e.line, e.obj) == ("base.yaml", BASE.splitlines().index(
        next(l for l in BASE.splitlines() if l.strip().startswith("mm:"))) + 1, "op mm")
    assert e.expected == "<= 8 tiles" and e.actual == 16
    text = str(err.value)
    assert "base.yaml:" in text and "op mm" in text and "[dest.ublock_limit]" in text


# --- schema (reader) ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("old, new, rule, obj", [
    ("loc: host, host: [0x0]}", "loc: host, host: [0x0], colour: red}", "schema.unknown_field", "queue out"),
    ("buf_size_mb: 2, ublock_order: r, in_df: [Float16_b, Float16_b], out_df: Float16_b, intermed_df: Float16_b, "
     "acc_df: Float16_b, math_fidelity: HiFi3,\n         attributes: {m_k: 2",
     "buf_size_mb: 2, ublock_order: r, in_df: [Float16_b, Float16_b], out_df: Float16_b, intermed_df: Float16_b, "
     "acc_df: Float16_b, math_fidelity: HiFi3, speed: 3,\n         attributes: {m_k: 2", "schema.unknown_field", "op mm"),
    ("attributes: {m_k: 2, u_kt: 2, min_buffer_input: 0}", "attributes: {m_k: 2, u_kt: 2, fused_op_id: 3}",
     "attr.unknown", "op mm"),
    ("rd_ptr_local: $lptr, rd_ptr_global: $gptr}", "rd_ptr_local: $lptr, rd_ptr_global: $gptr, speed: 1}",
     "schema.unknown_field", "program run queue_settings act"),
    ("entries: 4, grid_size: [1, 1], t: 1, mblock: [2, 2]", "entries: four, grid_size: [1, 1], t: 1, mblock: [2, 2]",
     "schema.type", "queue act"),
    ("input: HOST, type: queue, entries: 4, grid_size: [1, 1], t: 1, mblock: [2, 2]",
     "input: HOST, type: queue, entries: 4, t: 1, mblock: [2, 2]", "schema.missing_field", "queue act"),
    ("df: Float16_b, target_device: 0, loc: dram, dram: [[0,", "df: Float17, target_device: 0, loc: dram, dram: [[0,",
     "df.invalid", "queue act"),
    ("math_fidelity: HiFi3,\n         attributes: {m_k", "math_fidelity: HiFi9,\n         attributes: {m_k",
     "fidelity.invalid", "op mm"),
    ("input_1_tms: [broadcast: {r: 2}]}\n    fused", "input_1_tms: [select: 2]}\n    fused", "tm.unknown", "op add"),
    ("input_1_tms: [broadcast: {r: 2}]}\n    fused", "input_3_tms: [broadcast: {r: 2}]}\n    fused", "tm.input_index",
     "op add"),
    ("type: queue, entries: 4, grid_size: [1, 1], t: 1, mblock: [2, 2], ublock: [1, 2]",
     "type: fifo, entries: 4, grid_size: [1, 1], t: 1, mblock: [2, 2], ublock: [1, 2]", "schema.value", "queue act"),
    ("- endloop", "- jump: 3", "program.opcode", "program run"),
])
def test_schema_rules(old, new, rule, obj):
    assert old in BASE
    with pytest.raises(NetlistError) as err:
        load(BASE.replace(old, new, 1), file="bad.yaml")
    hits = [e for e in err.value.errors if e.rule == rule]
    assert hits and hits[0].obj == obj and hits[0].file == "bad.yaml" and hits[0].line > 0, str(err.value)


def test_schema_errors_are_all_collected():
    text = BASE.replace("entries: 4, grid_size", "entries: x, grid_size").replace("HiFi3", "HiFi9")
    with pytest.raises(NetlistError) as err:
        load(text)
    assert {"schema.type", "fidelity.invalid"} <= err.value.rules
    assert len(err.value.errors) >= 6


def test_yaml_syntax_and_duplicate_names():
    with pytest.raises(NetlistError) as err:
        load("devices: {arch: grayskull\nqueues: [")
    assert err.value.rules == {"yaml.syntax"}
    dup = BASE.replace("  bias:    {", "  act:     {", 1)
    with pytest.raises(NetlistError) as err:
        load(dup)
    assert "name.duplicate" in err.value.rules


def test_missing_sections_and_bad_arch():
    with pytest.raises(NetlistError) as err:
        load("devices: {arch: grayskull}\nqueues: {}\n")
    assert err.value.rules == {"schema.missing_section"}
    with pytest.raises(NetlistError) as err:
        load(BASE.replace("arch: [grayskull, wormhole_b0]", "arch: [grayskull, gpu]"))
    assert "schema.value" in err.value.rules


def test_arch_must_be_listed():
    n = base()
    n.devices.arch = "grayskull"
    assert "devices.arch" in rules(n, arch="wormhole_b0")


# --- §3.1 per-object -------------------------------------------------------------------------------------------

def _set(obj, **kw):
    for k, v in kw.items():
        setattr(obj, k, v)


PER_OBJECT = [
    (lambda n: _set(n.queues["act"], t=0), "queue.dims", "queue act"),
    (lambda n: _set(n.queues["act"], entries=-1), "queue.entries", "queue act"),
    (lambda n: _set(n.queues["act"], dram=[(0, 0x30000000), (1, 0x31000000)]), "queue.alloc_count", "queue act"),
    (lambda n: _set(n.queues["act"], target_device=-1), "queue.target_device", "queue act"),
    (lambda n: _set(n.graphs["fwd_0"], input_count=0), "graph.input_count", "graph fwd_0"),
    (lambda n: _set(n.ops["mm"], mblock=(0, 1)), "op.dims", "op mm"),
    (lambda n: _set(n.ops["mm"], in_df=[DF.Float16_b]), "op.in_df_count", "op mm"),
    (lambda n: _set(n.ops["add"], inputs=["e2e_mm"], in_df=[DF.Float16_b], input_tms={}), "op.input_count", "op add"),
    (lambda n: _set(n.ops["add"], buf_size_mb=3), "op.buf_size_mb", "op add"),
    (lambda n: _set(n.ops["add"], buf_size_mb=6, t=2), "op.buf_size_mb", None),
    (lambda n: _set(n.ops["mm"], ublock_order="c"), "op.matmul_ublock_order", "op mm"),
    (lambda n: _set(n.ops["mm"].attributes, m_k=None), "attr.matmul_mk", "op mm"),
    (lambda n: _set(n.ops["mm"].attributes, accumulate=True, identity=True), "attr.accumulate_identity", "op mm"),
    (lambda n: _set(n.ops["mm"].attributes, z=2), "attr.z", "op mm"),
    (lambda n: _set(n.ops["mm"].attributes, min_buffer_input=2), "attr.min_buffer_input", "op mm"),
    (lambda n: _set(n.ops["add"], attributes=Attributes(relu_en=True, relu_threshold=-1.0, relu_mode="min")),
     "attr.relu_threshold", "op add"),
    (lambda n: _set(n.ops["add"], type="addd"), "op.type", "op add"),
    (lambda n: _set(n.ops["add"], inputs=["e2e_mm", "nothing"]), "input.missing", "op add"),
    (lambda n: _set(n.queues["e2e_mm"], input="nothing"), "queue.producer_missing", "queue e2e_mm"),
    (lambda n: n.graphs["fwd_1"].ops.__setitem__("mm", n.ops["mm"]), "name.duplicate_op", "op mm"),
    (lambda n: _set(n.ops["add"], gradient_op=True, type="add"), "gradient.grayskull_op", "op add"),
]


@pytest.mark.parametrize("mutate, rule, obj", PER_OBJECT, ids=[f"{r}-{i}" for i, (_, r, _) in enumerate(PER_OBJECT)])
def test_per_object_rules(mutate, rule, obj):
    n = base()
    mutate(n)
    found = violations(n, rule)
    if obj:
        assert any(e.obj == obj for e in found), [str(e) for e in found]


def test_splice_and_dropout_attributes():
    n = base()
    add = n.ops["add"]
    _set(add, type="splice", input_tms={}, attributes=Attributes(splice={0: (0, 0, 1)}))
    assert "attr.splice" in rules(n)
    _set(add, type="dropout", inputs=["e2e_mm"], in_df=[DF.Float16_b], attributes=Attributes(p=1.5))
    assert "attr.p" in rules(n)


# --- §3.2 shapes and TMs ---------------------------------------------------------------------------------------

def test_matmul_inner_dim_mismatch_names_both_inputs():
    n = base()
    n.ops["mm"].attributes.u_kt = 1          # K = 2 but act has 4 column tiles and weights 4 row tiles
    got = rules(n)
    assert {"shape.matmul_in0", "shape.matmul_in1"} <= got
    e = violations(n, "shape.matmul_in0")[0]
    assert e.expected == (1, 2, 2) and e.actual == (1, 2, 4) and "act" in e.message


def test_matmul_bias_and_eltwise_and_queue_shapes():
    n = base()
    n.ops["add"].input_tms = {}              # bias (1, 1, 2) no longer broadcast to (1, 2, 2)
    e = violations(n, "shape.eltwise")[0]
    assert e.obj == "op add" and e.expected == (1, 2, 2) and e.actual == (1, 1, 2)
    n = base()
    n.queues["e2e_mm"].mblock = (1, 1)       # queue holds less than its producer writes
    assert "shape.queue" in rules(n)
    n = base()
    _set(n.ops["mm"].attributes, bias=True)
    n.ops["mm"].inputs.append("bias")
    n.ops["mm"].in_df.append(DF.Float16_b)
    assert "shape.matmul_bias" in rules(n)   # bias needs (1, 2, 2)
    n.ops["mm"].input_tms[2] = [("broadcast", "r", 2)]
    assert "shape.matmul_bias" not in rules(n)


def test_reduce_input_rule():
    n = base()
    _set(n.ops["add"], type="reduce", inputs=["e2e_mm"], in_df=[DF.Float16_b], input_tms={}, mblock=(1, 1),
         ublock=(1, 2), attributes=Attributes(dim="r", type="max", m_k=1, u_kt=1))
    assert "shape.reduce" in rules(n)         # reducing rows needs K = m_k*u_kt = 2 row tiles per core row
    n.ops["add"].attributes.m_k = 2
    assert "shape.reduce" not in rules(n)


def test_tm_rules():
    n = base()
    n.ops["add"].input_tms[0] = [("hslice", 3)]
    assert "tm.divide" in rules(n)
    n.ops["add"].input_tms[0] = [("hslice", 2), ("broadcast", "z", 2)]
    e = violations(n, "tm.broadcast_z_t")[0]
    assert e.obj == "op add" and e.actual == 2
    n = base()
    n.ops["mm"].input_tms[0] = [("transpose",)]
    assert "tm.transpose" in rules(n)        # transpose only on matmul input 1
    n = base()
    n.ops["add"].input_tms[0] = [("transpose",)]
    assert "tm.transpose" in rules(n)        # binary input 0: not on grayskull ...
    assert "tm.transpose" not in rules(n, arch="wormhole_b0")  # ... but legal on wormhole_b0
    n = base()
    n.ops["add"].input_tms[1] = [("tile_broadcast", "r"), ("broadcast", "r", 2)]
    assert "tm.tile_broadcast" in rules(n)
    n.ops["add"].input_tms[1] = [("pad", 1, 0, 0.0), ("broadcast", "r", 2)]
    assert "tm.pad" in rules(n)


def test_fused_input_shapes_follow_sub_op_tms():
    n = base()
    n.ops["fused"].input_tms = {}            # bias (1, 1, 2) reaches the multiply without a broadcast
    assert "shape.fused" in rules(n)
    n.fused_ops["0"].schedules[0][0].input_tms[1] = [("broadcast", "r", 2)]   # broadcast inside the schedule
    assert "shape.fused" not in rules(n)


# --- §3.3 dest, §3.4 formats and attributes --------------------------------------------------------------------

def test_dest_ublock_limit_depends_on_acc_df():
    n = base()
    _set(n.ops["add"], ublock=(2, 4), mblock=(1, 1))      # 8 tiles: fits a 16-bit dest
    assert "dest.ublock_limit" not in rules(n, arch="wormhole_b0")
    n.ops["add"].acc_df = DF.Float32                       # 32-bit dest: 4 tiles
    e = violations(n, "dest.ublock_limit", arch="wormhole_b0")[0]
    assert e.obj == "op add" and e.expected == "<= 4 tiles" and e.actual == 8


@pytest.mark.parametrize("mutate, rule, arch", [
    (lambda n: _set(n.ops["add"], acc_df=DF.Float32), "df.grayskull_acc", "grayskull"),
    (lambda n: _set(n.ops["mm"], intermed_df=DF.Float16), "df.grayskull_exp_width", "grayskull"),
    (lambda n: _set(n.ops["mm"], intermed_df=DF.Bfp4_b, out_df=DF.Bfp4_b), "df.accumulate_bfp", "wormhole_b0"),
    (lambda n: _set(n.ops["mm"], acc_df=DF.Float32), "df.fp32_acc_intermed", "grayskull"),
    (lambda n: _set(n.ops["out_nop"], gradient_op=True, intermed_df=DF.Float32), "df.gradient_intermed",
     "wormhole_b0"),
    (lambda n: _set(n.ops["out_nop"], out_df=DF.Bfp8_b), "df.untilize", "grayskull"),
    (lambda n: _set(n.ops["out_nop"], ublock_order="c"), "untilize.ublock_order", "grayskull"),
    (lambda n: _set(n.ops["mm"].attributes, l1_acc=True), "arch.l1_acc", "grayskull"),
    (lambda n: (_set(n.ops["mm"].attributes, l1_acc=True), _set(n.ops["mm"], intermed_df=DF.Float16)), "df.l1_acc",
     "wormhole_b0"),
    (lambda n: _set(n.ops["add"], attributes=Attributes(stoch_rnd_mode="fpu")), "arch.stoch_rnd", "grayskull"),
    (lambda n: _set(n.ops["add"], in_df=[DF.Int8, DF.Int8]), "df.int", "wormhole_b0"),
    (lambda n: _set(n.ops["add"], acc_df=DF.Int32), "df.int_acc", "wormhole_b0"),
    (lambda n: _set(n.ops["add"], tile_dim=(16, 32)), "arch.tile_dim", "grayskull"),
    (lambda n: _set(n.queues["e2e_mm"], tile_dim=(16, 32)), "tile_dim.queue", "wormhole_b0"),
    (lambda n: _set(n.queues["act"], tile_dim=(1, 32), df=DF.Bfp2_b), "tile_dim.alignment", "wormhole_b0"),
    (lambda n: _set(n.ops["add"], attributes=Attributes(kernel_broadcast={0: 2})), "attr.kernel_broadcast",
     "grayskull"),
])
def test_format_and_attribute_rules(mutate, rule, arch):
    n = base()
    mutate(n)
    violations(n, rule, arch=arch)


def test_reduce_z_and_splice_formats():
    n = base()
    _set(n.ops["add"], type="reduce", inputs=["e2e_mm"], in_df=[DF.Bfp8_b], input_tms={},
         attributes=Attributes(dim="z", type="max", z=1))
    assert "df.reduce_z" in rules(n)
    n = base()
    _set(n.ops["add"], type="splice", in_df=[DF.Float16_b, DF.Bfp8_b],
         attributes=Attributes(splice={0: (0, 1, 1), 1: (0, 1, 1)}))
    assert "df.splice" in rules(n)


def test_untilize_structure_rules():
    n = base()
    n.queues["out"].grid_size = (1, 2)
    n.queues["out"].mblock = (2, 1)
    n.queues["out"].ublock = (1, 1)
    n.queues["out"].host = [0x0, 0x10000]
    assert "untilize.queue_grid" in rules(n)
    n = base()
    n.ops["out_nop"].untilize_output = None
    n.ops["fused"].untilize_output = True    # an untilizing op feeding another op
    assert "untilize.feeds_op" in rules(n)
    n = base()
    n.ops["mm"].untilize_output = True       # m_k > 1, and it feeds an e2e queue read by add
    assert {"untilize.matmul_mk", "untilize.feeds_op"} <= rules(n)


# --- §3.5 graph and queue structure ----------------------------------------------------------------------------

def test_overlapping_cores_and_grid_bounds():
    n = base()
    n.ops["out_nop"].grid_loc = (0, 1)
    e = violations(n, "grid.overlap")[0]
    assert e.obj == "op out_nop" and "fused" in e.message
    n = base()
    n.ops["out_nop"].grid_loc = (0, 9)       # fits grayskull's 12 columns, not wormhole_b0's 8
    assert "grid.bounds" not in rules(n)
    assert "grid.bounds" in rules(n, arch="wormhole_b0")
    n.ops["out_nop"].grid_loc = (9, 2)
    n.ops["out_nop"].grid_size = (2, 1)
    assert "grid.bounds" in rules(n)
    n.ops["out_nop"].grid_transpose = True   # footprint 1x2 fits
    assert "grid.bounds" not in rules(n)


def test_cross_graph_input_needs_a_queue():
    n = base()
    n.ops["add"].inputs[0] = "mm"
    e = violations(n, "graph.cross_graph_input")[0]
    assert e.obj == "op add" and "fwd_0" in e.message


def test_queue_input_count_must_agree():
    n = base()
    n.graphs["fwd_1"].input_count = 2
    n.ops["add"].inputs[0] = "act"           # act is read by graphs with input_count 4 and 2
    assert "queue.input_count" in rules(n)


def test_static_dram_buffers_may_not_overlap():
    n = base()
    n.queues["bias"].dram = [(1, 0x30000100)]   # inside weights' buffer on channel 1
    e = violations(n, "queue.dram_overlap")[0]
    assert "weights" in e.message and e.obj == "queue bias"
    n = base()
    n.queues["out"].loc, n.queues["out"].host, n.queues["out"].dram = "dram", None, [(9, 0x30000000)]
    assert "device.dram_channel" in rules(n)    # grayskull has 8 channels


def test_aliases_and_implicit_dual_views():
    n = base()
    n.queues["bias"].alias = "weights"
    assert "queue.alias" in rules(n)             # different allocation and size
    n = base()
    q = n.queues["bias"]
    _set(q, dram=list(n.queues["weights"].dram), mblock=(2, 2), ublock=(2, 1))
    assert "queue.dram_overlap" not in rules(n)  # identical static rams are dual views of one buffer


def test_dynamic_queues_checked_per_allocation():
    n = base()
    prog = n.programs[0]
    n.queues["e2e_mm"].dram = [(1, 0x30000000)]   # same place as the static weights
    prog.instructions.insert(4, QueueAlloc(opcode="allocate_queue", queues=["e2e_mm"]))
    prog.instructions.insert(-1, QueueAlloc(opcode="deallocate_queue", queues=["e2e_mm"]))
    e = violations(n, "queue.dram_overlap")[0]
    assert "dynamic" in e.message and "weights" in e.message


def test_device_target_bounds():
    n = base()
    n.graphs["fwd_1"].target_device = 1
    assert "device.target_device" in rules(n, device="e150")   # one chip
    assert "device.target_device" not in rules(n, device="n300", arch="wormhole_b0")


# --- §3.6 programs and queue settings ---------------------------------------------------------------------------

def _prog(n):
    return n.programs[0].instructions


def _settings(n, graph: str, queue: str) -> QueueSettings:
    return next(i for i in _prog(n) if isinstance(i, Execute) and i.graph_name == graph).queue_settings[queue]


PROGRAM_RULES = [
    (lambda n: _prog(n).insert(2, Param(names=["$p_other"])), "program.param_first"),
    (lambda n: _prog(n).pop(-1), "program.loop_balance"),
    (lambda n: _prog(n).append(EndLoop()), "program.loop_balance"),
    (lambda n: _set(_prog(n)[3], count=0), "program.loop_count"),
    (lambda n: _prog(n).insert(5, VarInst(dst="$lptr", op="incwrap", args=[1])), "program.varinst"),
    (lambda n: _prog(n).insert(5, VarInst(dst="$lptr", op="jump", args=[1])), "program.varinst"),
    (lambda n: _prog(n).insert(5, VarInst(dst="$lptr", op="inc", args=["$nothing"])), "program.undefined_var"),
    (lambda n: _prog(n).insert(2, Var(opcode="var", vars={"$lptr": 0})), "program.var_redeclared"),
    (lambda n: _prog(n).insert(5, VarInst(dst="$c_mb", op="set", args=[2])), "program.const_in_loop"),
    (lambda n: _prog(n).insert(5, Execute(graph_name="fwd_9")), "program.unknown_graph"),
    (lambda n: _prog(n).insert(5, QueueAlloc(opcode="allocate_queue", queues=["nothing"])), "program.unknown_queue"),
    (lambda n: _prog(n)[4].queue_settings.pop("act"), "queue_settings.missing"),
    (lambda n: _prog(n)[4].queue_settings.__setitem__("ghost", QueueSettings(rd_ptr_global=0)),
     "queue_settings.unknown_queue"),
    (lambda n: _prog(n)[4].queue_settings.__setitem__("bias", QueueSettings(rd_ptr_global=0, wr_ptr_global=0)),
     "queue_settings.not_graph_io"),
    (lambda n: _set(_settings(n, "fwd_0", "act"), rd_ptr_global=None), "queue_settings.rd_ptr_global"),
    (lambda n: _set(_settings(n, "fwd_0", "act"), wr_ptr_global="$c_zero"), "queue_settings.queue_ptrs"),
    (lambda n: _set(_settings(n, "fwd_0", "act"), rd_ptr_local=None), "queue_settings.queue_ptrs"),
    (lambda n: _set(_settings(n, "fwd_0", "weights"), rd_ptr_local="$c_zero"), "queue_settings.ram_ptrs"),
    (lambda n: _set(_settings(n, "fwd_0", "weights"), wr_ptr_global=None), "queue_settings.ram_ptrs"),
    (lambda n: _set(_settings(n, "fwd_1", "e2e_mm"), epilogue=True), "queue_settings.epilogue_op_fed"),
    (lambda n: _set(_settings(n, "fwd_0", "act"), rd_ptr_autoinc=2, global_rdptr_autoinc=1),
     "queue_settings.autoinc"),
    (lambda n: _set(_settings(n, "fwd_0", "weights"), prologue="$p_loop"), "queue_settings.static"),
    (lambda n: _set(_settings(n, "fwd_0", "weights"), zero="maybe"), "queue_settings.value"),
]


@pytest.mark.parametrize("mutate, rule", PROGRAM_RULES, ids=[f"{r}-{i}" for i, (_, r) in enumerate(PROGRAM_RULES)])
def test_program_rules(mutate, rule):
    n = base()
    mutate(n)
    found = violations(n, rule)
    assert all(e.obj == "program run" for e in found)


def test_gradient_op_output_needs_queue_settings():
    n = base()
    _set(n.ops["mm"], gradient_op=True)
    _set(n.queues["e2e_mm"], type="ram", entries=1)
    found = rules(n)
    assert "queue_settings.gradient_missing" in found


# --- fused ops ------------------------------------------------------------------------------------------------

def _sub(n, i) -> FusedSubOp:
    return n.fused_ops["0"].schedules[0][i]


@pytest.mark.parametrize("mutate, rule", [
    (lambda n: _set(n.ops["fused"].attributes, fused_op_id="7"), "fused.missing_id"),
    (lambda n: _set(n.fused_ops["0"], inputs=3), "fused.input_count"),
    (lambda n: _set(_sub(n, 1), inputs=["input0"]), "fused.dest_read"),
    (lambda n: _set(_sub(n, 0), inputs=["dest", "input1"]), "fused.dest_first"),
    (lambda n: _set(_sub(n, 1), mblock=(1, 1)), "fused.output_dims"),
    (lambda n: _set(_sub(n, 0), inputs=["input0", "input5"]), "fused.input_name"),
    (lambda n: _set(_sub(n, 1), type="matmul", attributes=Attributes(m_k=2, u_kt=1)), "fused.matmul_output"),
    (lambda n: _set(_sub(n, 1), ublock=(4, 4), mblock=(1, 1)), "dest.ublock_limit"),
])
def test_fused_op_rules(mutate, rule):
    n = base()
    mutate(n)
    violations(n, rule)


# --- §3.8 L1 ---------------------------------------------------------------------------------------------------

def test_l1_budget_names_op_and_sizes():
    n = base()
    _set(n.ops["out_nop"], mblock=(64, 32), ublock=(1, 1))    # 2 x 2048 tiles of output buffer
    n.queues["out"].mblock = (64, 32)
    n.queues["out"].ublock = (1, 1)
    e = violations(n, "l1.budget")[0]
    assert e.obj == "op out_nop" and "output" in e.message
    n = base()
    n.ops["add"].input_buf_min_size_tiles = [500, 0]      # ~1 MB: beyond grayskull's L1, within wormhole_b0's
    assert "l1.budget" in rules(n) and "l1.budget" not in rules(n, arch="wormhole_b0")


def test_input_buffer_count_rule():
    n = base()
    n.ops["add"].input_buf_min_size_tiles = [4]
    assert "op.input_buf_count" in rules(n)


def test_instruction_errors_point_at_their_line():
    text = BASE.replace("- loop: $p_loop", "- loop: 0")
    line = text.splitlines().index("    - loop: 0") + 1
    e = violations(load(text), "program.loop_count")[0]
    assert e.line == line and e.obj == "program run"


# --- the registry ------------------------------------------------------------------------------------------------

def test_docs_rule_table_is_the_registry():
    from pathlib import Path

    from pybuda.netlist.rules import rule_table
    text = (Path(__file__).resolve().parents[1] / "docs" / "netlist.md").read_text()
    start = text.index("<!-- rule table: generated by `pybuda netlist rules` -->\n") + len(
        "<!-- rule table: generated by `pybuda netlist rules` -->\n")
    assert text[start:text.index("<!-- end of rule table -->")] == rule_table(), \
        "docs/netlist.md's rule table is stale: paste the output of `pybuda netlist rules`"


def test_every_rule_has_a_doc_a_section_and_unique_ids():
    from pybuda.netlist.rules import RULES
    for r in RULES.values():
        assert r.doc and r.section.startswith("§"), r.id
    owners: dict = {}
    for r in RULES.values():
        for i in r.reports:
            owners.setdefault(i, []).append(r.id)
    shared = {i: o for i, o in owners.items() if len(o) > 1}
    # the TM shape ids are reported by the edge, fused-input and queue shape rules alike
    assert set(shared) <= {"tm.divide", "tm.factor", "tm.broadcast_z_t", "tm.kind", "shape.fused", "shape.queue"}


def test_a_rule_may_report_only_the_ids_it_declares():
    from pybuda.errors import InternalError
    from pybuda.netlist.model import Netlist
    from pybuda.netlist.rules import RULES, Context, rule, run
    from pybuda.netlist.rules.registry import RULES as REGISTRY

    @rule("test.liar", on=Netlist, section="§0")
    def liar(c: Context) -> None:
        """Reports a rule id it does not own."""
        c.fail("netlist", "wrong id", rule="op.dims")

    try:
        with pytest.raises(InternalError, match="test.liar.*op.dims"):
            run(Context(base(), "grayskull", None, None), [RULES["test.liar"]])
    finally:
        del REGISTRY["test.liar"]


def test_check_can_apply_some_rules_only():
    n = base()
    n.ops["mm"].ublock = (4, 4)
    n.ops["mm"].in_df = n.ops["mm"].in_df[:1]
    assert rules(n) >= {"dest.ublock_limit", "op.in_df_count"}
    assert rules(n, rules=["op.in_df_count"]) == {"op.in_df_count"}
    with pytest.raises(ValueError, match="unknown netlist rule id.*op.bogus"):
        check(n, rules=["op.bogus"])


def test_dest_limit_comes_from_the_device_description():
    import dataclasses

    from pybuda.device import get_device
    n = base()
    n.ops["mm"].ublock = (2, 3)          # 6 tiles: fits 8, not 4
    assert "dest.ublock_limit" not in rules(n)
    small = dataclasses.replace(get_device("e150"), dest_tiles_16b=4)
    assert [e.expected for e in check(n, device=small) if e.rule == "dest.ublock_limit"] == ["<= 4 tiles"]
