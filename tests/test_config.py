"""Tests for pybuda.config: defaults, validation, legacy helpers, env overrides, op-name checking, docs."""
from __future__ import annotations

import dataclasses
import inspect
import json
import os
import re
import warnings
from pathlib import Path

import pytest

from pybuda import config as C
from pybuda.config import (
    AMPNodeProperties, CompileDepth, CompilerConfig, DeviceMode, DramQueueConfigOverride, DRAMPlacementAlgorithm,
    NopInsertionInstruction, OpOverride, OverrideError, PerfTraceLevel, PlacerOpOverride, TTIDumpFormat,
)
from pybuda.dataformat import DataFormat, MathFidelity
from pybuda.errors import PyBudaError, UserInputError, UserTypeError

# These tests are about what options store and validate; that setting an option with no effect yet warns is
# tested in test_guards.py.
pytestmark = pytest.mark.filterwarnings("ignore::pybuda.config.IneffectiveOptionWarning")

DOCS = Path(__file__).resolve().parents[1] / "docs" / "config.md"


@pytest.fixture(autouse=True)
def clean_env_and_global(monkeypatch: pytest.MonkeyPatch):
    """Every test starts (and ends) with no PYBUDA_* variables and a fresh global config."""
    def clear() -> None:
        for name in list(os.environ):
            if name.startswith("PYBUDA_"):
                monkeypatch.delenv(name)
        C.reset_configuration()

    clear()
    yield
    clear()


def g() -> CompilerConfig:
    return C._get_global_compiler_config()


# ---------------------------------------------------------------------------------------------------------------
# Defaults and enums
# ---------------------------------------------------------------------------------------------------------------
def test_defaults_match_legacy():
    cfg = CompilerConfig()
    expected = {
        "enable_t_streaming": True, "enable_auto_fusing": True, "enable_tvm_cpu_fallback": True,
        "cpu_fallback_ops": {"embedding"}, "enable_tm_cpu_fallback": False, "tm_cpu_fallback_max_depth": 10,
        "enable_conv_prestride": True, "enable_device_tilize": False, "default_dram_parameters": None,
        "amp_level": None, "default_df_override": None, "default_accumulate_df": None,
        "default_math_fidelity": MathFidelity.HiFi3, "performance_trace": PerfTraceLevel.NONE,
        "enable_stable_softmax": True, "device_mode": DeviceMode.CompileAndRun, "input_queues_on_host": True,
        "output_queues_on_host": True, "manual_t_streaming": False, "tvm_graph_store_path": "",
        "tvm_graph_load_path": "", "max_pool_add_sub_surround": False, "max_pool_add_sub_surround_value": 1.0,
        "loopback_outputs": {}, "op_names_to_epoch_break": [], "op_names_to_chip_break": [],
        "op_names_dont_fuse": [], "amp_properties": [], "scheduler_constraints": [],
        "tti_dump_format": TTIDumpFormat.DEFAULT, "dram_placement_algorithm": DRAMPlacementAlgorithm.ROUND_ROBIN,
        "graph_solver_self_cut_type": "FastCut", "enable_link_past_cache_ios": False, "fracture_groups": [],
        "backend_opt_level": 4, "manual_dram_queue_placement": {}, "insert_queues": [],
        "buffering_nops_to_insert": {}, "enable_training": False, "enable_recompute": False,
        "balancer_policy": "default", "enable_consteval": True,
        "compile_depth": CompileDepth.FULL, "enable_enumerate_u_kt": True, "op_names_manual_fuse": [],
        "balancer_op_overrides": {}, "placer_op_overrides": [],
        "harvesting_mask": 0, "enable_single_buffer_fallback": False, "op_intermediates_to_save": [],
        "use_interactive_placer": True, "chip_placement_policy": "MMIO_LAST", "verify": False,
        "backend_output_dir": "pybuda_out", "enable_forked_dram_inputs": False,
    }
    for name, value in expected.items():
        assert getattr(cfg, name) == value, name
    assert cfg.enable_auto_transposing_placement is True     # deliberately on here (legacy: off; docs/config.md)
    assert cfg.scheduler_policy == "Topological"              # deliberately (legacy: ModuleInputsBFS; docs/config.md)
    assert cfg.save_intermediates() is False


def test_compile_depth_order_and_values():
    names = ["INIT_COMPILE", "GENERATE_INITIAL_GRAPH", "POST_INITIAL_GRAPH_PASS", "CONSTEVAL_GRAPH",
             "POST_PATTERN_MATCHER", "OPTIMIZED_GRAPH", "AUTOGRAD", "POST_AUTOGRAD_PASS", "PRE_LOWERING_PASS",
             "BUDA_GRAPH_PRE_PLACER", "BALANCER_PASS", "PRE_NETLIST_PASS", "GENERATE_NETLIST",
             "BACKEND_GOLDEN_VERIFY", "FULL"]
    assert [d.name for d in CompileDepth] == names
    assert [d.value for d in CompileDepth] == list(range(15))
    assert CompileDepth.BALANCER_PASS < CompileDepth.FULL
    assert [m.name for m in PerfTraceLevel] == ["NONE", "LIGHT", "VERBOSE"]
    assert [m.name for m in DeviceMode] == ["CompileAndRun", "CompileOnly", "RunOnly"]
    assert TTIDumpFormat.BACKEND_TILIZED.extension() == "tbin"


def test_record_defaults():
    assert OpOverride() == OpOverride(None, None, None, None, None, {}, None)
    assert PlacerOpOverride() == PlacerOpOverride(start=None, transpose_op=False, chip_id=None,
                                                  temporal_epoch_break=False)
    assert DramQueueConfigOverride(1, 2).channel == 2
    assert NopInsertionInstruction("a", "b").unique_id() == ("a", "b", None, None)


def test_every_field_is_declared_as_an_option():
    for f in dataclasses.fields(CompilerConfig):
        decl = f.metadata.get("option")
        assert isinstance(decl, C.Option), f"{f.name} is not declared with option(...)"
        assert decl.doc, f.name
        assert getattr(CompilerConfig(), f.name) == decl.default, f.name


