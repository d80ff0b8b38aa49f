"""Compiler configuration: the `CompilerConfig` dataclass, the global config and the legacy override helpers.

Every option of the legacy PyBuda level 1/2/3 tables is accepted, validated and stored. Only the options in
`EFFECTIVE_OPTIONS` change what the compiler does in this version; see docs/config.md. Setting another one (a
non-default field at compile, `set_configuration_options`, an override helper) warns once per option name and
process with an `IneffectiveOptionWarning`.
"""
from __future__ import annotations

import copy as _copy
import dataclasses
import difflib
import enum
import functools
import inspect
import os
import re
import types
import typing
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from .dataformat import DataFormat, MathFidelity
from .errors import UserInputError

__all__ = [
    "CompileDepth", "PerfTraceLevel", "DeviceMode", "DRAMPlacementAlgorithm", "TTIDumpFormat",
    "OpOverride", "PlacerOpOverride", "AMPNodeProperties", "NopInsertionInstruction", "DramQueueConfigOverride",
    "CompilerConfig", "OpNameRef", "OverrideError", "EFFECTIVE_OPTIONS", "IneffectiveOptionWarning",
    "ineffective_options", "warn_ineffective", "reset_ineffective_warnings",
    "BALANCER_POLICIES", "SCHEDULER_POLICIES", "GRAPH_SOLVER_SELF_CUT_TYPES", "CHIP_PLACEMENT_POLICIES",
    "SUPPORTED_DEVICE_CONFIGS",
    "reset_configuration", "set_configuration_options", "get_harvesting_mask",
    "set_epoch_break", "set_chip_break", "override_dram_queue_placement", "override_dram_parameters",
    "override_op_size", "override_t_stream_dir", "override_t_stream_shape", "override_u_kt",
    "override_input_buffer_multiplier", "internal_override_output_buffer_multiplier",
    "override_multi_op_fracture_factor", "add_cpu_fallback_ops", "remove_cpu_fallback_ops", "insert_fracture_group",
    "override_op_placement", "insert_nop", "insert_buffering_nop", "add_schedule_constraint",
    "set_num_repeated_patterns", "set_auto_transposing_placement", "configure_mixed_precision",
    "referenced_op_names", "check_override_names",
]


# Enums
class CompileDepth(enum.IntEnum):
    """The legacy compile stages in execution order. `compile_depth` takes one of them (each maps onto the stage of
    `pybuda.stages` it ends at) or a stage name, and compilation stops after that stage."""

    INIT_COMPILE = 0
    GENERATE_INITIAL_GRAPH = 1
    POST_INITIAL_GRAPH_PASS = 2
    CONSTEVAL_GRAPH = 3
    POST_PATTERN_MATCHER = 4
    OPTIMIZED_GRAPH = 5
    AUTOGRAD = 6
    POST_AUTOGRAD_PASS = 7
    PRE_LOWERING_PASS = 8
    BUDA_GRAPH_PRE_PLACER = 9
    BALANCER_PASS = 10
    PRE_NETLIST_PASS = 11
    GENERATE_NETLIST = 12
    BACKEND_GOLDEN_VERIFY = 13
    FULL = 14


class PerfTraceLevel(enum.Enum):
    """Backend performance-trace level."""

    NONE = 0
    LIGHT = 1
    VERBOSE = 2


class DeviceMode(enum.Enum):
    """Compile and run, compile only (to a TTI image), or run a precompiled TTI image."""

    CompileAndRun = "CompileAndRun"
    CompileOnly = "CompileOnly"
    RunOnly = "RunOnly"


class DRAMPlacementAlgorithm(enum.Enum):
    """How DRAM queues are assigned to DRAM channels."""

    ROUND_ROBIN = "ROUND_ROBIN"
    ROUND_ROBIN_FLIP_FLOP = "ROUND_ROBIN_FLIP_FLOP"
    GREATEST_CAPACITY = "GREATEST_CAPACITY"
    CLOSEST = "CLOSEST"


class TTIDumpFormat(enum.Enum):
    """Serialisation of tensor data inside a TTI image."""

    DEFAULT = "DEFAULT"
    BACKEND = "BACKEND"
    BACKEND_TILIZED = "BACKEND_TILIZED"

    def extension(self) -> str:
        """File extension of tensors written in this format."""
        return {"DEFAULT": "pkl", "BACKEND": "bin", "BACKEND_TILIZED": "tbin"}[self.value]


BALANCER_POLICIES: tuple[str, ...] = (
    "default", "CP-SAT", "Greedy", "NLP", "Ribbon", "CNN", "MaximizeTMinimizeGrid", "MinimizeGrid", "Random",
    "SingleOpPerEpoch")
SCHEDULER_POLICIES: tuple[str, ...] = ("Topological", "ModuleInputsBFS", "LongestPath")
GRAPH_SOLVER_SELF_CUT_TYPES: tuple[str, ...] = (
    "None", "ConsumerOperandDataEdgesFirst", "ProducerUserDataEdgesFirst", "FastCut")
CHIP_PLACEMENT_POLICIES: tuple[str, ...] = ("MMIO_LAST", "SNAKE")
SUPPORTED_DEVICE_CONFIGS: tuple[str, ...] = ("wh_n150", "wh_n300", "galaxy", "gs_e150", "gs_e300")
T_STREAM_DIRS: tuple[str, ...] = ("n", "r", "c", "rz", "cz")
EPOCH_TYPES: tuple[str, ...] = ("fwd", "bwd", "opt")
HARVESTABLE_ROWS: tuple[int, ...] = (1, 2, 3, 4, 5, 7, 8, 9, 10, 11)


# Override records
@dataclass
class OpOverride:
    """Per-op balancer override (stored in `CompilerConfig.balancer_op_overrides[op_name]`)."""

    grid_shape: tuple[int, int] | None = None
    force_dram_parameters: bool | None = None
    t_stream_dir: str | None = None
    t_stream_shape: tuple[int, int] | None = None
    u_kt: int | None = None
    input_buffer_multiplier: dict[int, int] = field(default_factory=dict)
    output_buffer_multiplier: int | None = None


@dataclass
class PlacerOpOverride:
    """Per-op placer override (stored with its op name in `CompilerConfig.placer_op_overrides`)."""

    start: tuple[int, int] | None = None
    transpose_op: bool = False
    chip_id: int | None = None
    temporal_epoch_break: bool = False


@dataclass
class AMPNodeProperties:
    """One mixed-precision rule: selectors (op_type, epoch_type, name_regex, is_gradient_op) and what to set."""

    op_type: str | None = None
    epoch_type: str | None = None
    output_df: DataFormat | None = None
    intermediate_df: DataFormat | None = None
    accumulate_df: DataFormat | None = None
    math_fidelity: MathFidelity | None = None
    name_regex: str | None = None
    input_df: dict[int, tuple[DataFormat, bool]] | DataFormat | None = None
    is_gradient_op: bool | None = None
    input_parameter_indices_to_optimize: list[int | tuple[int, int]] | None = None

    def __post_init__(self):
        if self.epoch_type is not None and self.epoch_type not in EPOCH_TYPES:
            raise ValueError(f"AMPNodeProperties: epoch_type: invalid value {self.epoch_type!r}; legal values: "
                             f"{', '.join(EPOCH_TYPES)}")


@dataclass
class NopInsertionInstruction:
    """A request to insert `nop_count` NOPs on the edge src -> dest."""

    src: str
    dest: str
    hoist_tms: bool = True
    nop_count: int = 1
    input_id: int | None = None
    fork_id: int | None = None
    user_defined: bool = True
    mergeable: bool = False
    daisy_chain: bool = False
    request_merge: bool = False
    is_fj_buffering: bool = False

    def unique_id(self) -> tuple[str, str, int | None, int | None]:
        """Key of this instruction in `buffering_nops_to_insert`."""
        return (self.src, self.dest, self.input_id, self.fork_id)


@dataclass
class DramQueueConfigOverride:
    """Manual placement of one DRAM queue."""

    chip_id: int | None = None
    channel: int | None = None


# Value checking
def _close(name: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    return difflib.get_close_matches(name, list(candidates), n=n, cutoff=0.5)


def _did_you_mean(name: str, candidates: Iterable[str]) -> str:
    matches = _close(name, candidates)
    return f"; did you mean {', '.join(repr(m) for m in matches)}?" if matches else ""


def _parse_enum(where: str, cls: type[enum.Enum], value: Any) -> enum.Enum:
    """Accept a member of `cls` or its name (case-insensitive; DataFormat/MathFidelity names are exact)."""
    if isinstance(value, cls):
        return value
    legal = ", ".join(m.name for m in cls)
    if not isinstance(value, str):
        raise TypeError(f"{where}: expected {cls.__name__} or its name, got {type(value).__name__} {value!r}; "
                        f"legal values: {legal}")
    if cls in (DataFormat, MathFidelity):
        try:
            return cls.parse(value)  # type: ignore[attr-defined]
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
    for member in cls:
        if member.name.lower() == value.lower():
            return member
    raise ValueError(f"{where}: invalid value {value!r}; legal values: {legal}")


def _expect(where: str, value: Any, kind: str, ok: bool) -> None:
    if not ok:
        raise TypeError(f"{where}: expected {kind}, got {type(value).__name__} {value!r}")


def _check(where: str, value: Any, hint: Any) -> Any:
    """Check `value` against a type hint and return it normalised (containers copied, enum names parsed)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _check(where, value, inner)
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _parse_enum(where, hint, value)
    if hint is bool:
        _expect(where, value, "bool", isinstance(value, bool))
        return value
    if hint is int:
        _expect(where, value, "int", isinstance(value, int) and not isinstance(value, bool))
        return value
    if hint is float:
        _expect(where, value, "float", isinstance(value, (int, float)) and not isinstance(value, bool))
        return float(value)
    if hint is str:
        _expect(where, value, "str", isinstance(value, str))
        return value
    if origin is list:
        _expect(where, value, "list", isinstance(value, (list, tuple)))
        return [_check(f"{where}[{i}]", v, args[0]) for i, v in enumerate(value)]
    if origin is set:
        _expect(where, value, "set", isinstance(value, (set, frozenset, list, tuple)))
        return {_check(f"{where} item", v, args[0]) for v in value}
    if origin is dict:
        _expect(where, value, "dict", isinstance(value, dict))
        return {_check(f"{where} key", k, args[0]): _check(f"{where}[{k!r}]", v, args[1]) for k, v in value.items()}
    if origin is tuple:
        _expect(where, value, f"tuple of {len(args)}", isinstance(value, (tuple, list)) and len(value) == len(args))
        return tuple(_check(f"{where}[{i}]", v, a) for i, (v, a) in enumerate(zip(value, args)))
    if dataclasses.is_dataclass(hint):
        _expect(where, value, hint.__name__, isinstance(value, hint))
        return value
    raise AssertionError(f"unsupported type hint {hint!r} for {where}")


def _int_pair(where: str, value: Any, *, minimum: int) -> tuple[int, int]:
    ok = (isinstance(value, (tuple, list)) and len(value) == 2
          and all(isinstance(v, int) and not isinstance(v, bool) and v >= minimum for v in value))
    if not ok:
        kind = "positive" if minimum == 1 else "non-negative"
        raise ValueError(f"{where}: expected two {kind} ints (row, column), got {value!r}")
    return (value[0], value[1])


def _int_at_least(where: str, value: Any, minimum: int) -> int:
    _expect(where, value, "int", isinstance(value, int) and not isinstance(value, bool))
    if value < minimum:
        raise ValueError(f"{where}: expected an int >= {minimum}, got {value!r}")
    return value


def _optional_int_at_least(where: str, value: Any, minimum: int) -> int | None:
    return None if value is None else _int_at_least(where, value, minimum)


def _bool(where: str, value: Any) -> bool:
    _expect(where, value, "bool", isinstance(value, bool))
    return value


def _str(where: str, value: Any) -> str:
    _expect(where, value, "str", isinstance(value, str))
    return value


def _str_list(where: str, value: Any) -> list[str]:
    """A str becomes [str]; a non-empty list/tuple of str is copied."""
    if isinstance(value, str):
        return [value]
    ok = isinstance(value, (list, tuple)) and len(value) > 0 and all(isinstance(v, str) for v in value)
    if not ok:
        raise TypeError(f"{where}: expected an op name (str) or a non-empty list of op names, got {value!r}")
    return list(value)


def _t_stream_shape(where: str, value: Any) -> tuple[int, int]:
    shape = _int_pair(where, value, minimum=1)
    if 1 not in shape:
        raise ValueError(f"{where}: streaming is along one dimension only, so r or c must be 1; got {value!r}")
    return shape


def _t_stream_dir(where: str, value: Any) -> str:
    direction = _str(where, value).lower()
    if direction not in T_STREAM_DIRS:
        raise ValueError(f"{where}: invalid direction {value!r}; legal values: {', '.join(T_STREAM_DIRS)}")
    return direction


def _buffer_multipliers(where: str, value: Any) -> dict[int, int]:
    _expect(where, value, "dict {operand_index: multiplier}", isinstance(value, dict))
    return {_int_at_least(f"{where} operand index", k, 0): _int_at_least(f"{where}[{k!r}]", v, 1)
            for k, v in value.items()}


# OpOverride attribute -> (helper that sets it, value checker). Used for validation, messages and reports.
_OP_OVERRIDE_ATTRS: dict[str, tuple[str, Callable[[str, Any], Any]]] = {
    "grid_shape": ("override_op_size", lambda w, v: _int_pair(w, v, minimum=1)),
    "force_dram_parameters": ("override_dram_parameters", _bool),
    "t_stream_dir": ("override_t_stream_dir", _t_stream_dir),
    "t_stream_shape": ("override_t_stream_shape", _t_stream_shape),
    "u_kt": ("override_u_kt", lambda w, v: _int_at_least(w, v, 1)),
    "input_buffer_multiplier": ("override_input_buffer_multiplier", _buffer_multipliers),
    "output_buffer_multiplier": ("internal_override_output_buffer_multiplier", lambda w, v: _int_at_least(w, v, 1)),
}

_CHOICES: dict[str, tuple[str, ...]] = {
    "balancer_policy": BALANCER_POLICIES,
    "scheduler_policy": SCHEDULER_POLICIES,
    "graph_solver_self_cut_type": GRAPH_SOLVER_SELF_CUT_TYPES,
    "chip_placement_policy": CHIP_PLACEMENT_POLICIES,
    "device_config": SUPPORTED_DEVICE_CONFIGS,
}
_RANGES: dict[str, tuple[int, int | None]] = {
    "backend_opt_level": (0, 4),
    "tm_cpu_fallback_max_depth": (0, None),
    "harvesting_mask": (0, None),
    "amp_level": (0, 3),
    "match_subgraph_patterns": (1, None),
}


# Options with no effect yet: a warning once per option name and process
class IneffectiveOptionWarning(UserWarning):
    """An option was set that is accepted and stored but has no effect yet in this version (docs/config.md)."""


_WARNED: set[str] = set()


def ineffective_options(config: CompilerConfig) -> list[str]:
    """The options of `config` that differ from their defaults but have no effect yet: field names, and
    `<field>.<attribute>` for per-op override attributes the compiler ignores (`balancer_op_overrides.u_kt`)."""
    names = [f.name for f in dataclasses.fields(config)
             if f.name not in EFFECTIVE_OPTIONS and getattr(config, f.name) != _field_default(f)]
    for name, attrs in (("balancer_op_overrides", _set_attributes(config.balancer_op_overrides.values())),
                        ("placer_op_overrides", _set_attributes(o for _, o in config.placer_op_overrides))):
        names += [f"{name}.{a}" for a in attrs if a not in _EFFECTIVE_ATTRIBUTES[name]]
    return names


def _field_default(f: dataclasses.Field) -> Any:
    return f.default_factory() if f.default is dataclasses.MISSING else f.default


def _set_attributes(records: Iterable[Any]) -> list[str]:
    """Attribute names set to a non-default value in any of the override records, in declaration order."""
    records = list(records)
    return [f.name for f in dataclasses.fields(OpOverride if not records else records[0])
            if any(getattr(r, f.name) != _field_default(f) for r in records)]


def warn_ineffective(names: Iterable[str], how: str) -> None:
    """IneffectiveOptionWarning for each of `names` not yet warned about in this process; `how` says how it
    was set ("set_configuration_options", "override_u_kt", "the config given to compile", ...)."""
    for name in names:
        if name not in _WARNED:
            _WARNED.add(name)
            warnings.warn(f"option {name!r} ({how}) has no effect yet in this version: it is accepted and stored, "
                          "but the compiler ignores it (docs/config.md lists the effective options)",
                          IneffectiveOptionWarning, stacklevel=3)


def reset_ineffective_warnings() -> None:
    """Warn again about options already warned about in this process (tests)."""
    _WARNED.clear()


def _warns_if_ineffective(helper: Callable) -> Callable:
    """Decorate a helper that edits the global config (or, as a method, its own config): it warns about the
    options with no effect yet that the call set."""
    @functools.wraps(helper)
    def wrapper(*args, **kwargs):
        if _HELPERS_RUNNING:   # called by another helper: the outermost one warns, under its own name
            return helper(*args, **kwargs)
        cfg = args[0] if args and isinstance(args[0], CompilerConfig) else _get_global_compiler_config()
        before = set(ineffective_options(cfg))
        _HELPERS_RUNNING.append(helper.__name__)
        try:
            result = helper(*args, **kwargs)
        finally:
            _HELPERS_RUNNING.pop()
        warn_ineffective([n for n in ineffective_options(cfg) if n not in before], helper.__name__)
        return result
    return wrapper


_HELPERS_RUNNING: list[str] = []


# CompilerConfig
def _default_output_dir() -> str:
    return os.environ.get("PYBUDA_BUILD_DIR", "pybuda_out")


@dataclass
class CompilerConfig:
    """All compiler options (legacy names and defaults). Values are validated on construction and assignment."""

    # --- flow -----------------------------------------------------------------------------------------------
    enable_training: bool = False
    enable_recompute: bool = False
    compensated_parameter_updates: bool = True   # not legacy: training keeps a residual per parameter (Kahan)
    optimizer_on_host: bool = False   # not legacy: the optimizer runs on the host on float32 master parameters
    match_subgraph_patterns: int | None = None
    compile_depth: CompileDepth | str = CompileDepth.FULL
    verify: bool = False
    enable_consteval: bool = True
    compile_subgraphs: bool = False
    enable_op_level_comparision: bool = False
    # --- balancer / scheduler / placer ----------------------------------------------------------------------
    balancer_policy: str = "default"
    scheduler_policy: str = "ModuleInputsBFS"
    enable_t_streaming: bool = True
    manual_t_streaming: bool = False
    enable_auto_fusing: bool = True
    graph_solver_self_cut_type: str = "FastCut"
    use_interactive_placer: bool = True
    enable_enumerate_u_kt: bool = True
    enable_single_buffer_fallback: bool = False
    enable_auto_transposing_placement: bool = False
    chip_placement_policy: str = "MMIO_LAST"
    dram_placement_algorithm: DRAMPlacementAlgorithm = DRAMPlacementAlgorithm.ROUND_ROBIN
    enable_forked_dram_inputs: bool = False
    enable_broadcast_splitting: bool = False
    enable_link_past_cache_ios: bool = False
    enable_pt2_fx_graph_link: bool = False
    # --- CPU fallback / frontend ----------------------------------------------------------------------------
    enable_tvm_cpu_fallback: bool = True
    cpu_fallback_ops: set[str] = field(default_factory=lambda: {"embedding"})
    enable_tm_cpu_fallback: bool = False
    tm_cpu_fallback_max_depth: int = 10
    enable_tvm_dropout: bool = False
    enable_tvm_unsupported_ops: bool = False
    enable_tvm_constant_prop: bool = False
    tvm_constnat_prop_mask: set[str] = field(default_factory=set)
    convert_framework_params_to_tvm: bool = True
    enable_xla_jax_convert: bool = False
    enable_tvm_jax_freeze_large_model: bool = True
    framework_model_output_names: list[str] = field(default_factory=list)
    compile_tvm_to_python: bool = True
    retain_tvm_python_files: bool = False
    tvm_graph_store_path: str = ""
    tvm_graph_load_path: str = ""
    tvm_module_to_num_patterns: dict[str, int] = field(default_factory=dict)
    # --- lowering / numerics --------------------------------------------------------------------------------
    enable_conv_prestride: bool = True
    enable_device_tilize: bool = False
    max_pool_add_sub_surround: bool = False
    max_pool_add_sub_surround_value: float = 1.0
    enable_stable_softmax: bool = True
    default_df_override: DataFormat | None = None
    default_accumulate_df: DataFormat | None = None
    default_math_fidelity: MathFidelity = MathFidelity.HiFi3
    amp_level: int | None = None
    amp_properties: list[AMPNodeProperties] = field(default_factory=list)
    default_dram_parameters: bool | None = None
    paddings: dict[str, bool] = field(default_factory=dict)
    # --- per-op overrides -----------------------------------------------------------------------------------
    balancer_op_overrides: dict[str, OpOverride] = field(default_factory=dict)
    placer_op_overrides: list[tuple[str, PlacerOpOverride]] = field(default_factory=list)
    op_names_to_epoch_break: list[list[str]] = field(default_factory=list)
    op_names_to_chip_break: list[list[str]] = field(default_factory=list)
    op_names_dont_fuse: list[str] = field(default_factory=list)
    op_names_manual_fuse: list[str] = field(default_factory=list)
    scheduler_constraints: list[list[str]] = field(default_factory=list)
    buffering_nops_to_insert: dict[tuple[str, str, int | None, int | None], NopInsertionInstruction] = field(
        default_factory=dict)
    insert_queues: list[tuple[str, str, int]] = field(default_factory=list)
    fracture_groups: list[tuple[list[tuple[str, list[int], list[int]]], dict[str, list[int]]]] = field(
        default_factory=list)
    conv_multi_op_fracture_factor_override: dict[str, int] = field(default_factory=dict)
    manual_dram_queue_placement: dict[str, DramQueueConfigOverride] = field(default_factory=dict)
    loopback_outputs: dict[str, int] = field(default_factory=dict)
    op_intermediates_to_save: list[str] = field(default_factory=list)
    # --- device / backend / runtime -------------------------------------------------------------------------
    device_mode: DeviceMode = DeviceMode.CompileAndRun
    device_config: str | None = None
    harvesting_mask: int = 0
    performance_trace: PerfTraceLevel = PerfTraceLevel.NONE
    backend_opt_level: int = 4
    backend_output_dir: str = field(default_factory=_default_output_dir)
    backend_device_descriptor_path: str = ""
    backend_cluster_descriptor_path: str = ""
    backend_runtime_params_path: str = ""
    backend_runtime_args: str = ""
    store_backend_db_to_yaml: bool = False
    input_queues_on_host: bool = True
    output_queues_on_host: bool = True
    tti_dump_format: TTIDumpFormat = TTIDumpFormat.DEFAULT

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, _validate_field(name, value))

    def __post_init__(self) -> None:
        self.apply_env_config_overrides()

    # --- env ------------------------------------------------------------------------------------------------
    def apply_env_config_overrides(self) -> None:
        """Apply the documented PYBUDA_* environment variables on top of the current values (env wins)."""
        for env, attr, negate in _ENV_BOOL_MIRRORS:
            flag = _env_bool(env)
            if flag is not None:
                _set_from_env(self, env, attr, flag != negate)
        for env, attr, value in _ENV_ONE_WAY_FLAGS:
            if _env_bool(env):
                _set_from_env(self, env, attr, value)
        for env, attr in _ENV_STRINGS:
            raw = os.environ.get(env, "")
            if raw != "":
                _set_from_env(self, env, attr, raw)
        if self.amp_level is None and os.environ.get("PYBUDA_AMP_LEVEL", "") != "":
            _set_from_env(self, "PYBUDA_AMP_LEVEL", "amp_level", _env_int("PYBUDA_AMP_LEVEL"))
        if os.environ.get("PYBUDA_AMP_LIGHT", "") != "":
            self.enable_amp_light(_env_int("PYBUDA_AMP_LIGHT"))
        if _env_bool("PYBUDA_FORCE_FULL_COMPILE_DEPTH"):
            self.compile_depth = CompileDepth.FULL
        if _env_bool("PYBUDA_TTI_BACKEND_FORMAT"):
            self.tti_dump_format = TTIDumpFormat.BACKEND
        elif _env_bool("PYBUDA_TTI_BACKEND_TILIZED_FORMAT"):
            self.tti_dump_format = TTIDumpFormat.BACKEND_TILIZED

    def enable_amp_light(self, level: int = 1) -> None:
        """Add the AMP-light rule for matmul weights/bias: 1 = 8-bit mantissa HiFi2, 2 = 4-bit HiFi2, 3 = 4-bit LoFi."""
        configs = {1: (8, MathFidelity.HiFi2), 2: (4, MathFidelity.HiFi2), 3: (4, MathFidelity.LoFi)}
        if level == 0:
            return
        if level not in configs:
            raise ValueError(f"enable_amp_light: invalid level {level!r}; legal values: 0, 1, 2, 3")
        bits, fidelity = configs[level]
        rule = AMPNodeProperties(op_type="matmul", math_fidelity=fidelity,
                                 input_parameter_indices_to_optimize=[(1, bits), (2, bits)])
        if rule not in self.amp_properties:
            self.amp_properties.append(rule)

    # --- override methods -----------------------------------------------------------------------------------
    def place_on_new_epoch(self, op_names: str | list[str]) -> None:
        """Start a new epoch at whichever of `op_names` is scheduled first."""
        self.op_names_to_epoch_break.append(_str_list("place_on_new_epoch", op_names))

    @_warns_if_ineffective
    def place_on_new_chip(self, op_names: str | list[str]) -> None:
        """Start placing on the next chip at whichever of `op_names` is scheduled first."""
        self.op_names_to_chip_break.append(_str_list("place_on_new_chip", op_names))

    @_warns_if_ineffective
    def place_queue_to_chip_dram(self, dram_queue: str, *, chip_id: int | None, channel: int | None) -> None:
        """Pin a DRAM queue to a chip and/or DRAM channel."""
        where = f"place_queue_to_chip_dram({dram_queue!r})"
        _str(where, dram_queue)
        self.manual_dram_queue_placement[dram_queue] = DramQueueConfigOverride(
            _optional_int_at_least(f"{where}: chip_id", chip_id, 0),
            _optional_int_at_least(f"{where}: channel", channel, 0))

    @_warns_if_ineffective
    def dont_fuse(self, op_names: str | list[str]) -> None:
        """Exclude the ops from the fusion pass."""
        self.op_names_dont_fuse.extend(_str_list("dont_fuse", op_names))

    @_warns_if_ineffective
    def manual_fuse(self, op_names: str | list[str]) -> None:
        """Only the listed ops (over all calls) may take part in fusion."""
        self.op_names_manual_fuse.extend(_str_list("manual_fuse", op_names))

    @_warns_if_ineffective
    def balancer_op_override(self, op_name: str, attribute: str, value: Any) -> None:
        """Set one `OpOverride` attribute of `op_name`; dict values are merged into the existing dict."""
        _str("balancer_op_override: op_name", op_name)
        if attribute not in _OP_OVERRIDE_ATTRS:
            raise ValueError(f"balancer_op_override: unknown attribute {attribute!r}; legal values: "
                             f"{', '.join(_OP_OVERRIDE_ATTRS)}")
        helper, checker = _OP_OVERRIDE_ATTRS[attribute]
        value = checker(f"{helper}({op_name!r}): {attribute}", value)
        override = self.balancer_op_overrides.get(op_name, OpOverride())
        if isinstance(value, dict):
            value = {**getattr(override, attribute), **value}
        setattr(override, attribute, value)
        self.balancer_op_overrides[op_name] = override

    def save_intermediates(self) -> bool:
        """True when any op output is to be spilled to the intermediates queue."""
        return len(self.op_intermediates_to_save) > 0

    # --- export ---------------------------------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict of every field in declaration order (enums by name, sets sorted, dict keys sorted)."""
        out: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if f.name == "buffering_nops_to_insert":
                out[f.name] = [_jsonable(v) for v in value.values()]
            else:
                out[f.name] = _jsonable(value)
        return out

    def copy(self) -> "CompilerConfig":
        """Deep copy (no state shared with this config)."""
        return _copy.deepcopy(self)


_FIELD_HINTS: dict[str, Any] = typing.get_type_hints(CompilerConfig)


def _validate_field(name: str, value: Any) -> Any:
    """Type-check, normalise and range/choice-check one CompilerConfig field value."""
    if name not in _FIELD_HINTS:
        raise AttributeError(f"CompilerConfig has no option {name!r}{_did_you_mean(name, _FIELD_HINTS)}")
    if name == "compile_depth":
        return _compile_depth(value)
    value = _check(name, value, _FIELD_HINTS[name])
    if value is None:
        return value
    if name in _CHOICES and value not in _CHOICES[name]:
        raise ValueError(f"{name}: invalid value {value!r}; legal values: {', '.join(_CHOICES[name])}")
    if name in _RANGES:
        lo, hi = _RANGES[name]
        if value < lo or (hi is not None and value > hi):
            bound = f"{lo}..{hi}" if hi is not None else f">= {lo}"
            raise ValueError(f"{name}: value {value!r} out of range; legal values: {bound}")
    return value


_STAGE_NAME = re.compile(r"[a-z][a-z0-9_]*")


def _compile_depth(value: Any) -> CompileDepth | str:
    """A CompileDepth (or its name, case-insensitive), else a stage name (lower-case identifier; compile checks
    that its stage list has a stage of that name)."""
    if isinstance(value, str) and not any(m.name.lower() == value.lower() for m in CompileDepth):
        if not _STAGE_NAME.fullmatch(value):
            raise ValueError(f"compile_depth: invalid value {value!r}; legal values: a stage name (lower-case, "
                             f"e.g. 'lower') or a CompileDepth: {', '.join(m.name for m in CompileDepth)}")
        return value
    return _parse_enum("compile_depth", CompileDepth, value)


def _jsonable(value: Any) -> Any:
    if isinstance(value, enum.Enum):
        return value.name
    if dataclasses.is_dataclass(value):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): _jsonable(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, (set, frozenset)):
        return sorted(_jsonable(v) for v in value)
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