def test_effective_options_are_derived_from_the_declarations():
    fields = {f.name: f.metadata["option"] for f in dataclasses.fields(CompilerConfig)}
    record_fields = {"balancer_op_overrides": OpOverride, "placer_op_overrides": PlacerOpOverride}

    def takes_effect(stored: str) -> bool:
        name, _, attr = stored.partition(".")
        record = record_fields.get(name)
        return fields[name].effective and (not attr or next(
            f.metadata["attribute"].effective for f in dataclasses.fields(record) if f.name == attr))

    assert C.EFFECTIVE_OPTIONS == ({name for name, decl in fields.items() if decl.effective}
                                   | {h for h, stores in C.HELPERS.items() if all(map(takes_effect, stores))})


@pytest.mark.parametrize("name, effective", [
    ("compile_depth", True), ("balancer_policy", True), ("enable_recompute", True), ("scheduler_policy", True),
    ("fracture_groups", True), ("override_op_size", True), ("override_u_kt", True), ("place_on_new_epoch", True),
    ("override_op_placement", True), ("balancer_op_override", True), ("insert_fracture_group", True),
    ("set_num_repeated_patterns", False), ("set_auto_transposing_placement", True),
])
def test_effective_options_examples(name, effective):
    assert (name in C.EFFECTIVE_OPTIONS) == effective


def test_every_helper_declares_what_it_stores():
    methods = {"enable_amp_light", "place_on_new_epoch", "place_on_new_chip", "place_queue_to_chip_dram",
               "dont_fuse", "manual_fuse", "balancer_op_override"}
    functions = {n for n in C.__all__ if inspect.isfunction(getattr(C, n)) and getattr(C, n).__module__ == C.__name__
                 and n.startswith(("set_", "override_", "add_", "remove_", "insert_", "configure_",
                                   "internal_override_"))} - {"set_configuration_options"}
    assert set(C.HELPERS) == methods | functions | {"_internal_insert_fj_buffering_nop"}
    fields = {f.name: f for f in dataclasses.fields(CompilerConfig)}
    for name, stores in C.HELPERS.items():
        assert stores, name
        for stored in stores:
            field, _, attr = stored.partition(".")
            assert field in fields, (name, stored)
            assert not attr or attr in {f.name for f in dataclasses.fields(OpOverride)}, (name, stored)


@dataclasses.dataclass
class _Record:
    """An override record with an attribute declared without effect."""

    kept: int | None = C.attribute()
    ignored: int | None = C.attribute(effective=False)


def test_record_attributes_declare_their_effect():
    C.override_op_placement("mm", chip_id=1, start=(0, 0))
    C.override_u_kt("mm", 2)
    assert C.ineffective_options(g()) == []
    assert all(f.metadata["attribute"].effective for f in dataclasses.fields(PlacerOpOverride))
    records = [("mm", _Record(kept=1, ignored=2)), ("mm2", _Record(kept=1))]
    assert C._ineffective_attributes(records) == ["ignored"]      # named `<field>.ignored` by ineffective_options
    assert C._ineffective_attributes([("mm", _Record(kept=1))]) == []


def test_inference_compile_warnings_come_from_the_training_only_declarations():
    assert C.inference_compile_warnings(CompilerConfig()) == []
    cfg = CompilerConfig(enable_recompute=True, compensated_parameter_updates=False, optimizer_on_host=True)
    messages = C.inference_compile_warnings(cfg)
    assert [m.split(" has no effect on an inference compile")[0] for m in messages] == [
        "enable_recompute", "compensated_parameter_updates=False", "optimizer_on_host"]
    training_only = [f.name for f in dataclasses.fields(CompilerConfig) if f.metadata["option"].training]
    assert training_only == ["enable_recompute", "compensated_parameter_updates", "optimizer_on_host"]
    assert all(re.search(r"\(it .*\)$", m) for m in messages)


# ---------------------------------------------------------------------------------------------------------------
# set_configuration_options
# ---------------------------------------------------------------------------------------------------------------
def test_set_configuration_options_renames():
    C.set_configuration_options(accumulate_df=DataFormat.Float32, math_fidelity="LoFi", harvested_rows=[1, 7])
    assert g().default_accumulate_df is DataFormat.Float32
    assert g().default_math_fidelity is MathFidelity.LoFi
    assert g().harvesting_mask == (1 << 1) | (1 << 7)


def test_set_configuration_options_user_guide_names_and_strings():
    C.set_configuration_options(default_math_fidelity=MathFidelity.HiFi2, default_accumulate_df="Float16_b",
                                default_df_override="Bfp8_b", performance_trace="verbose",
                                dram_placement_algorithm="closest", backend_opt_level=2, amp_level=1)
    cfg = g()
    assert cfg.default_math_fidelity is MathFidelity.HiFi2
    assert cfg.default_accumulate_df is DataFormat.Float16_b
    assert cfg.default_df_override is DataFormat.Bfp8_b
    assert cfg.performance_trace is PerfTraceLevel.VERBOSE
    assert cfg.dram_placement_algorithm is DRAMPlacementAlgorithm.CLOSEST
    assert (cfg.backend_opt_level, cfg.amp_level) == (2, 1)


def test_set_configuration_options_only_writes_given_values():
    g().enable_auto_fusing = False
    C.set_configuration_options(enable_stable_softmax=False)
    assert g().enable_auto_fusing is False
    assert g().enable_stable_softmax is False
    assert g().enable_t_streaming is True


def test_set_configuration_options_sets_auto_transpose_as_given():
    """Legacy OR-ed it into the current value; with the default on here that would make False impossible."""
    C.set_configuration_options(enable_auto_transposing_placement=False)
    assert g().enable_auto_transposing_placement is False
    C.set_configuration_options(enable_auto_transposing_placement=True)
    assert g().enable_auto_transposing_placement is True