# Environment variables
# (variable, field, negate): 1/true sets field to (not negate), 0/false to negate.
_ENV_BOOL_MIRRORS: tuple[tuple[str, str, bool], ...] = (
    ("PYBUDA_ENABLE_INPUT_QUEUES_ON_HOST", "input_queues_on_host", False),
    ("PYBUDA_ENABLE_OUTPUT_QUEUES_ON_HOST", "output_queues_on_host", False),
    ("PYBUDA_DEFAULT_DRAM_PARAMETERS", "default_dram_parameters", False),
    ("PYBUDA_PRESTRIDE_DISABLE", "enable_conv_prestride", True),
    ("PYBUDA_DISABLE_STABLE_SOFTMAX", "enable_stable_softmax", True),
    ("PYBUDA_CONVERT_PARAMS_TO_TVM", "convert_framework_params_to_tvm", False),
    ("PYBUDA_DISABLE_ENUMERATE_U_KT", "enable_enumerate_u_kt", True),
    ("PYBUDA_ENABLE_SINGLE_BUFFER_FALLBACK", "enable_single_buffer_fallback", False),
    ("PYBUDA_ENABLE_DEVICE_TILIZE", "enable_device_tilize", False),
    ("PYBUDA_ENABLE_FORKED_DRAM_INPUTS", "enable_forked_dram_inputs", False),
)
# (variable, field, value): when the variable is true the field is set to value; 0/false leaves it alone.
_ENV_ONE_WAY_FLAGS: tuple[tuple[str, str, bool], ...] = (
    ("PYBUDA_DISABLE_OP_FUSING", "enable_auto_fusing", False),
    ("PYBUDA_ENABLE_T_STREAMING", "enable_t_streaming", True),
    ("PYBUDA_DISABLE_INTERACTIVE_PLACER", "use_interactive_placer", False),
    ("PYBUDA_ENABLE_AUTO_TRANSPOSE", "enable_auto_transposing_placement", True),
)
# (variable, field): a non-empty value is assigned (and validated) as a string.
_ENV_STRINGS: tuple[tuple[str, str], ...] = (
    ("PYBUDA_DEFAULT_DF", "default_df_override"),
    ("PYBUDA_PERFORMANCE_TRACE", "performance_trace"),
    ("PYBUDA_COMPILE_DEPTH", "compile_depth"),
    ("PYBUDA_BALANCER_POLICY_TYPE", "balancer_policy"),
    ("PYBUDA_SCHEDULER_POLICY", "scheduler_policy"),
    ("PYBUDA_GRAPHSOLVER_SELF_CUT_TYPE", "graph_solver_self_cut_type"),
    ("PYBUDA_OVERRIDE_DEVICE_YAML", "backend_device_descriptor_path"),
    ("PYBUDA_OVERRIDE_CLUSTER_YAML", "backend_cluster_descriptor_path"),
)
_TRUE = ("1", "true", "yes", "on", "")
_FALSE = ("0", "false", "no", "off")


def _env_bool(name: str) -> bool | None:
    """None if unset; an empty value counts as set (true)."""
    if name not in os.environ:
        return None
    raw = os.environ[name].strip().lower()
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise ValueError(f"{name}={os.environ[name]!r}: expected 0 or 1")


def _env_int(name: str) -> int:
    try:
        return int(os.environ[name])
    except ValueError:
        raise ValueError(f"{name}={os.environ[name]!r}: expected an integer") from None


def _set_from_env(cfg: CompilerConfig, env: str, attr: str, value: Any) -> None:
    try:
        setattr(cfg, attr, value)
    except (TypeError, ValueError) as e:
        raise type(e)(f"{env}={os.environ.get(env)!r}: {e}") from None


# Global config
_g_compiler_config: CompilerConfig = CompilerConfig()


def _get_global_compiler_config() -> CompilerConfig:
    """The global config that all module-level helpers change in place."""
    return _g_compiler_config


def _set_global_compiler_config(cfg: CompilerConfig) -> None:
    """Replace the global config."""
    global _g_compiler_config
    if not isinstance(cfg, CompilerConfig):
        raise TypeError(f"_set_global_compiler_config: expected CompilerConfig, got {type(cfg).__name__}")
    _g_compiler_config = cfg


def _clear_global_compiler_config() -> None:
    """Reset the global config to defaults (plus environment overrides)."""
    _set_global_compiler_config(CompilerConfig())