def test_set_configuration_options_unknown_kwarg_suggests():
    with pytest.raises(TypeError, match=r"'math_fidelty'.*did you mean 'math_fidelity'"):
        C.set_configuration_options(math_fidelty="LoFi")


def test_set_configuration_options_conflicting_alias():
    with pytest.raises(ValueError, match="math_fidelity='LoFi' conflicts with default_math_fidelity='HiFi4'"):
        C.set_configuration_options(math_fidelity="LoFi", default_math_fidelity="HiFi4")
    assert g().default_math_fidelity is MathFidelity.HiFi3
    C.set_configuration_options(accumulate_df="Float32", default_accumulate_df=DataFormat.Float32)
    assert g().default_accumulate_df is DataFormat.Float32


def test_set_configuration_options_keywords_are_options_or_their_declared_aliases():
    aliases = {f.metadata["option"].alias: f.name for f in dataclasses.fields(CompilerConfig)
               if f.metadata["option"].alias}
    assert aliases == {"accumulate_df": "default_accumulate_df", "math_fidelity": "default_math_fidelity",
                       "harvested_rows": "harvesting_mask"}
    fields = {f.name for f in dataclasses.fields(CompilerConfig)}
    params = set(inspect.signature(C.set_configuration_options).parameters) - {"unknown", "place_on_one_row"}
    assert set(aliases) <= params and params - set(aliases) <= fields


def test_set_configuration_options_is_atomic():
    with pytest.raises(ValueError, match="backend_opt_level"):
        C.set_configuration_options(enable_auto_fusing=False, backend_opt_level=9)
    assert g().enable_auto_fusing is True
    assert g().backend_opt_level == 4


def test_set_configuration_options_place_on_one_row_ignored_with_warning():
    before = g().to_dict()
    with pytest.warns(UserWarning, match="place_on_one_row"):
        C.set_configuration_options(place_on_one_row=True)
    assert g().to_dict() == before


def test_harvested_rows_validated():
    with pytest.raises(ValueError, match="harvested_rows.*row 6"):
        C.set_configuration_options(harvested_rows=[6])
    assert C.get_harvesting_mask([]) == 0


def test_device_config_validated():
    C.set_configuration_options(device_config="wh_n150")
    assert g().device_config == "wh_n150"
    with pytest.raises(ValueError, match="device_config.*'wh_n999'.*wh_n300"):
        C.set_configuration_options(device_config="wh_n999")
    with pytest.raises(ValueError, match="device_config: invalid value 'galaxy' \\(a legacy value this compiler does "
                                         "not implement\\); legal values: wh_n150, wh_n300, gs_e150"):
        C.set_configuration_options(device_config="galaxy")


# ---------------------------------------------------------------------------------------------------------------
# Field validation
# ---------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("field, value, error, pattern", [
    ("balancer_policy", "Fastest", ValueError,
     r"balancer_policy: invalid value 'Fastest'; legal values: default, CP-SAT, Greedy, NLP, SingleOpPerEpoch$"),
    ("scheduler_policy", "BFS", ValueError, r"scheduler_policy.*'BFS'.*LongestPath"),
    ("graph_solver_self_cut_type", "Slow", ValueError, r"graph_solver_self_cut_type.*'Slow'.*FastCut"),
    ("dram_placement_algorithm", "NEAREST", ValueError, r"dram_placement_algorithm.*'NEAREST'.*CLOSEST"),
    ("compile_depth", "balancer pass", ValueError, r"compile_depth.*'balancer pass'.*stage name.*BALANCER_PASS"),
    ("default_df_override", "Float8", ValueError, r"default_df_override.*'Float8'.*Bfp8_b"),
    ("default_math_fidelity", "HiFi5", ValueError, r"default_math_fidelity.*'HiFi5'.*HiFi4"),
    ("performance_trace", 1, TypeError, r"performance_trace.*int.*VERBOSE"),
    ("enable_t_streaming", 1, TypeError, r"enable_t_streaming: expected bool, got int 1"),
    ("backend_opt_level", True, TypeError, r"backend_opt_level: expected int, got bool"),
    ("backend_opt_level", 5, ValueError, r"backend_opt_level: value 5 out of range; legal values: 0\.\.4"),
    ("tm_cpu_fallback_max_depth", -1, ValueError, r"tm_cpu_fallback_max_depth.*-1.*>= 0"),
    ("amp_level", 4, ValueError, r"amp_level.*4.*0\.\.3"),
    ("cpu_fallback_ops", {"embedding", 3}, TypeError, r"cpu_fallback_ops item: expected str, got int 3"),
    ("loopback_outputs", {"past": "0"}, TypeError, r"loopback_outputs\['past'\]: expected int"),
    ("balancer_op_overrides", {"mm": (2, 2)}, TypeError, r"balancer_op_overrides\['mm'\]: expected OpOverride"),
    ("chip_placement_policy", "RANDOM", ValueError, r"chip_placement_policy.*legal values: MMIO_LAST$"),
    ("chip_placement_policy", "SNAKE", ValueError, r"chip_placement_policy: invalid value 'SNAKE' \(a legacy value"),
])
def test_field_validation_errors_name_field_value_and_legal(field, value, error, pattern):
    cfg = CompilerConfig()
    before = getattr(cfg, field)
    with pytest.raises(error, match=pattern) as info:
        setattr(cfg, field, value)
    assert isinstance(info.value, UserTypeError if error is TypeError else UserInputError)
    assert getattr(cfg, field) == before


RIBBON = (r"balancer_policy: invalid value 'Ribbon' \(a legacy value this compiler does not implement\); legal values: "
          r"default, CP-SAT, Greedy, NLP, SingleOpPerEpoch")