def reset_configuration() -> None:
    """Public alias of `_clear_global_compiler_config`."""
    _clear_global_compiler_config()


def get_harvesting_mask(row_indices: list[int]) -> int:
    """Bitmask with bit r set for each harvested row r (only rows 1-5 and 7-11 can be harvested)."""
    _expect("harvested_rows", row_indices, "list of row indices", isinstance(row_indices, (list, tuple)))
    mask = 0
    for r in row_indices:
        if isinstance(r, bool) or r not in HARVESTABLE_ROWS:
            raise ValueError(f"harvested_rows: row {r!r} cannot be harvested; legal values: "
                             f"{', '.join(map(str, HARVESTABLE_ROWS))}")
        mask |= 1 << r
    return mask


_KWARG_RENAMES: dict[str, str] = {
    "accumulate_df": "default_accumulate_df",
    "math_fidelity": "default_math_fidelity",
}


def set_configuration_options(
        enable_recompute: bool | None = None,
        balancer_policy: str | None = None,
        place_on_one_row: bool | None = None,
        enable_t_streaming: bool | None = None,
        manual_t_streaming: bool | None = None,
        enable_consteval: bool | None = None,
        default_df_override: DataFormat | str | None = None,
        accumulate_df: DataFormat | str | None = None,
        math_fidelity: MathFidelity | str | None = None,
        performance_trace: PerfTraceLevel | str | None = None,
        backend_opt_level: int | None = None,
        backend_output_dir: str | None = None,
        backend_device_descriptor_path: str | None = None,
        backend_cluster_descriptor_path: str | None = None,
        backend_runtime_params_path: str | None = None,
        backend_runtime_args: str | None = None,
        enable_auto_fusing: bool | None = None,
        enable_conv_prestride: bool | None = None,
        enable_stable_softmax: bool | None = None,
        amp_level: int | None = None,
        harvested_rows: list[int] | None = None,
        store_backend_db_to_yaml: bool | None = None,
        input_queues_on_host: bool | None = None,
        output_queues_on_host: bool | None = None,
        enable_auto_transposing_placement: bool | None = None,
        use_interactive_placer: bool | None = None,
        op_intermediates_to_save: list[str] | None = None,
        enable_enumerate_u_kt: bool | None = None,
        enable_device_tilize: bool | None = None,
        dram_placement_algorithm: DRAMPlacementAlgorithm | str | None = None,
        chip_placement_policy: str | None = None,
        enable_forked_dram_inputs: bool | None = None,
        device_config: str | None = None,
        default_math_fidelity: MathFidelity | str | None = None,
        default_accumulate_df: DataFormat | str | None = None,
        **unknown: Any) -> None:
    """Set global options; only non-None arguments are written, and nothing is written if any value is invalid.

    Renames: accumulate_df -> default_accumulate_df, math_fidelity -> default_math_fidelity,
    harvested_rows (list of row indices) -> harvesting_mask. enable_auto_transposing_placement is OR-ed into
    the current value. place_on_one_row is accepted and ignored. Options with no effect yet warn
    (`IneffectiveOptionWarning`).
    """
    given = {k: v for k, v in locals().items() if k != "unknown" and v is not None}
    if unknown:
        name = next(iter(unknown))
        raise TypeError(f"set_configuration_options() got an unexpected keyword argument {name!r}"
                        f"{_did_you_mean(name, _SET_OPTIONS_PARAMS)}")
    if given.pop("place_on_one_row", None) is not None:
        warn_ineffective(["place_on_one_row"], "set_configuration_options")
    updates: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key, value in given.items():
        name = _KWARG_RENAMES.get(key, key)
        if key == "harvested_rows":
            name, value = "harvesting_mask", get_harvesting_mask(value)
        value = _validate_field(name, value)
        if name in updates and updates[name] != value:
            raise ValueError(f"set_configuration_options: {sources[name]}={given[sources[name]]!r} conflicts with "
                             f"{key}={given[key]!r}")
        updates[name], sources[name] = value, key
    cfg = _get_global_compiler_config()
    if "enable_auto_transposing_placement" in updates:
        updates["enable_auto_transposing_placement"] |= cfg.enable_auto_transposing_placement
    for name, value in updates.items():
        object.__setattr__(cfg, name, value)
    warn_ineffective([n for n in ineffective_options(cfg) if n in updates], "set_configuration_options")


_SET_OPTIONS_PARAMS: tuple[str, ...] = tuple(
    p.name for p in inspect.signature(set_configuration_options).parameters.values()
    if p.kind is not inspect.Parameter.VAR_KEYWORD)


# Override helpers (all write to the global config)
def set_epoch_break(op_names: str | list[str]) -> None:
    """Start a new epoch at whichever of `op_names` is scheduled first."""
    _get_global_compiler_config().place_on_new_epoch(op_names)


@_warns_if_ineffective
def set_chip_break(op_names: str | list[str]) -> None:
    """Start placing on the next chip at whichever of `op_names` is scheduled first."""
    _get_global_compiler_config().place_on_new_chip(op_names)


@_warns_if_ineffective
def override_dram_queue_placement(dram_queue: str, *, chip_id: int | None = None,
                                  channel: int | None = None) -> None:
    """Pin a DRAM queue to a chip and/or DRAM channel."""
    _get_global_compiler_config().place_queue_to_chip_dram(dram_queue, chip_id=chip_id, channel=channel)


@_warns_if_ineffective
def override_dram_parameters(op_name: str, force_dram_parameters: bool) -> None:
    """Keep (True) or allow prologue-promotion of (False) the op's parameters in DRAM."""
    _get_global_compiler_config().balancer_op_override(op_name, "force_dram_parameters", force_dram_parameters)


def override_op_size(op_name: str, grid_size: tuple[int, int]) -> None:
    """Force the op's grid shape to (rows, columns)."""
    _get_global_compiler_config().balancer_op_override(op_name, "grid_shape", grid_size)


@_warns_if_ineffective
def override_t_stream_dir(op_name: str, direction: str | None) -> None:
    """Force the streaming direction: 'n' (or None, no streaming), 'r', 'c', 'rz' or 'cz' (case-insensitive)."""
    _get_global_compiler_config().balancer_op_override(op_name, "t_stream_dir", "n" if direction is None else direction)


@_warns_if_ineffective
def override_t_stream_shape(op_name: str, shape: tuple[int, int]) -> None:
    """Force the streaming factors (r, c); one of them must be 1, (1, 1) disables streaming."""
    _get_global_compiler_config().balancer_op_override(op_name, "t_stream_shape", shape)


@_warns_if_ineffective
def override_u_kt(op_name: str, u_kt: int) -> None:
    """Force the matmul inner-dimension block size u_kt."""
    _get_global_compiler_config().balancer_op_override(op_name, "u_kt", u_kt)


@_warns_if_ineffective
def override_input_buffer_multiplier(op_name: str, operand_index: int, *, multiplier: int) -> None:
    """Set the input buffer multiplier of one operand (merged with earlier operands' settings)."""
    _get_global_compiler_config().balancer_op_override(op_name, "input_buffer_multiplier", {operand_index: multiplier})


@_warns_if_ineffective
def internal_override_output_buffer_multiplier(op_name: str, *, multiplier: int) -> None:
    """Set the output buffer multiplier (internal; may hang the legacy backend)."""
    warnings.warn("internal_override_output_buffer_multiplier is an internal API and may result in hangs",
                  stacklevel=2)
    _get_global_compiler_config().balancer_op_override(op_name, "output_buffer_multiplier", multiplier)


@_warns_if_ineffective
def override_multi_op_fracture_factor(op_name: str, multi_op_fracture_factor: int) -> None:
    """Split a convolution into `multi_op_fracture_factor` ops."""
    where = f"override_multi_op_fracture_factor({op_name!r})"
    _str(where, op_name)
    _int_at_least(f"{where}: multi_op_fracture_factor", multi_op_fracture_factor, 1)
    _get_global_compiler_config().conv_multi_op_fracture_factor_override[op_name] = multi_op_fracture_factor


def add_cpu_fallback_ops(op_types: str | list[str]) -> None:
    """Add op types to `cpu_fallback_ops`."""
    _get_global_compiler_config().cpu_fallback_ops.update(_str_list("add_cpu_fallback_ops", op_types))


def remove_cpu_fallback_ops(op_types: str | list[str]) -> None:
    """Remove op types from `cpu_fallback_ops` (missing ones are ignored)."""
    _get_global_compiler_config().cpu_fallback_ops.difference_update(_str_list("remove_cpu_fallback_ops", op_types))


@_warns_if_ineffective
def insert_fracture_group(nodes: list[str | tuple[str, int | list[int], int | list[int]]],
                          chip_ids: list[int] | dict[str, list[int]] | None = None) -> None:
    """Fracture (shard) the named nodes along dims by factors; a bare name leaves dims/factors to inference.

    Stored as (nodes normalised to (name, [dims], [factors]), {name: chip_ids}).
    """
    where = "insert_fracture_group"
    _expect(where, nodes, "non-empty list of nodes", isinstance(nodes, (list, tuple)) and len(nodes) > 0)
    normalised: list[tuple[str, list[int], list[int]]] = []
    for node in nodes:
        if isinstance(node, str):
            node = (node, [], [])
        _expect(where, node, "name or (name, dims, factors)", isinstance(node, (tuple, list)) and len(node) == 3)
        name, dims, factors = node
        _str(f"{where}: node name", name)
        dims = [dims] if isinstance(dims, int) else dims
        factors = [factors] if isinstance(factors, int) else factors
        dims = _check(f"{where}({name!r}): dims", dims, list[int])
        factors = _check(f"{where}({name!r}): factors", factors, list[int])
        if len(dims) != len(factors) or any(f < 1 for f in factors):
            raise ValueError(f"{where}({name!r}): need one positive factor per dim, got dims={dims} "
                             f"factors={factors}")
        normalised.append((name, dims, factors))
    if chip_ids is None or isinstance(chip_ids, (list, tuple)):
        ids = _check(f"{where}: chip_ids", list(chip_ids or []), list[int])
        per_node = {name: list(ids) for name, _, _ in normalised}
    else:
        per_node = _check(f"{where}: chip_ids", chip_ids, dict[str, list[int]])
    _get_global_compiler_config().fracture_groups.append((normalised, per_node))