@pytest.mark.parametrize("policy", ["Ribbon", "CNN", "MaximizeTMinimizeGrid", "MinimizeGrid", "Random"])
def test_unimplemented_legacy_balancer_policies_are_refused_when_the_config_is_made(policy):
    pattern = RIBBON.replace("Ribbon", policy)
    with pytest.raises(UserInputError, match=pattern):
        CompilerConfig(balancer_policy=policy)
    with pytest.raises(UserInputError, match=pattern):
        C.set_configuration_options(balancer_policy=policy, enable_auto_fusing=False)
    assert g().balancer_policy == "default" and g().enable_auto_fusing is True


def test_ribbon_from_the_environment_is_refused(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PYBUDA_BALANCER_POLICY_TYPE", "Ribbon")
    with pytest.raises(ValueError, match="PYBUDA_BALANCER_POLICY_TYPE='Ribbon': " + RIBBON):
        CompilerConfig()


@pytest.mark.parametrize("policy", C.BALANCER_POLICIES)
def test_every_legal_balancer_policy_runs_in_the_balancer(policy, tmp_path):
    import torch

    import pybuda
    from models import MLP
    config = CompilerConfig(balancer_policy=policy, compile_depth="balance")
    placement = pybuda.compile(MLP(), torch.randn(2, 16, 64), output_dir=tmp_path, config=config).placement
    assert placement.epochs >= 1
    if policy == "SingleOpPerEpoch":
        assert placement.epochs == len(placement.placed)


def test_validation_at_construction():
    with pytest.raises(ValueError, match="backend_opt_level"):
        CompilerConfig(backend_opt_level=7)
    with pytest.raises(TypeError, match="verify"):
        CompilerConfig(verify="yes")


def test_enum_names_are_parsed():
    cfg = CompilerConfig(compile_depth="balancer_pass", default_df_override="Float16_b", tti_dump_format="backend",
                         device_mode="compileonly", max_pool_add_sub_surround_value=5)
    assert cfg.compile_depth is CompileDepth.BALANCER_PASS
    assert cfg.default_df_override is DataFormat.Float16_b
    assert cfg.tti_dump_format is TTIDumpFormat.BACKEND
    assert cfg.device_mode is DeviceMode.CompileOnly
    assert cfg.max_pool_add_sub_surround_value == 5.0 and isinstance(cfg.max_pool_add_sub_surround_value, float)
    cfg.compile_depth = CompileDepth.GENERATE_NETLIST
    assert cfg.compile_depth is CompileDepth.GENERATE_NETLIST
    cfg.compile_depth = "lower"          # a stage name (checked against the stage list by compile)
    assert cfg.compile_depth == "lower" and cfg.to_dict()["compile_depth"] == "lower"


def test_unknown_attribute_rejected_with_suggestion():
    cfg = CompilerConfig()
    with pytest.raises(AttributeError, match=r"'enable_t_streamin'.*did you mean 'enable_t_streaming'") as info:
        cfg.enable_t_streamin = True
    assert isinstance(info.value, C.UnknownOptionError) and isinstance(info.value, PyBudaError)


def test_containers_are_normalised_copies():
    names = ("a", "b")
    cfg = CompilerConfig(op_names_dont_fuse=names, cpu_fallback_ops=["x", "x"])
    assert cfg.op_names_dont_fuse == ["a", "b"]
    assert cfg.cpu_fallback_ops == {"x"}


# ---------------------------------------------------------------------------------------------------------------
# Override helpers
# ---------------------------------------------------------------------------------------------------------------
def test_balancer_overrides_store_in_one_op_override():
    C.override_op_size("mm", [2, 4])
    C.override_u_kt("mm", 4)
    C.override_t_stream_dir("mm", "R")
    C.override_t_stream_shape("mm", (4, 1))
    C.override_dram_parameters("mm", False)
    C.override_input_buffer_multiplier("mm", 0, multiplier=4)
    C.override_input_buffer_multiplier("mm", 1, multiplier=2)
    with pytest.warns(UserWarning, match="may result in hangs"):
        C.internal_override_output_buffer_multiplier("mm", multiplier=3)
    assert g().balancer_op_overrides == {"mm": OpOverride(
        grid_shape=(2, 4), force_dram_parameters=False, t_stream_dir="r", t_stream_shape=(4, 1), u_kt=4,
        input_buffer_multiplier={0: 4, 1: 2}, output_buffer_multiplier=3)}


def test_t_stream_dir_none_means_no_streaming():
    C.override_t_stream_dir("op", None)
    assert g().balancer_op_overrides["op"].t_stream_dir == "n"


def test_balancer_op_override_method_merges_dicts():
    cfg = CompilerConfig()
    cfg.balancer_op_override("x", "input_buffer_multiplier", {0: 2})
    cfg.balancer_op_override("x", "input_buffer_multiplier", {0: 3, 2: 5})
    assert cfg.balancer_op_overrides["x"].input_buffer_multiplier == {0: 3, 2: 5}
    with pytest.raises(ValueError, match="unknown attribute 'grid'.*grid_shape"):
        cfg.balancer_op_override("x", "grid", (1, 1))


@pytest.mark.parametrize("call, pattern", [
    (lambda: C.override_op_size("mm", (0, 2)), r"override_op_size\('mm'\): grid_shape.*positive.*\(0, 2\)"),
    (lambda: C.override_op_size("mm", (1,)), r"override_op_size\('mm'\): grid_shape"),
    (lambda: C.override_op_size("mm", ("1", 2)), r"override_op_size\('mm'\): grid_shape"),
    (lambda: C.override_op_size("mm", (True, 2)), r"override_op_size\('mm'\): grid_shape"),
    (lambda: C.override_t_stream_shape("mm", (2, 2)), r"override_t_stream_shape\('mm'\).*r or c must be 1"),
    (lambda: C.override_t_stream_dir("mm", "x"), r"override_t_stream_dir\('mm'\).*'x'.*rz"),
    (lambda: C.override_u_kt("mm", 0), r"override_u_kt\('mm'\): u_kt.*>= 1"),
    (lambda: C.override_input_buffer_multiplier("mm", -1, multiplier=2), r"operand index.*>= 0"),
    (lambda: C.override_op_placement("mm", start=(-1, 0)), r"override_op_placement\('mm'\): start.*non-negative"),
    (lambda: C.override_op_placement("mm", start=(1, 2, 3)), r"start"),
    (lambda: C.override_multi_op_fracture_factor("conv", 0), r"multi_op_fracture_factor.*>= 1"),
    (lambda: C.add_schedule_constraint(["only"]), r"at least 2"),
    (lambda: C.set_num_repeated_patterns("m", 0), r"num_patterns.*>= 1"),
])
def test_override_helper_validation(call, pattern):
    with pytest.raises(ValueError, match=pattern):
        call()
    assert g().balancer_op_overrides == {} and g().placer_op_overrides == []


def test_override_helper_type_errors():
    with pytest.raises(TypeError, match="override_op_placement.*transpose_op.*bool"):
        C.override_op_placement("mm", transpose_op=1)
    with pytest.raises(TypeError, match="set_epoch_break|place_on_new_epoch"):
        C.set_epoch_break(42)
    with pytest.raises(TypeError, match="dont_fuse"):
        g().dont_fuse([])
    with pytest.raises(TypeError, match="override_dram_parameters.*force_dram_parameters.*bool"):
        C.override_dram_parameters("mm", 1)


def test_epoch_and_chip_breaks():
    C.set_epoch_break("a")
    g().place_on_new_epoch(["b", "c"])
    C.set_chip_break("d")
    g().place_on_new_chip(("e",))
    assert g().op_names_to_epoch_break == [["a"], ["b", "c"]]
    assert g().op_names_to_chip_break == [["d"], ["e"]]


def test_override_op_placement_stores_and_breaks():
    C.override_op_placement("mm", start=[2, 4], transpose_op=True, chip_id=1, temporal_epoch_break=True)
    C.override_op_placement("sm", spatial_epoch_break=True)
    assert g().placer_op_overrides == [("mm", PlacerOpOverride((2, 4), True, 1, True)),
                                       ("sm", PlacerOpOverride(None, False, None, False))]
    assert g().op_names_to_epoch_break == [["mm"]]
    assert g().op_names_to_chip_break == [["sm"]]
    g().use_interactive_placer = False
    C.override_op_placement("gelu", spatial_epoch_break=True)
    assert g().op_names_to_epoch_break == [["mm"], ["gelu"]]


def test_fusing_lists():
    g().dont_fuse("a")
    g().dont_fuse(["b", "c"])
    g().manual_fuse(["d"])
    assert g().op_names_dont_fuse == ["a", "b", "c"]
    assert g().op_names_manual_fuse == ["d"]


def test_insert_nop_and_deprecated_alias():
    C.insert_nop("src", ["d1", "d2"], nop_count=2)
    nops = g().buffering_nops_to_insert
    assert list(nops) == [("src", "d1", None, None), ("src", "d2", None, None)]
    first, last = nops[("src", "d1", None, None)], nops[("src", "d2", None, None)]
    assert first.mergeable and last.mergeable and not first.request_merge and last.request_merge
    assert first.nop_count == 2 and first.user_defined and not first.is_fj_buffering
    with pytest.warns(DeprecationWarning, match="insert_nop"):
        C.insert_buffering_nop("a", "b")
    fj = g().buffering_nops_to_insert[("a", "b", None, None)]
    assert fj.is_fj_buffering and not fj.mergeable and fj.hoist_tms
    C._internal_insert_fj_buffering_nop("x", "y", hoist_tms=False)
    assert g().buffering_nops_to_insert[("x", "y", None, None)].hoist_tms is False


def test_insert_nop_without_warning():
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        C.insert_nop("a", "b")


def test_misc_helpers_store_what_legacy_stores():
    C.override_dram_queue_placement("q0", chip_id=1, channel=3)
    C.override_multi_op_fracture_factor("conv", 3)
    C.add_cpu_fallback_ops(["cumsum", "gather"])
    C.remove_cpu_fallback_ops("embedding")
    C.add_schedule_constraint(["a", "b"])
    C.set_num_repeated_patterns("encoder", 12)
    C.set_auto_transposing_placement(True)
    cfg = g()
    assert cfg.manual_dram_queue_placement == {"q0": DramQueueConfigOverride(1, 3)}
    assert cfg.conv_multi_op_fracture_factor_override == {"conv": 3}
    assert cfg.cpu_fallback_ops == {"cumsum", "gather"}
    assert cfg.scheduler_constraints == [["a", "b"]]
    assert cfg.tvm_module_to_num_patterns == {"encoder": 12}
    assert cfg.enable_auto_transposing_placement is True
    with pytest.raises(TypeError, match="enable_auto_transposing_placement"):
        C.set_auto_transposing_placement("yes")


def test_insert_fracture_group_normalises():
    nodes = [("op_a", -2, 2), "op_b", ("op_c", [-1, -2], [2, 4])]
    C.insert_fracture_group(nodes)
    assert g().fracture_groups == [(
        [("op_a", [-2], [2]), ("op_b", [], []), ("op_c", [-1, -2], [2, 4])], {"op_a": [], "op_b": [], "op_c": []})]
    assert nodes[1] == "op_b"  # the caller's list is not mutated
    C.insert_fracture_group(["x"], chip_ids={"x": []})
    assert g().fracture_groups[1] == ([("x", [], [])], {"x": []})
    with pytest.raises(ValueError, match="cannot be placed on chips of their own"):
        C.insert_fracture_group(["x"], chip_ids={"x": [2]})
    with pytest.raises(ValueError, match="one positive factor per dim"):
        C.insert_fracture_group([("y", [-1, -2], [2])])


def test_configure_mixed_precision():
    C.configure_mixed_precision(op_type="matmul", output_df="Bfp8_b", math_fidelity=MathFidelity.LoFi,
                                input_df={1: ("Bfp8_b", True)}, input_parameter_indices_to_optimize=[1, (2, 4)])
    C.configure_mixed_precision(name_regex=r"softmax_\d+", epoch_type="bwd", accumulate_df=DataFormat.Float32)
    rule, second = g().amp_properties
    assert rule == AMPNodeProperties(op_type="matmul", output_df=DataFormat.Bfp8_b, math_fidelity=MathFidelity.LoFi,
                                     input_df={1: (DataFormat.Bfp8_b, True)},
                                     input_parameter_indices_to_optimize=[1, (2, 4)])
    assert second.name_regex == r"softmax_\d+" and second.accumulate_df is DataFormat.Float32
    with pytest.raises(ValueError, match="at least one selector"):
        C.configure_mixed_precision(output_df="Bfp8_b")
    with pytest.raises(ValueError, match="epoch_type.*'fw'.*fwd, bwd, opt"):
        C.configure_mixed_precision(epoch_type="fw")
    with pytest.raises(ValueError, match="name_regex.*invalid regular expression"):
        C.configure_mixed_precision(name_regex="mm(")
    with pytest.raises(ValueError, match="output_df.*'Bfp9'"):
        C.configure_mixed_precision(op_type="matmul", output_df="Bfp9")
    assert len(g().amp_properties) == 2


def test_enable_amp_light():
    cfg = CompilerConfig()
    cfg.enable_amp_light(2)
    cfg.enable_amp_light(2)
    assert cfg.amp_properties == [AMPNodeProperties(op_type="matmul", math_fidelity=MathFidelity.HiFi2,
                                                    input_parameter_indices_to_optimize=[(1, 4), (2, 4)])]
    with pytest.raises(ValueError, match="level 7"):
        cfg.enable_amp_light(7)


# ---------------------------------------------------------------------------------------------------------------
# Op-name references
# ---------------------------------------------------------------------------------------------------------------
def test_referenced_op_names_order_and_kinds():
    C.override_op_size("mm", (1, 1))
    C.override_u_kt("mm", 2)
    C.override_op_placement("gelu", temporal_epoch_break=True)
    C.set_chip_break("add")
    g().dont_fuse("sm")
    g().manual_fuse("sm2")
    C.insert_nop("a", "b")
    C.add_schedule_constraint(["c", "d"])
    C.insert_fracture_group(["fr"])
    C.override_multi_op_fracture_factor("conv", 2)
    g().insert_queues.append(("p", "q", 1))
    refs = C.referenced_op_names(g())
    assert [(str(r), r.kind) for r in refs] == [
        ("mm", "override_op_size"), ("mm", "override_u_kt"), ("gelu", "override_op_placement"),
        ("gelu", "set_epoch_break"), ("add", "set_chip_break"), ("sm", "dont_fuse"), ("sm2", "manual_fuse"),
        ("a", "insert_nop"), ("b", "insert_nop"), ("c", "add_schedule_constraint"),
        ("d", "add_schedule_constraint"), ("fr", "insert_fracture_group"),
        ("conv", "override_multi_op_fracture_factor"), ("p", "insert_queues"), ("q", "insert_queues")]
    assert all(isinstance(r, str) for r in refs) and "mm" in refs
    assert refs[0].describe() == "override_op_size('mm')"


def test_referenced_op_names_deduplicates():
    C.set_epoch_break("a")
    C.set_epoch_break("a")
    assert [(str(r), r.kind) for r in C.referenced_op_names(g())] == [("a", "set_epoch_break")]


def test_check_override_names_suggests_close_names():
    C.override_op_size("matmul_9", (2, 2))
    C.set_epoch_break("softmax_1")
    graph_ops = ["matmul_8", "matmul_19", "softmax_1", "add_3"]
    with pytest.raises(OverrideError) as info:
        C.check_override_names(g(), graph_ops)
    msg = str(info.value)
    assert "override_op_size('matmul_9')" in msg
    assert "'matmul_8'" in msg and "'matmul_19'" in msg
    assert "softmax_1" not in msg
    assert isinstance(info.value, ValueError)
    assert [str(r) for r in info.value.unknown] == ["matmul_9"]


def test_check_override_names_no_close_match_and_success():
    C.insert_nop("zzz", "add_3")
    with pytest.raises(OverrideError, match=r"insert_nop\('zzz'\).*no similar op names"):
        C.check_override_names(g(), ["add_3", "matmul_8"])
    C.check_override_names(g(), ["zzz", "add_3"])


# ---------------------------------------------------------------------------------------------------------------
# Global config, env, copy, export
# ---------------------------------------------------------------------------------------------------------------
def test_reset_restores_defaults():
    C.set_configuration_options(enable_auto_fusing=False)
    C.override_op_size("mm", (2, 2))
    old = g()
    C.reset_configuration()
    assert g() is not old
    assert g() == CompilerConfig()
    C.override_u_kt("mm", 2)
    C._clear_global_compiler_config()
    assert g().balancer_op_overrides == {}


def test_set_global_config():
    cfg = CompilerConfig(enable_auto_fusing=False)
    C._set_global_compiler_config(cfg)
    C.override_op_size("mm", (1, 2))
    assert cfg.balancer_op_overrides["mm"].grid_shape == (1, 2)
    with pytest.raises(TypeError, match="CompilerConfig"):
        C._set_global_compiler_config({"enable_auto_fusing": False})


def test_env_overrides(monkeypatch: pytest.MonkeyPatch):
    env = {
        "PYBUDA_DEFAULT_DF": "Bfp8_b", "PYBUDA_DISABLE_OP_FUSING": "1", "PYBUDA_BALANCER_POLICY_TYPE": "NLP",
        "PYBUDA_COMPILE_DEPTH": "balancer_pass", "PYBUDA_AMP_LEVEL": "2",
        "PYBUDA_ENABLE_INPUT_QUEUES_ON_HOST": "0", "PYBUDA_ENABLE_OUTPUT_QUEUES_ON_HOST": "0",
        "PYBUDA_DEFAULT_DRAM_PARAMETERS": "1", "PYBUDA_DISABLE_STABLE_SOFTMAX": "1",
        "PYBUDA_PERFORMANCE_TRACE": "light", "PYBUDA_SCHEDULER_POLICY": "Topological",
        "PYBUDA_PRESTRIDE_DISABLE": "1", "PYBUDA_TTI_BACKEND_FORMAT": "1", "PYBUDA_ENABLE_AUTO_TRANSPOSE": "1",
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    cfg = CompilerConfig()
    assert cfg.default_df_override is DataFormat.Bfp8_b
    assert cfg.enable_auto_fusing is False
    assert cfg.balancer_policy == "NLP"
    assert cfg.compile_depth is CompileDepth.BALANCER_PASS
    assert cfg.amp_level == 2
    assert cfg.input_queues_on_host is False and cfg.output_queues_on_host is False
    assert cfg.default_dram_parameters is True
    assert cfg.enable_stable_softmax is False
    assert cfg.performance_trace is PerfTraceLevel.LIGHT
    assert cfg.scheduler_policy == "Topological"
    assert cfg.enable_conv_prestride is False
    assert cfg.tti_dump_format is TTIDumpFormat.BACKEND
    assert cfg.enable_auto_transposing_placement is True


def _declared_env() -> list[tuple[str, C.Env]]:
    return [(f.name, e) for f in dataclasses.fields(CompilerConfig) for e in f.metadata["option"].env]


@pytest.mark.parametrize("option, env", [(o, e) for o, e in _declared_env() if isinstance(e, (C.EnvBool, C.EnvFlag))],
                         ids=lambda v: getattr(v, "name", v))
def test_each_declared_boolean_variable_sets_its_option(monkeypatch: pytest.MonkeyPatch, option, env):
    default = getattr(CompilerConfig(), option)
    monkeypatch.setenv(env.name, "1")
    assert getattr(CompilerConfig(), option) == (env.value if isinstance(env, C.EnvFlag) else not env.negate)
    monkeypatch.setenv(env.name, "0")
    assert getattr(CompilerConfig(), option) == (default if isinstance(env, C.EnvFlag) else env.negate)


def test_the_env_table_is_derived_from_the_declarations():
    rows = C.env_table().splitlines()[2:]
    assert [re.match(r"\| `(\w+)` \| `(\w+)` \|", r).groups() for r in rows] == [
        (e.name, option) for option, e in _declared_env()]
    names = [e.name for _, e in _declared_env()]
    assert len(names) == len(set(names)) and all(n.startswith("PYBUDA_") for n in names)
    assert "the negated value (0/1)" in C.env_table() and "`CompileDepth.FULL` when set" in C.env_table()


def test_env_later_variable_of_an_option_wins(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PYBUDA_TTI_BACKEND_TILIZED_FORMAT", "1")
    assert CompilerConfig().tti_dump_format is TTIDumpFormat.BACKEND_TILIZED
    monkeypatch.setenv("PYBUDA_TTI_BACKEND_FORMAT", "1")
    assert CompilerConfig().tti_dump_format is TTIDumpFormat.BACKEND


def test_env_build_dir_is_the_default_of_backend_output_dir(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PYBUDA_BUILD_DIR", "/tmp/build")
    assert CompilerConfig().backend_output_dir == "/tmp/build"
    assert CompilerConfig(backend_output_dir="out").backend_output_dir == "out"


def test_env_wins_over_code_and_amp_level_only_fills_unset(monkeypatch: pytest.MonkeyPatch):
    cfg = CompilerConfig(amp_level=1)
    cfg.enable_stable_softmax = True
    monkeypatch.setenv("PYBUDA_DISABLE_STABLE_SOFTMAX", "1")
    monkeypatch.setenv("PYBUDA_AMP_LEVEL", "3")
    cfg.apply_env_config_overrides()
    assert cfg.enable_stable_softmax is False
    assert cfg.amp_level == 1


def test_env_zero_leaves_one_way_flags_alone(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PYBUDA_DISABLE_OP_FUSING", "0")
    monkeypatch.setenv("PYBUDA_COMPILE_DEPTH", "GENERATE_NETLIST")
    monkeypatch.setenv("PYBUDA_FORCE_FULL_COMPILE_DEPTH", "1")
    cfg = CompilerConfig()
    assert cfg.enable_auto_fusing is True
    assert cfg.compile_depth is CompileDepth.FULL


def test_env_amp_light_is_idempotent(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PYBUDA_AMP_LIGHT", "1")
    cfg = CompilerConfig()
    cfg.apply_env_config_overrides()
    assert cfg.amp_properties == [AMPNodeProperties(op_type="matmul", math_fidelity=MathFidelity.HiFi2,
                                                    input_parameter_indices_to_optimize=[(1, 8), (2, 8)])]


@pytest.mark.parametrize("name, value, pattern", [
    ("PYBUDA_DEFAULT_DF", "Fp99", r"PYBUDA_DEFAULT_DF='Fp99': default_df_override"),
    ("PYBUDA_COMPILE_DEPTH", "Deep!", r"PYBUDA_COMPILE_DEPTH='Deep!': compile_depth.*BALANCER_PASS"),
    ("PYBUDA_DISABLE_STABLE_SOFTMAX", "maybe", r"PYBUDA_DISABLE_STABLE_SOFTMAX='maybe': expected 0 or 1"),
    ("PYBUDA_AMP_LEVEL", "x", r"PYBUDA_AMP_LEVEL='x': expected an integer"),
    ("PYBUDA_BALANCER_POLICY_TYPE", "Fast", r"PYBUDA_BALANCER_POLICY_TYPE='Fast': balancer_policy"),
])
def test_bad_env_values_name_the_variable(monkeypatch: pytest.MonkeyPatch, name, value, pattern):
    monkeypatch.setenv(name, value)
    with pytest.raises(ValueError, match=pattern):
        CompilerConfig()


def test_copy_is_deep():
    cfg = CompilerConfig()
    cfg.balancer_op_override("mm", "input_buffer_multiplier", {0: 2})
    cfg.place_on_new_epoch(["a", "b"])
    dup = cfg.copy()
    assert dup == cfg and dup is not cfg
    dup.balancer_op_overrides["mm"].input_buffer_multiplier[1] = 4
    dup.balancer_op_overrides["mm"].u_kt = 3
    dup.op_names_to_epoch_break[0].append("c")
    dup.cpu_fallback_ops.add("cumsum")
    assert cfg.balancer_op_overrides["mm"] == OpOverride(input_buffer_multiplier={0: 2})
    assert cfg.op_names_to_epoch_break == [["a", "b"]]
    assert cfg.cpu_fallback_ops == {"embedding"}
    with pytest.raises(ValueError, match="backend_opt_level"):
        dup.backend_opt_level = 8  # the copy still validates


def test_to_dict_is_json_and_deterministic():
    def build() -> CompilerConfig:
        cfg = CompilerConfig(default_df_override="Bfp8_b", cpu_fallback_ops={"zeta", "alpha"})
        cfg.balancer_op_override("mm", "grid_shape", (2, 2))
        cfg.balancer_op_override("add", "input_buffer_multiplier", {1: 2})
        return cfg

    C.insert_nop("a", "b")
    d = build().to_dict()
    assert list(d) == [f.name for f in dataclasses.fields(CompilerConfig)]
    assert json.dumps(d) == json.dumps(build().to_dict())
    assert d["default_df_override"] == "Bfp8_b"
    assert d["compile_depth"] == "FULL"
    assert d["default_math_fidelity"] == "HiFi3"
    assert d["cpu_fallback_ops"] == ["alpha", "zeta"]
    assert list(d["balancer_op_overrides"]) == ["add", "mm"]
    assert d["balancer_op_overrides"]["mm"]["grid_shape"] == [2, 2]
    assert d["balancer_op_overrides"]["add"]["input_buffer_multiplier"] == {"1": 2}
    nops = g().to_dict()["buffering_nops_to_insert"]
    assert nops[0]["src"] == "a" and nops[0]["dest"] == "b"
    json.dumps(g().to_dict())


# ---------------------------------------------------------------------------------------------------------------
# docs/config.md stays in sync with the code
# ---------------------------------------------------------------------------------------------------------------
def _doc_rows() -> dict[str, list[str]]:
    rows = {}
    for line in DOCS.read_text().splitlines():
        m = re.match(r"^\| `([A-Za-z_][A-Za-z0-9_]*)(?:\(.*?\))?`[^|]*\|(.*)\|\s*$", line)
        if m:
            rows[m.group(1)] = [c.strip() for c in m.group(2).split("|")]
    return rows


def test_docs_cover_every_field_with_its_effective_column():
    """(The default column is the declarations' own rendering: `test_docs_tables_are_the_declarations`.)"""
    rows = _doc_rows()
    for f in dataclasses.fields(CompilerConfig):
        assert f.name in rows, f"docs/config.md has no row for field {f.name}"
        effective = rows[f.name][-1]
        assert effective.startswith("yes") == (f.name in C.EFFECTIVE_OPTIONS), f.name
        assert effective.startswith(("yes", "no: ")) or effective == "not yet", f.name


def test_an_option_that_cannot_apply_says_why_in_the_docs_and_the_warning():
    rows = _doc_rows()
    assert rows["compile_tvm_to_python"][-1].startswith("no: the legacy TVM path generated a PyBuda Python module")
    assert rows["backend_opt_level"][-1].startswith("no: there is no hardware runtime here")
    assert not [name for name, row in rows.items() if row[-1] == "not yet"]     # each acts, or says why it cannot
    with pytest.warns(C.IneffectiveOptionWarning, match="'backend_opt_level'.*does not apply in this compiler "
                                                      r"\(there is no hardware runtime here"):
        C.set_configuration_options(backend_opt_level=2)


def test_docs_cover_every_override_helper():
    rows = _doc_rows()
    for name in C.HELPERS:
        assert name in rows, f"docs/config.md has no row for helper {name}"
        effective = rows[name][-1]
        assert effective.startswith("yes") == (name in C.EFFECTIVE_OPTIONS), name


@pytest.mark.parametrize("table, command", [("fields", C.fields_table), ("env", C.env_table)])
def test_docs_tables_are_the_declarations(table, command):
    text = DOCS.read_text()
    start = f"<!-- {table} table: generated by `pybuda config {table}` -->\n"
    generated = text[text.index(start) + len(start):text.index(f"<!-- end of {table} table -->")]
    assert generated == command(), \
        f"docs/config.md's {table} table is stale: paste the output of `pybuda config {table}`"


@pytest.mark.parametrize("table", ["fields", "env"])
def test_pybuda_config_prints_the_tables(table, capsys):
    from pybuda.tools.cli import main
    assert main(["config", table]) == 0
    assert capsys.readouterr().out == {"fields": C.fields_table, "env": C.env_table}[table]()


def test_the_fields_table_shows_each_declaration():
    rows = {r.split(" | ")[0][3:-1]: r for r in C.fields_table().splitlines()[2:]}
    assert list(rows) == [f.name for f in dataclasses.fields(CompilerConfig)]
    assert "legal values: `default`, `CP-SAT`, `Greedy`, `NLP`, `SingleOpPerEpoch`" in rows["balancer_policy"]
    assert "refused when the config is made" in rows["balancer_policy"] and "`Ribbon`" in rows["balancer_policy"]
    assert "legal values: 0..4" in rows["backend_opt_level"]
    assert "`set_configuration_options` keyword `accumulate_df`" in rows["default_accumulate_df"]
    assert "environment: `PYBUDA_COMPILE_DEPTH`, `PYBUDA_FORCE_FULL_COMPILE_DEPTH`" in rows["compile_depth"]
    assert rows["enable_recompute"].endswith("an inference compile warns |")
    assert "yes: every attribute; `temporal_epoch_break` works through" in rows["placer_op_overrides"]