@_warns_if_ineffective
def override_op_placement(op_name: str, *, start: tuple[int, int] | None = None, transpose_op: bool = False,
                          chip_id: int | None = None, spatial_epoch_break: bool = False,
                          temporal_epoch_break: bool = False) -> None:
    """Pin the op's start core (row, column), transpose it, pin its chip, or break the epoch before it.

    temporal_epoch_break also records an epoch break; spatial_epoch_break records a chip break (an epoch break
    when the interactive placer is off).
    """
    where = f"override_op_placement({op_name!r})"
    _str(where, op_name)
    if start is not None:
        start = _int_pair(f"{where}: start", start, minimum=0)
    _bool(f"{where}: transpose_op", transpose_op)
    _optional_int_at_least(f"{where}: chip_id", chip_id, 0)
    _bool(f"{where}: spatial_epoch_break", spatial_epoch_break)
    _bool(f"{where}: temporal_epoch_break", temporal_epoch_break)
    cfg = _get_global_compiler_config()
    cfg.placer_op_overrides.append((op_name, PlacerOpOverride(start, transpose_op, chip_id, temporal_epoch_break)))
    if temporal_epoch_break:
        cfg.place_on_new_epoch(op_name)
    if spatial_epoch_break:
        if cfg.use_interactive_placer:
            cfg.place_on_new_chip(op_name)
        else:
            cfg.place_on_new_epoch(op_name)


def _insert_nops(where: str, src_op: str, dest_ops: str | list[str], hoist_tms: bool, nop_count: int,
                 daisy_chain: bool, is_fj_buffering: bool) -> None:
    _str(f"{where}: src_op", src_op)
    dests = _str_list(f"{where}: dest_ops", dest_ops)
    _bool(f"{where}: hoist_tms", hoist_tms)
    _int_at_least(f"{where}: nop_count", nop_count, 1)
    _bool(f"{where}: daisy_chain", daisy_chain)
    nops = _get_global_compiler_config().buffering_nops_to_insert
    for i, dest in enumerate(dests):
        instr = NopInsertionInstruction(src=src_op, dest=dest, hoist_tms=hoist_tms, nop_count=nop_count,
                                        user_defined=True, mergeable=len(dests) > 1, daisy_chain=daisy_chain,
                                        request_merge=(i == len(dests) - 1), is_fj_buffering=is_fj_buffering)
        nops[instr.unique_id()] = instr


@_warns_if_ineffective
def insert_nop(src_op: str, dest_ops: str | list[str], *, hoist_tms: bool = True, nop_count: int = 1,
               daisy_chain: bool = False) -> None:
    """Insert NOP(s) between `src_op` and each of `dest_ops` (one shared NOP unless daisy_chain)."""
    _insert_nops("insert_nop", src_op, dest_ops, hoist_tms, nop_count, daisy_chain, is_fj_buffering=False)


@_warns_if_ineffective
def _internal_insert_fj_buffering_nop(src_op: str, dest_ops: str | list[str], *, hoist_tms: bool = True,
                                      nop_count: int = 1, daisy_chain: bool = False) -> None:
    """Like `insert_nop`, marked as fork-join buffering."""
    _insert_nops("_internal_insert_fj_buffering_nop", src_op, dest_ops, hoist_tms, nop_count, daisy_chain,
                 is_fj_buffering=True)


@_warns_if_ineffective
def insert_buffering_nop(src_op: str, dest_ops: str | list[str], *, hoist_tms: bool = True, nop_count: int = 1,
                         daisy_chain: bool = False) -> None:
    """Deprecated alias of `_internal_insert_fj_buffering_nop`; use `insert_nop`."""
    warnings.warn("insert_buffering_nop is deprecated; use insert_nop", DeprecationWarning, stacklevel=2)
    _insert_nops("insert_buffering_nop", src_op, dest_ops, hoist_tms, nop_count, daisy_chain, is_fj_buffering=True)


@_warns_if_ineffective
def add_schedule_constraint(partial_ordering: list[str]) -> None:
    """Require the scheduler to place partial_ordering[i] before partial_ordering[i + 1]."""
    ordering = _check("add_schedule_constraint: partial_ordering", partial_ordering, list[str])
    if len(ordering) < 2:
        raise ValueError(f"add_schedule_constraint: partial_ordering needs at least 2 op names, got {ordering!r}")
    _get_global_compiler_config().scheduler_constraints.append(ordering)


@_warns_if_ineffective
def set_num_repeated_patterns(module_name: str, num_patterns: int) -> None:
    """Record how many repeated patterns the frontend should look for in a module."""
    _str("set_num_repeated_patterns: module_name", module_name)
    _int_at_least(f"set_num_repeated_patterns({module_name!r}): num_patterns", num_patterns, 1)
    _get_global_compiler_config().tvm_module_to_num_patterns[module_name] = num_patterns


@_warns_if_ineffective
def set_auto_transposing_placement(is_enabled: bool) -> None:
    """Turn automatic op transposition at placement on or off."""
    _get_global_compiler_config().enable_auto_transposing_placement = is_enabled


def _input_df_entry(where: str, value: Any) -> tuple[DataFormat, bool]:
    _expect(where, value, "(DataFormat, bool)", isinstance(value, (tuple, list)) and len(value) == 2)
    return (_parse_enum(where, DataFormat, value[0]), _bool(where, value[1]))


def configure_mixed_precision(
        *,
        op_type: str | None = None,
        epoch_type: str | None = None,
        output_df: DataFormat | str | None = None,
        intermediate_df: DataFormat | str | None = None,
        accumulate_df: DataFormat | str | None = None,
        math_fidelity: MathFidelity | str | None = None,
        name_regex: str | None = None,
        input_df: dict[int, tuple[DataFormat | str, bool]] | DataFormat | str | None = None,
        is_gradient_op: bool | None = None,
        input_parameter_indices_to_optimize: list[int | tuple[int, int]] | None = None) -> None:
    """Append a mixed-precision rule; needs at least one selector (op_type, epoch_type, name_regex, is_gradient_op)."""
    where = "configure_mixed_precision"
    if op_type is None and epoch_type is None and name_regex is None and is_gradient_op is None:
        raise ValueError(f"{where}: give at least one selector: op_type, epoch_type, name_regex or is_gradient_op")
    if op_type is not None:
        _str(f"{where}: op_type", op_type)
    if epoch_type is not None and epoch_type not in EPOCH_TYPES:
        raise ValueError(f"{where}: epoch_type: invalid value {epoch_type!r}; legal values: {', '.join(EPOCH_TYPES)}")
    if name_regex is not None:
        _str(f"{where}: name_regex", name_regex)
        try:
            re.compile(name_regex)
        except re.error as e:
            raise ValueError(f"{where}: name_regex: invalid regular expression {name_regex!r}: {e}") from None
    if is_gradient_op is not None:
        _bool(f"{where}: is_gradient_op", is_gradient_op)
    dfs = {k: None if v is None else _parse_enum(f"{where}: {k}", DataFormat, v)
           for k, v in (("output_df", output_df), ("intermediate_df", intermediate_df),
                        ("accumulate_df", accumulate_df))}
    fidelity = None if math_fidelity is None else _parse_enum(f"{where}: math_fidelity", MathFidelity, math_fidelity)
    if isinstance(input_df, dict):
        input_df = {_int_at_least(f"{where}: input_df operand index", k, 0):
                    _input_df_entry(f"{where}: input_df[{k}]", v) for k, v in input_df.items()}
    elif input_df is not None:
        input_df = _parse_enum(f"{where}: input_df", DataFormat, input_df)
    indices = None
    if input_parameter_indices_to_optimize is not None:
        _expect(f"{where}: input_parameter_indices_to_optimize", input_parameter_indices_to_optimize,
                "list", isinstance(input_parameter_indices_to_optimize, (list, tuple)))
        indices = [_int_at_least(f"{where}: input_parameter_indices_to_optimize", v, 0) if isinstance(v, int)
                   else _int_pair(f"{where}: input_parameter_indices_to_optimize", v, minimum=0)
                   for v in input_parameter_indices_to_optimize]
    _get_global_compiler_config().amp_properties.append(AMPNodeProperties(
        op_type=op_type, epoch_type=epoch_type, math_fidelity=fidelity, name_regex=name_regex, input_df=input_df,
        is_gradient_op=is_gradient_op, input_parameter_indices_to_optimize=indices, **dfs))


# Effective options and op-name checking
EFFECTIVE_OPTIONS: frozenset[str] = frozenset({
    "compile_depth", "default_df_override", "default_accumulate_df", "default_math_fidelity",
    "enable_stable_softmax", "enable_consteval", "verify",
    "balancer_op_overrides", "override_op_size",                          # grid_shape, t_stream_dir/shape
    "placer_op_overrides", "override_op_placement",                       # start and transpose_op
    "op_names_to_epoch_break", "set_epoch_break", "place_on_new_epoch",  # also temporal_epoch_break
    "op_names_to_chip_break", "set_chip_break", "place_on_new_chip",     # multi-chip devices (n300)
    "input_queues_on_host", "output_queues_on_host",
    "enable_training", "enable_recompute", "compensated_parameter_updates",  # with compile(loss=, optimizer=)
    "optimizer_on_host",
    "enable_tvm_cpu_fallback", "cpu_fallback_ops", "add_cpu_fallback_ops", "remove_cpu_fallback_ops",
    "amp_level",                                                          # 1 and 2
    "amp_properties", "configure_mixed_precision",                        # every selector
    "tvm_graph_store_path", "tvm_graph_load_path",
    "device_mode",                                                        # TTI via compile(..., tti_path=)
    "backend_output_dir",                                                 # compile's default output_dir
    "harvesting_mask",                                                    # the placer's grid loses those rows
    "enable_auto_fusing", "op_names_dont_fuse", "dont_fuse", "op_names_manual_fuse", "manual_fuse",
    "enable_t_streaming", "manual_t_streaming", "override_t_stream_dir", "override_t_stream_shape",
    "balancer_policy",                                                    # default/CP-SAT, Greedy/NLP, SingleOpPerEpoch
    "dram_placement_algorithm", "manual_dram_queue_placement",           # channel pins (a queue's own chip)
    "override_dram_queue_placement", "place_queue_to_chip_dram",
    "override_u_kt", "override_input_buffer_multiplier", "override_dram_parameters",
    "scheduler_constraints", "add_schedule_constraint",
    "buffering_nops_to_insert", "insert_nop", "insert_buffering_nop", "_internal_insert_fj_buffering_nop",
    "insert_queues", "internal_override_output_buffer_multiplier",
    "conv_multi_op_fracture_factor_override", "override_multi_op_fracture_factor",  # im2col convs, by kernel rows
})
# the attributes of per-op override records that take effect (the others are named "<field>.<attribute>")
_EFFECTIVE_ATTRIBUTES: dict[str, frozenset[str]] = {
    "balancer_op_overrides": frozenset({"grid_shape", "t_stream_dir", "t_stream_shape", "u_kt",
                                        "input_buffer_multiplier", "force_dram_parameters",
                                        "output_buffer_multiplier"}),
    "placer_op_overrides": frozenset({"start", "transpose_op", "temporal_epoch_break"}),
}


class OpNameRef(str):
    """An op name (compares equal to the plain str) that remembers which override named it (`kind`)."""

    kind: str

    def __new__(cls, name: str, kind: str) -> "OpNameRef":
        obj = super().__new__(cls, name)
        obj.kind = kind
        return obj

    def __getnewargs__(self) -> tuple[str, str]:  # type: ignore[override]
        return (str(self), self.kind)

    def __repr__(self) -> str:
        return f"OpNameRef({str(self)!r}, kind={self.kind!r})"

    def describe(self) -> str:
        """E.g. "override_op_size('matmul_9')"."""
        return f"{self.kind}({str(self)!r})"


class OverrideError(UserInputError):
    """An override names ops that are not in the graph; `unknown` holds the offending references."""

    def __init__(self, message: str, unknown: list[OpNameRef]):
        super().__init__(message)
        self.unknown = unknown


def referenced_op_names(config: CompilerConfig) -> list[OpNameRef]:
    """Every op name an override refers to, in a fixed order, each tagged with the override kind (`.kind`)."""
    refs: list[tuple[str, str]] = []
    for op, override in config.balancer_op_overrides.items():
        kinds = [helper for attr, (helper, _) in _OP_OVERRIDE_ATTRS.items()
                 if getattr(override, attr) not in (None, {})]
        refs.extend((op, kind) for kind in kinds or ["balancer_op_override"])
    refs.extend((op, "override_op_placement") for op, _ in config.placer_op_overrides)
    refs.extend((op, "set_epoch_break") for entry in config.op_names_to_epoch_break for op in entry)
    refs.extend((op, "set_chip_break") for entry in config.op_names_to_chip_break for op in entry)
    refs.extend((op, "dont_fuse") for op in config.op_names_dont_fuse)
    refs.extend((op, "manual_fuse") for op in config.op_names_manual_fuse)
    for nop in config.buffering_nops_to_insert.values():
        kind = "_internal_insert_fj_buffering_nop" if nop.is_fj_buffering else "insert_nop"
        refs.extend([(nop.src, kind), (nop.dest, kind)])
    refs.extend((op, "add_schedule_constraint") for ordering in config.scheduler_constraints for op in ordering)
    for nodes, chip_ids in config.fracture_groups:
        refs.extend((name, "insert_fracture_group") for name, _, _ in nodes)
        refs.extend((name, "insert_fracture_group") for name in chip_ids)
    refs.extend((op, "override_multi_op_fracture_factor") for op in config.conv_multi_op_fracture_factor_override)
    for producer, consumer, _ in config.insert_queues:
        refs.extend([(producer, "insert_queues"), (consumer, "insert_queues")])
    return [OpNameRef(name, kind) for name, kind in dict.fromkeys(refs)]


# overrides that name an op of the framework graph (before decomposition), not a device op
FRAMEWORK_OP_OVERRIDES = frozenset({"override_multi_op_fracture_factor"})


def check_override_names(config: CompilerConfig, op_names: list[str], framework: bool = False) -> None:
    """Raise OverrideError listing each override that names an op not in `op_names`, with the closest names;
    `framework`: the overrides naming framework ops (FRAMEWORK_OP_OVERRIDES), else the others."""
    known = set(op_names)
    unknown = [ref for ref in referenced_op_names(config)
               if (ref.kind in FRAMEWORK_OP_OVERRIDES) == framework and ref not in known]
    if not unknown:
        return
    lines = []
    for ref in unknown:
        close = _close(str(ref), sorted(known))
        hint = f"closest: {', '.join(repr(c) for c in close)}" if close else "no similar op names"
        lines.append(f"  {ref.describe()}: no op named {str(ref)!r} in the graph; {hint}")
    raise OverrideError(f"{len(unknown)} override(s) name unknown ops:\n" + "\n".join(lines), unknown)
