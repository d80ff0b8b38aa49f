"""Compiler configuration: the `CompilerConfig` dataclass, the global config and the legacy override helpers.

Each option is declared once, on its `CompilerConfig` field, with `option(default, doc=..., ...)`: its default, its
documentation, whether it takes effect in this version (with its caveat, or only in a training compile), its legal
values (`choices`, `bounds`, legacy values it refuses), its environment variables and its `set_configuration_options`
keyword alias. Generic code reads the declarations: validation, `apply_env_config_overrides`, the keyword aliases of
`set_configuration_options`, `EFFECTIVE_OPTIONS`, the warnings, and the tables of docs/config.md (`fields_table`,
`env_table`; `pybuda config fields|env`). The attributes of the per-op override records are declared with
`attribute(...)`, and each override helper with `@helper(<the options it stores>)`: a helper takes effect when what
it stores does.

Setting an option with no effect yet (a non-default field at compile, `set_configuration_options`, an override
helper) warns once per option name and process with an `IneffectiveOptionWarning`.
"""
from __future__ import annotations

import abc
import copy as _copy
import dataclasses
import difflib
import enum
import functools
import inspect
import json
import os
import re
import types
import typing
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

from .dataformat import DataFormat, MathFidelity
from .errors import InternalError, UserInputError, UserTypeError
from .query import NodePredicate, pattern_matches, select

__all__ = [
    "CompileDepth", "PerfTraceLevel", "DeviceMode", "DRAMPlacementAlgorithm", "TTIDumpFormat",
    "OpOverride", "PlacerOpOverride", "AMPNodeProperties", "NopInsertionInstruction", "DramQueueConfigOverride",
    "CompilerConfig", "Option", "UnknownOptionError", "OpNameRef", "OverrideError",
    "EFFECTIVE_OPTIONS", "HELPERS", "IneffectiveOptionWarning",
    "ineffective_options", "warn_ineffective", "reset_ineffective_warnings", "inference_compile_warnings",
    "fields_table", "env_table",
    "BALANCER_POLICIES", "BALANCER_POLICY_ALIASES", "SCHEDULER_POLICIES", "GRAPH_SOLVER_SELF_CUT_TYPES",
    "CHIP_PLACEMENT_POLICIES", "SUPPORTED_DEVICE_CONFIGS", "DEVICE_OF_CONFIG",
    "reset_configuration", "set_configuration_options", "get_harvesting_mask",
    "set_epoch_break", "set_chip_break", "override_dram_queue_placement", "override_dram_parameters",
    "override_op_size", "override_t_stream_dir", "override_t_stream_shape", "override_u_kt",
    "override_input_buffer_multiplier", "internal_override_output_buffer_multiplier",
    "override_multi_op_fracture_factor", "add_cpu_fallback_ops", "remove_cpu_fallback_ops", "insert_fracture_group",
    "override_op_placement", "insert_nop", "insert_buffering_nop", "add_schedule_constraint",
    "set_num_repeated_patterns", "set_auto_transposing_placement", "configure_mixed_precision",
    "referenced_op_names", "check_override_names", "resolve_predicates",
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


# the legal balancer_policy values (pybuda.balancer.policy runs them); the aliases name the policy they run
BALANCER_POLICIES: tuple[str, ...] = ("default", "CP-SAT", "Greedy", "NLP", "SingleOpPerEpoch")
BALANCER_POLICY_ALIASES: dict[str, str] = {"default": "CP-SAT", "NLP": "Greedy"}
SCHEDULER_POLICIES: tuple[str, ...] = ("Topological", "ModuleInputsBFS", "LongestPath")
GRAPH_SOLVER_SELF_CUT_TYPES: tuple[str, ...] = (
    "None", "ConsumerOperandDataEdgesFirst", "ProducerUserDataEdgesFirst", "FastCut")
CHIP_PLACEMENT_POLICIES: tuple[str, ...] = ("MMIO_LAST", "SNAKE")
SUPPORTED_DEVICE_CONFIGS: tuple[str, ...] = ("wh_n150", "wh_n300", "galaxy", "gs_e150", "gs_e300")
# the device (`pybuda/device/devices.yaml`) each legacy board config names; galaxy and gs_e300 are not modelled
DEVICE_OF_CONFIG: dict[str, str] = {"wh_n150": "n150", "wh_n300": "n300", "gs_e150": "e150"}
T_STREAM_DIRS: tuple[str, ...] = ("n", "r", "c", "rz", "cz")
EPOCH_TYPES: tuple[str, ...] = ("fwd", "bwd", "opt")
HARVESTABLE_ROWS: tuple[int, ...] = (1, 2, 3, 4, 5, 7, 8, 9, 10, 11)


# Value checking
def _close(name: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """Up to `n` of `candidates` that look like `name`."""
    return difflib.get_close_matches(name, list(candidates), n=n, cutoff=0.5)


def _did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """"; did you mean 'x'?" for the candidates close to `name`, else ""."""
    matches = _close(name, candidates)
    return f"; did you mean {', '.join(repr(m) for m in matches)}?" if matches else ""


def _parse_enum(where: str, cls: type[enum.Enum], value: Any) -> enum.Enum:
    """Accept a member of `cls` or its name (case-insensitive; DataFormat/MathFidelity names are exact)."""
    if isinstance(value, cls):
        return value
    legal = ", ".join(m.name for m in cls)
    if not isinstance(value, str):
        raise UserTypeError(f"{where}: expected {cls.__name__} or its name, got {type(value).__name__} {value!r}; "
                            f"legal values: {legal}")
    if cls in (DataFormat, MathFidelity):
        try:
            return cls.parse(value)  # type: ignore[attr-defined]
        except ValueError as e:
            raise UserInputError(f"{where}: {e}") from None
    for member in cls:
        if member.name.lower() == value.lower():
            return member
    raise UserInputError(f"{where}: invalid value {value!r}; legal values: {legal}")


def _expect(where: str, value: Any, kind: str, ok: bool) -> None:
    """UserTypeError naming `where`, the expected `kind` and the value unless `ok`."""
    if not ok:
        raise UserTypeError(f"{where}: expected {kind}, got {type(value).__name__} {value!r}")


def _check(where: str, value: Any, hint: Any) -> Any:
    """Check `value` against a type hint and return it normalised (containers copied, enum names parsed)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        inner = [a for a in args if a is not type(None)]
        for alternative in inner[:-1]:
            try:
                return _check(where, value, alternative)
            except (UserTypeError, UserInputError):
                continue
        return _check(where, value, inner[-1])
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
    raise InternalError(f"config: unsupported type hint {hint!r} for {where}")


def _int_pair(where: str, value: Any, *, minimum: int) -> tuple[int, int]:
    """Two ints >= `minimum` (row, column)."""
    ok = (isinstance(value, (tuple, list)) and len(value) == 2
          and all(isinstance(v, int) and not isinstance(v, bool) and v >= minimum for v in value))
    if not ok:
        kind = "positive" if minimum == 1 else "non-negative"
        raise UserInputError(f"{where}: expected two {kind} ints (row, column), got {value!r}")
    return (value[0], value[1])


def _positive_pair(where: str, value: Any) -> tuple[int, int]:
    """Two positive ints (a grid shape)."""
    return _int_pair(where, value, minimum=1)


def _int_at_least(where: str, value: Any, minimum: int) -> int:
    """An int (not a bool) >= `minimum`."""
    _expect(where, value, "int", isinstance(value, int) and not isinstance(value, bool))
    if value < minimum:
        raise UserInputError(f"{where}: expected an int >= {minimum}, got {value!r}")
    return value


def _positive_int(where: str, value: Any) -> int:
    """An int >= 1."""
    return _int_at_least(where, value, 1)


def _optional_int_at_least(where: str, value: Any, minimum: int) -> int | None:
    """None, or an int >= `minimum`."""
    return None if value is None else _int_at_least(where, value, minimum)


def _bool(where: str, value: Any) -> bool:
    """A bool (1 and 0 are refused)."""
    _expect(where, value, "bool", isinstance(value, bool))
    return value


def _str(where: str, value: Any) -> str:
    """A str."""
    _expect(where, value, "str", isinstance(value, str))
    return value


def _ops(where: str, value: Any) -> list:
    """An op name or a `pybuda.query` predicate becomes [it]; a non-empty list/tuple of them is copied."""
    if isinstance(value, (str, NodePredicate)):
        return [value]
    ok = isinstance(value, (list, tuple)) and len(value) > 0 and all(isinstance(v, (str, NodePredicate))
                                                                     for v in value)
    if not ok:
        raise UserTypeError(f"{where}: expected an op name (str), a pybuda.query predicate or a non-empty list of "
                            f"them, got {value!r}")
    return list(value)


def _str_list(where: str, value: Any) -> list[str]:
    """A str becomes [str]; a non-empty list/tuple of str is copied."""
    if isinstance(value, str):
        return [value]
    ok = isinstance(value, (list, tuple)) and len(value) > 0 and all(isinstance(v, str) for v in value)
    if not ok:
        raise UserTypeError(f"{where}: expected an op name (str) or a non-empty list of op names, got {value!r}")
    return list(value)


def _t_stream_shape(where: str, value: Any) -> tuple[int, int]:
    """Streaming factors (r, c): positive, one of them 1."""
    shape = _int_pair(where, value, minimum=1)
    if 1 not in shape:
        raise UserInputError(f"{where}: streaming is along one dimension only, so r or c must be 1; got {value!r}")
    return shape


def _t_stream_dir(where: str, value: Any) -> str:
    """A streaming direction of T_STREAM_DIRS, lower-cased."""
    direction = _str(where, value).lower()
    if direction not in T_STREAM_DIRS:
        raise UserInputError(f"{where}: invalid direction {value!r}; legal values: {', '.join(T_STREAM_DIRS)}")
    return direction


def _buffer_multipliers(where: str, value: Any) -> dict[int, int]:
    """{operand index >= 0: multiplier >= 1}."""
    _expect(where, value, "dict {operand_index: multiplier}", isinstance(value, dict))
    return {_int_at_least(f"{where} operand index", k, 0): _int_at_least(f"{where}[{k!r}]", v, 1)
            for k, v in value.items()}


def get_harvesting_mask(row_indices: list[int]) -> int:
    """Bitmask with bit r set for each harvested row r (only rows 1-5 and 7-11 can be harvested)."""
    _expect("harvested_rows", row_indices, "list of row indices", isinstance(row_indices, (list, tuple)))
    mask = 0
    for r in row_indices:
        if isinstance(r, bool) or r not in HARVESTABLE_ROWS:
            raise UserInputError(f"harvested_rows: row {r!r} cannot be harvested; legal values: "
                                 f"{', '.join(map(str, HARVESTABLE_ROWS))}")
        mask |= 1 << r
    return mask


_STAGE_NAME = re.compile(r"[a-z][a-z0-9_]*")


def _compile_depth(value: Any) -> CompileDepth | str:
    """A CompileDepth (or its name, case-insensitive), else a stage name (lower-case identifier; compile checks
    that its stage list has a stage of that name)."""
    if isinstance(value, str) and not any(m.name.lower() == value.lower() for m in CompileDepth):
        if not _STAGE_NAME.fullmatch(value):
            raise UserInputError(f"compile_depth: invalid value {value!r}; legal values: a stage name (lower-case, "
                                 f"e.g. 'lower') or a CompileDepth: {', '.join(m.name for m in CompileDepth)}")
        return value
    return _parse_enum("compile_depth", CompileDepth, value)


def _bounds_text(bounds: tuple[int, int | None]) -> str:
    """"0..4", or ">= 1" without an upper bound."""
    lo, hi = bounds
    return f"{lo}..{hi}" if hi is not None else f">= {lo}"


def _render(value: Any) -> str:
    """A value as docs/config.md spells it: enums as `Type.NAME`, strings quoted, sets in braces."""
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, set):
        return "{" + ", ".join(json.dumps(v) for v in sorted(value)) + "}" if value else "set()"
    return repr(value)


def _names(names: Iterable[Any]) -> str:
    """`a`, `b`, `c` (markdown code spans)."""
    return ", ".join(f"`{n}`" for n in names)


# Environment variables: each option declares its own (`option(env=...)`)
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
    raise UserInputError(f"{name}={os.environ[name]!r}: expected 0 or 1")


def _env_int(name: str) -> int:
    """The variable's value as an int."""
    try:
        return int(os.environ[name])
    except ValueError:
        raise UserInputError(f"{name}={os.environ[name]!r}: expected an integer") from None


def _env_set(name: str) -> bool:
    """The variable is set to a non-empty value."""
    return os.environ.get(name, "") != ""


def _set_from_env(cfg: CompilerConfig, env: str, attr: str, value: Any) -> None:
    """Assign (and so validate) an option from an environment variable; an error names the variable."""
    try:
        setattr(cfg, attr, value)
    except (TypeError, ValueError) as e:
        raise type(e)(f"{env}={os.environ.get(env)!r}: {e}") from None


@dataclass(frozen=True)
class Env(abc.ABC):
    """An environment variable of an option. `apply_env_config_overrides` applies the variables option by option
    in declaration order, and one option's in the order declared, so a later variable of an option wins."""

    name: str

    @abc.abstractmethod
    def apply(self, cfg: CompilerConfig, attr: str) -> None:
        """Set option `attr` of `cfg` from the variable when it is set."""

    @abc.abstractmethod
    def effect(self) -> str:
        """What the variable sets, for the table of docs/config.md."""


@dataclass(frozen=True)
class EnvBool(Env):
    """0/1 (also true/false, yes/no, on/off; an empty value is 1): the option takes the value, or its negation."""

    negate: bool = False

    def apply(self, cfg: CompilerConfig, attr: str) -> None:
        flag = _env_bool(self.name)
        if flag is not None:
            _set_from_env(cfg, self.name, attr, flag != self.negate)

    def effect(self) -> str:
        return "the negated value (0/1)" if self.negate else "the value (0/1)"


@dataclass(frozen=True)
class EnvFlag(Env):
    """When the variable is true the option is set to `value`; 0/false leaves it alone."""

    value: Any = True

    def apply(self, cfg: CompilerConfig, attr: str) -> None:
        if _env_bool(self.name):
            _set_from_env(cfg, self.name, attr, self.value)

    def effect(self) -> str:
        return f"`{_render(self.value)}` when set (0/false leaves the option alone)"


@dataclass(frozen=True)
class EnvValue(Env):
    """A non-empty value is assigned as the option's value (a string, or an int with `integer`); with `if_none`
    only while the option is still None."""

    integer: bool = False
    if_none: bool = False

    def apply(self, cfg: CompilerConfig, attr: str) -> None:
        if _env_set(self.name) and not (self.if_none and getattr(cfg, attr) is not None):
            _set_from_env(cfg, self.name, attr, _env_int(self.name) if self.integer else os.environ[self.name])

    def effect(self) -> str:
        value = "the integer value" if self.integer else "the value, checked as in code"
        return f"{value}, only while the option is `None`" if self.if_none else value


@dataclass(frozen=True)
class EnvCall(Env):
    """A non-empty value is an int passed to the `CompilerConfig` method `method`, which edits the option."""

    method: str

    def apply(self, cfg: CompilerConfig, attr: str) -> None:
        if _env_set(self.name):
            getattr(cfg, self.method)(_env_int(self.name))

    def effect(self) -> str:
        return f"`{self.method}(<the integer value>)`"


@dataclass(frozen=True)
class EnvDefault(Env):
    """The variable is the option's default when it is set (read when a config is made; `option` builds the
    default from it)."""

    def apply(self, cfg: CompilerConfig, attr: str) -> None:
        """Nothing: the variable gives the default and is not applied over a value."""

    def effect(self) -> str:
        return "its default (when unset: the declared default)"

    def default(self, declared: Any) -> Callable[[], Any]:
        """The default factory: the variable's value, else `declared`."""
        return lambda: os.environ.get(self.name, declared)


# Option declarations
def _declared_field(default: Any, metadata: dict[str, Any], factory: Callable[[], Any] | None = None) -> Any:
    """A dataclass field with `metadata`; a mutable default (list, dict, set) is copied for each instance."""
    if factory is None and isinstance(default, (list, dict, set)):
        factory = functools.partial(_copy.deepcopy, default)
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


# Why an option cannot act in this compiler (`Option.inapplicable`; docs/config.md shows it)
TVM_PYTHON = ("the legacy TVM path generated a PyBuda Python module from Relay; here torch.export's program goes "
              "through TVM Relax straight into the compiler's graph, with no generated module (constants fold in "
              "consteval, an op with no lowering is an error or a CPU fallback)")
NO_JAX = "this compiler takes torch and PyBuda modules; there is no JAX or TensorFlow frontend"
NO_PT2 = "there is no torch.compile (PT2) backend here: pybuda.compile takes a module and sample inputs"
NO_RUNTIME = ("there is no hardware runtime here: netlists run in the backend simulator, which has no runtime "
              "parameters, optimisation levels or perf-event capture")
NO_EMBEDDED = "the embedded platform's tilize op; here the host tilizes inputs (no embedded platform is modelled)"
LEGACY_STATE = "internal state of the legacy padding pass, not a user setting; here lowering pads to tiles"
FRONTEND_PLUMBING = ("the legacy TVM frontend filled it in for its generated module; here the outputs keep the torch "
                     "program's output structure (the compiled model returns them in it)")
NO_GRAPH_SOLVER = ("this balancer resolves producer/consumer op models that cannot connect inside its search "
                   "(compatible candidates, or an epoch cut through a DRAM queue); there is no graph solver to cut")
NO_POOL_WORKAROUND = ("a legacy workaround for max pooling over zero padding; here the padding takes no part in the "
                      "maximum (it holds the lowest value), so there is nothing to add and subtract")
OWN_TTI = ("a TTI image here holds the netlists, graphs and parameters in this compiler's own format; the backend's "
           "binary tensor formats have no reader here")


@dataclass(frozen=True)
class Option:
    """The declaration of one `CompilerConfig` option (its field's metadata, made by `option`).

    default: the default (a mutable one is copied per config; an `EnvDefault` variable replaces it when set).
    doc: what it does (docs/config.md). effective: False while the compiler ignores it (setting it warns);
    caveat: how far it takes effect; training: it only acts in a training compile, and this says what it does
    there (an inference compile that sets it warns with it). choices: the legal strings; unsupported: legacy
    values refused with a note; bounds: (min, max or None) of an int. env: its environment variables, applied in
    this order. alias: its other `set_configuration_options` keyword, whose value `from_alias` converts.
    parse: replaces the type check (it normalises and checks a value itself). inapplicable: why the option
    cannot act in this compiler (it then has no effect, for that reason rather than "not yet").
    """

    default: Any
    doc: str
    effective: bool = True
    caveat: str = ""
    training: str = ""
    choices: tuple[str, ...] = ()
    unsupported: tuple[str, ...] = ()
    bounds: tuple[int, int | None] | None = None
    env: tuple[Env, ...] = ()
    alias: str = ""
    from_alias: Callable[[Any], Any] | None = None
    parse: Callable[[Any], Any] | None = None
    inapplicable: str = ""

    def __post_init__(self) -> None:
        if (self.caveat or self.training) and not self.effective:
            raise InternalError("config: an option with no effect yet has no caveat and is not training-only")
        if self.inapplicable and self.effective:
            raise InternalError("config: an option that cannot apply here takes no effect")

    def check(self, name: str, value: Any, hint: Any) -> Any:
        """Type-check, normalise and range/choice-check a value of option `name` (its type hint `hint`)."""
        value = self.parse(value) if self.parse else _check(name, value, hint)
        if value is None:
            return value
        legal = ", ".join(self.choices)
        if value in self.unsupported:
            raise UserInputError(f"{name}: invalid value {value!r} (a legacy value this compiler does not implement); "
                                 f"legal values: {legal}")
        if self.choices and value not in self.choices:
            raise UserInputError(f"{name}: invalid value {value!r}; legal values: {legal}")
        if self.bounds is not None:
            lo, hi = self.bounds
            if value < lo or (hi is not None and value > hi):
                raise UserInputError(f"{name}: value {value!r} out of range; legal values: {_bounds_text(self.bounds)}")
        return value

    def meaning(self) -> str:
        """The Meaning cell of docs/config.md: the doc, the legal values, the keyword alias, the variables."""
        parts = [self.doc]
        if self.choices:
            parts.append(f"legal values: {_names(self.choices)}")
        if self.unsupported:
            parts.append(f"refused when the config is made (legacy values not implemented): {_names(self.unsupported)}")
        if self.bounds is not None:
            parts.append(f"legal values: {_bounds_text(self.bounds)}")
        if self.alias:
            converted = f" (converted by `{self.from_alias.__name__}`)" if self.from_alias else ""
            parts.append(f"`set_configuration_options` keyword `{self.alias}`{converted}")
        if self.env:
            parts.append(f"environment: {_names(e.name for e in self.env)}")
        return "; ".join(parts)


def option(default: Any, **declaration: Any) -> Any:
    """A `CompilerConfig` field declared as an option: `Option(default, **declaration)` is the one place each fact
    about it is written."""
    decl = Option(default, **declaration)
    factory = next((e.default(default) for e in decl.env if isinstance(e, EnvDefault)), None)
    return _declared_field(default, {"option": decl}, factory)


class UnknownOptionError(UserInputError, AttributeError):
    """A name that is not a `CompilerConfig` option was set (an AttributeError, as for any unknown attribute); the
    message suggests close option names."""


def check_fracture_chips(where: str, chip_ids: dict[str, list[int]]) -> None:
    """UserInputError for chip ids given to a fracture group (`where`): the pieces run on their op's chip."""
    if any(chip_ids.values()):
        raise UserInputError(f"{where}: chip_ids {chip_ids}: the pieces of a fractured op cannot be placed on chips "
                             "of their own here; leave chip_ids empty, the pieces run on the chip of the op's part "
                             "of the schedule (set_chip_break, override_op_placement(chip_id=))")


def _fracture_groups(value: Any) -> list:
    """`fracture_groups` type-checked, chip ids refused (`check_fracture_chips`)."""
    value = _check("fracture_groups", value, list[tuple[list[tuple[str, list[int], list[int]]], dict[str, list[int]]]])
    for _, chip_ids in value:
        check_fracture_chips("fracture_groups", chip_ids)
    return value


# Override records
@dataclass(frozen=True)
class Attribute:
    """The declaration of one attribute of a per-op override record (made by `attribute`): whether the compiler
    honours it (else setting it warns, named `<option>.<attribute>`) and how `CompilerConfig.balancer_op_override`
    checks a value (`check(where, value)`)."""

    effective: bool = True
    check: Callable[[str, Any], Any] | None = None


def attribute(default: Any = None, **declaration: Any) -> Any:
    """A field of a per-op override record declared with `Attribute(**declaration)`."""
    return _declared_field(default, {"attribute": Attribute(**declaration)})


@functools.cache
def _record_attributes(cls: type | None) -> dict[str, Attribute]:
    """The attributes `cls` declares with `attribute` (empty for other classes and None)."""
    if not dataclasses.is_dataclass(cls):
        return {}
    return {f.name: f.metadata["attribute"] for f in dataclasses.fields(cls) if "attribute" in f.metadata}


@dataclass
class OpOverride:
    """Per-op balancer override (stored in `CompilerConfig.balancer_op_overrides[op_name]`); the helper that
    stores an attribute is declared with `@helper("balancer_op_overrides.<attribute>")`."""

    grid_shape: tuple[int, int] | None = attribute(check=_positive_pair)
    force_dram_parameters: bool | None = attribute(check=_bool)
    t_stream_dir: str | None = attribute(check=_t_stream_dir)
    t_stream_shape: tuple[int, int] | None = attribute(check=_t_stream_shape)
    u_kt: int | None = attribute(check=_positive_int)
    input_buffer_multiplier: dict[int, int] = attribute({}, check=_buffer_multipliers)
    output_buffer_multiplier: int | None = attribute(check=_positive_int)


@dataclass
class PlacerOpOverride:
    """Per-op placer override (stored with its op name in `CompilerConfig.placer_op_overrides`)."""

    start: tuple[int, int] | None = attribute()
    transpose_op: bool = attribute(False)
    chip_id: int | None = attribute()
    temporal_epoch_break: bool = attribute(False)


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
            raise UserInputError(f"AMPNodeProperties: epoch_type: invalid value {self.epoch_type!r}; legal values: "
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


# Options with no effect yet: a warning once per option name and process
class IneffectiveOptionWarning(UserWarning):
    """An option was set that is accepted and stored but has no effect yet in this version (docs/config.md)."""


_WARNED: set[str] = set()


def ineffective_options(config: CompilerConfig) -> list[str]:
    """The options of `config` that differ from their defaults but have no effect yet: field names, and
    `<field>.<attribute>` for per-op override attributes the compiler ignores (`attribute(effective=False)`)."""
    fields = dataclasses.fields(config)
    names = [f.name for f in fields if not _OPTIONS[f.name].effective and getattr(config, f.name) != _field_default(f)]
    return names + [f"{f.name}.{a}" for f in fields for a in _ineffective_attributes(getattr(config, f.name))]


def _field_default(f: dataclasses.Field) -> Any:
    """The default value of a dataclass field (a fresh one for a default factory)."""
    return f.default_factory() if f.default is dataclasses.MISSING else f.default


def _records(value: Any) -> list[Any]:
    """The per-op override records (dataclasses declared with `attribute`) in an option's value: the value
    itself, or the items of its dicts, lists and tuples."""
    if _record_attributes(type(value)):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    return [r for v in value for r in _records(v)] if isinstance(value, (list, tuple)) else []


def _ineffective_attributes(value: Any) -> list[str]:
    """The attributes with no effect yet that are set (not default) in any override record of an option's value,
    in declaration order."""
    records = _records(value)
    if not records:
        return []
    return [f.name for f in dataclasses.fields(records[0]) if not _record_attributes(type(records[0]))[f.name].effective
            and any(getattr(r, f.name) != _field_default(f) for r in records)]


def warn_ineffective(names: Iterable[str], how: str) -> None:
    """IneffectiveOptionWarning for each of `names` not yet warned about in this process; `how` says how it
    was set ("set_configuration_options", "override_u_kt", "the config given to compile", ...)."""
    for name in names:
        if name not in _WARNED:
            _WARNED.add(name)
            reason = getattr(_OPTIONS.get(name), "inapplicable", "")
            effect = f"does not apply in this compiler ({reason})" if reason else "has no effect yet in this version"
            warnings.warn(f"option {name!r} ({how}) {effect}: it is accepted and stored, but the compiler ignores it "
                          "(docs/config.md lists the effective options)", IneffectiveOptionWarning, stacklevel=3)


def reset_ineffective_warnings() -> None:
    """Warn again about options already warned about in this process (tests)."""
    _WARNED.clear()


def _warns_if_ineffective(fn: Callable) -> Callable:
    """Wrap a helper that edits the global config (or, as a method, its own config): it warns about the options
    with no effect yet that the call set."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if _HELPERS_RUNNING:   # called by another helper: the outermost one warns, under its own name
            return fn(*args, **kwargs)
        cfg = args[0] if args and isinstance(args[0], CompilerConfig) else _get_global_compiler_config()
        before = set(ineffective_options(cfg))
        _HELPERS_RUNNING.append(fn.__name__)
        try:
            result = fn(*args, **kwargs)
        finally:
            _HELPERS_RUNNING.pop()
        warn_ineffective([n for n in ineffective_options(cfg) if n not in before], fn.__name__)
        return result
    return wrapper


_HELPERS_RUNNING: list[str] = []

# override helper or CompilerConfig method -> the options it stores (fields, or "<field>.<attribute>")
HELPERS: dict[str, tuple[str, ...]] = {}


def helper(*stores: str) -> Callable[[Callable], Callable]:
    """Declare an override helper (a module function or a `CompilerConfig` method) and the options it stores
    (fields, or `<field>.<attribute>` of a per-op override record). It takes effect when all of them do
    (`EFFECTIVE_OPTIONS`), and a call warns about the options with no effect yet that it set."""
    def declare(fn: Callable) -> Callable:
        HELPERS[fn.__name__] = stores
        return _warns_if_ineffective(fn)
    return declare


# CompilerConfig
@dataclass
class CompilerConfig:
    """All compiler options (legacy names and defaults), each declared with `option`. Values are validated on
    construction and assignment."""

    # --- flow -----------------------------------------------------------------------------------------------
    enable_training: bool = option(
        False, doc="Run autograd and the training passes (bwd/opt graphs)",
        caveat="with `compile(loss=, optimizer=, sample_targets=)` (docs/training.md); without them it is refused")
    enable_recompute: bool = option(
        False, doc="Recompute activations in the backward pass to save memory",
        caveat="`<op>_recompute` copies in the backward epochs (docs/training.md)",
        training="it recomputes forward activations for the backward pass of a training compile: "
                 "compile(..., loss=, optimizer=, sample_targets=)")
    compensated_parameter_updates: bool = option(
        True, doc="Not legacy: each trained parameter keeps a residual so that no update is lost to the device's "
                  "precision (Kahan summation; docs/training.md)",
        caveat="`False` gives the legacy update",
        training="it concerns the optimizer's parameter updates of a training compile")
    optimizer_on_host: bool = option(
        False, doc="Not legacy as an option (legacy PyBuda's CPU-side optimizers): the device computes and "
                   "accumulates the gradients (`run_fwd`, `run_bwd`, no `run_opt`); the host updates float32 master "
                   "parameters with the optimizer and writes them to the parameter queues after every step; the "
                   "estimate adds the PCIe transfers (docs/training.md)",
        training="it runs a training compile's optimizer on the host")
    match_subgraph_patterns: int | None = option(
        None, doc="Compact N isomorphic subgraphs with the pattern matcher", bounds=(1, None), effective=False,
        inapplicable="the legacy pattern matcher compacted N repeated layers to compile one; this balancer finds "
                     "epochs whose ops, contexts and overrides are alike (a transformer's layers) by itself and "
                     "solves each kind once (docs/balancer.md), so there is no N to give")
    compile_depth: CompileDepth | str = option(
        CompileDepth.FULL, parse=_compile_depth,
        doc="Stop compilation after this stage: a stage name of `pybuda.stages` (`\"lower\"`; compile checks it "
            "against its stage list) or a legacy `CompileDepth` (or its name, case-insensitive), mapped onto the "
            "stage it ends at (user guide)",
        env=(EnvValue("PYBUDA_COMPILE_DEPTH"), EnvFlag("PYBUDA_FORCE_FULL_COMPILE_DEPTH", CompileDepth.FULL)))
    verify: bool = option(False, doc="Compare every stage's golden outputs against PyTorch during compile")
    enable_consteval: bool = option(True, doc="Constant-evaluate parameter/constant subgraphs on the host")
    compile_subgraphs: bool = option(
        False, doc="Compile disjoint graphs as separate programs",
        caveat="each disjoint subgraph of a device part (ops joined by values and shared inputs; parameters and "
               "constants may be shared) gets epochs of its own and a program `run_fwd_<k>` in the one netlist; "
               "a call runs them all, the estimate sums them")
    enable_op_level_comparision: bool = option(
        False, doc="Compare every op with the framework at each stage (legacy spelling): implies `verify`; after "
                   "each framework- and Buda-level stage every op it kept (same name, operands and shape) is "
                   "evaluated on the first sample (float32) and compared with its value before the stage; the first "
                   "below PCC 0.999, or off by more than 0.001 of its largest value, fails the compile naming the "
                   "stage and the op (`compiled.checks` holds each stage's worst op)",
        caveat="ops a stage rewrites are checked through the stage's outputs only, as are all ops of `optimize` "
               "(its layout rewrites keep names) and of the placed-level `t_stream`")
    # --- balancer / scheduler / placer ----------------------------------------------------------------------
    balancer_policy: str = option(
        "default", choices=BALANCER_POLICIES,
        unsupported=("Ribbon", "CNN", "MaximizeTMinimizeGrid", "MinimizeGrid", "Random"),
        doc="The balancer's policy (docs/balancer.md): `default` and `CP-SAT` split the graph into segments and solve "
            "each epoch with CP-SAT, never worse than the greedy plan, with lower bounds; `Greedy` and the legacy "
            "`NLP` search a common cycle target and place first-fit; `SingleOpPerEpoch` puts each op in an epoch of "
            "its own",
        env=(EnvValue("PYBUDA_BALANCER_POLICY_TYPE"),))
    balancer_export_models: str | None = option(
        None, doc="Debugging: a directory the CP-SAT policy writes every epoch model it solves to, before solving it "
                  "(`<k>_<first op>.pb.txt`, text protobuf, k counting the models of the compile from 0); "
                  "`pybuda.balancer.epoch_solver.replay(path)` solves one again with the balancer's parameters "
                  "(docs/balancer.md)",
        env=(EnvValue("PYBUDA_BALANCER_EXPORT_MODELS"),))
    scheduler_policy: str = option(
        "Topological", doc="The op schedule the balancer splits into epochs (docs/balancer.md \"Schedule\"): "
                           "`Topological` (the earliest-built ready op first), `ModuleInputsBFS` (breadth first from "
                           "the module's inputs), `LongestPath` (the longest path first, each op after its operands)",
        choices=SCHEDULER_POLICIES,
        caveat="the default here is `Topological` (legacy: `ModuleInputsBFS`), with which the perf baselines were "
               "planned; on the fast tier's 12 rows the other two plan within 4 % of it, some better, some worse",
        env=(EnvValue("PYBUDA_SCHEDULER_POLICY"),))
    enable_t_streaming: bool = option(
        True, doc="Search streaming factors (slice R/C into t) per op",
        caveat="the balancer's op models include row- and column-streamed ones (user guide, \"T-streaming\"); an "
               "`override_t_stream_dir`/`override_t_stream_shape` the op cannot take fails the compile naming the op, "
               "what was asked and the legal factors; `rz`/`cz` (z-major streaming) are not implemented: a compile "
               "error says so",
        env=(EnvFlag("PYBUDA_ENABLE_T_STREAMING", True),))
    manual_t_streaming: bool = option(False, doc="Stream only ops that have `override_t_stream_shape`")
    enable_auto_fusing: bool = option(
        True, doc="Fuse subgraphs of small ops into fused ops",
        caveat="the `fuse` stage (user guide, \"Fusion\"); fused ops are named `_fused_op_<k>` and can be overridden "
               "by that name",
        env=(EnvFlag("PYBUDA_DISABLE_OP_FUSING", False),))
    graph_solver_self_cut_type: str = option(
        "FastCut", doc="Queue insertion to resolve op-op incompatibility", choices=GRAPH_SOLVER_SELF_CUT_TYPES,
        env=(EnvValue("PYBUDA_GRAPHSOLVER_SELF_CUT_TYPE"),), effective=False, inapplicable=NO_GRAPH_SOLVER)
    use_interactive_placer: bool = option(
        True, doc="Use the interactive placer in policies that support it",
        caveat="its one effect here: off, `override_op_placement(spatial_epoch_break=True)` breaks the epoch instead "
               "of the chip, as in legacy; the CP-SAT planner is this compiler's only placer",
        env=(EnvFlag("PYBUDA_DISABLE_INTERACTIVE_PLACER", False),))
    enable_enumerate_u_kt: bool = option(
        True, doc="Search all matmul u_kt values: besides the largest u_kt that fits L1 (the fewest kernel cycles), "
                  "each smaller one that frees L1 for more of the op's parameters (held in L1 instead of read from "
                  "DRAM every input); False: the largest only",
        env=(EnvBool("PYBUDA_DISABLE_ENUMERATE_U_KT", negate=True),))
    enable_single_buffer_fallback: bool = option(
        False, doc="Allow single-buffered op models when double buffering does not fit: an op grid on which no "
                   "model with a double-buffered output (buf_size_mb 2) fits L1 gets one with buf_size_mb 1 (the "
                   "estimate times the op's output buffer holding one mblock)",
        env=(EnvBool("PYBUDA_ENABLE_SINGLE_BUFFER_FALLBACK"),))
    enable_auto_transposing_placement: bool = option(
        True, doc="The placer may turn an op's grid (grid_transpose) where that plans better; False places every op "
                  "as its grid reads, except the `override_op_placement(transpose_op=True)` ones",
        caveat="on by default here (the legacy default was off: its placer turned grids only when asked)",
        env=(EnvFlag("PYBUDA_ENABLE_AUTO_TRANSPOSE", True),))
    chip_placement_policy: str = option(
        "MMIO_LAST", doc="Chip order for placement: MMIO_LAST puts the last part of a chip-broken schedule on the chip "
                         "with the PCIe link, the earlier parts on the others (docs/balancer.md \"Chips\")",
        choices=("MMIO_LAST",), unsupported=tuple(p for p in CHIP_PLACEMENT_POLICIES if p != "MMIO_LAST"),
        caveat="SNAKE ordered a Galaxy's chips, and no Galaxy is modelled here")
    dram_placement_algorithm: DRAMPlacementAlgorithm = option(
        DRAMPlacementAlgorithm.ROUND_ROBIN,
        doc="Queue-to-channel assignment: ROUND_ROBIN, ROUND_ROBIN_FLIP_FLOP, GREATEST_CAPACITY, CLOSEST (parameters "
            "and constants always go next to their readers)")
    enable_forked_dram_inputs: bool = option(
        False, doc="Ops of an epoch that read a DRAM queue the same way share one read (the netlist's "
                   "`forked_dram_inputs`; a real field here, a class attribute in legacy)",
        env=(EnvBool("PYBUDA_ENABLE_FORKED_DRAM_INPUTS"),),
        caveat="every legal share is taken and priced (the forwarded copy's NoC leg and fork stream against the "
               "DRAM channel bytes saved): it can cost a little where the channels are not the limit")
    enable_broadcast_splitting: bool = option(
        False, doc="Split an edge that broadcasts along more than one axis with a NOP after each broadcast but the "
                   "last (`passes/split_broadcasts.py`)")
    enable_link_past_cache_ios: bool = option(
        False, doc="Heuristically link past-cache outputs back to inputs",
        caveat="a Hugging Face causal LM (GPT-2, Llama, Falcon) or encoder-decoder (T5, FLAN-T5, Whisper) is "
               "compiled as one decode step over a page of 32 positions, its key and value caches device state "
               "written a page per run (an encoder-decoder's encoder a program of its own, its cross-attention "
               "state written once per sequence; `frontend/generation.py`); `compiled.generate` decodes; of the "
               "sample input only the prompt's length (the estimate's) or the source's shape is kept")
    generation_max_length: int | None = option(
        None, bounds=(32, None),
        doc="Not legacy: the positions a compiled decoder's caches hold (`enable_link_past_cache_ios`; a multiple "
            "of 32; default: all the model's positions)")
    enable_pt2_fx_graph_link: bool = option(
        False, doc="Past-KV linking for the torch.compile path",
        effective=False, inapplicable=NO_PT2)
    # --- CPU fallback / frontend ----------------------------------------------------------------------------
    enable_tvm_cpu_fallback: bool = option(
        True, doc="Run the ops in `cpu_fallback_ops` (and their minimal neighbourhood) on the host")
    cpu_fallback_ops: set[str] = option(
        {"embedding"},
        doc="pybuda op types (or an op type they were decomposed from, e.g. `softmax`; Relay "
            "`take`/`adv_index`/`nn.embedding` mean `embedding`) to run on the host, at any position "
            "(`add_cpu_fallback_ops` / `remove_cpu_fallback_ops`)",
        caveat="fallback ops run on the host anywhere in the model: with their ancestors before the device when none "
               "of those is a matmul or nn op (convolution, norm, softmax, pool), else with their descendants after "
               "it when none of those is, else alone between two device parts (one netlist per device part); an op "
               "decomposed from a listed type falls back too (user guide, \"CPU fallback\")")
    enable_tm_cpu_fallback: bool = option(
        False, doc="Also run the TM ops (reshape, transpose, concatenate, slices, pad, ...) at the ends of the model "
                   "on the host: leading ones computed from model inputs (and parameters, constants) through TMs "
                   "alone, trailing ones read by model outputs alone (user guide, \"CPU fallback\")",
        caveat="TMs that sit alone on an input or output already become host transforms without it (host_io stage)")
    tm_cpu_fallback_max_depth: int = option(
        10, doc="How many TMs deep `enable_tm_cpu_fallback` goes from the inputs and from the outputs",
        bounds=(0, None))
    enable_tvm_dropout: bool = option(
        False, doc="Keep dropout from TVM (temporary)",
        effective=False, inapplicable=TVM_PYTHON)
    enable_tvm_unsupported_ops: bool = option(
        False, doc="Emit unsupported ops into generated Python for manual editing",
        effective=False, inapplicable=TVM_PYTHON)
    enable_tvm_constant_prop: bool = option(
        False, doc="TVM constant propagation of all parameters", effective=False, inapplicable=TVM_PYTHON)
    tvm_constnat_prop_mask: set[str] = option(
        set(), doc="Parameters to constant-propagate in TVM (legacy spelling)",
        effective=False, inapplicable=TVM_PYTHON)
    convert_framework_params_to_tvm: bool = option(
        True, doc="Convert framework parameters to relay parameters", env=(EnvBool("PYBUDA_CONVERT_PARAMS_TO_TVM"),),
        effective=False, inapplicable=TVM_PYTHON)
    enable_xla_jax_convert: bool = option(
        False, doc="Convert JAX to TF through XLA",
        effective=False, inapplicable=NO_JAX)
    enable_tvm_jax_freeze_large_model: bool = option(
        True, doc="Freeze JAX models larger than 2 GB", effective=False, inapplicable=NO_JAX)
    framework_model_output_names: list[str] = option(
        [], doc="Output names given by the framework", effective=False, inapplicable=FRONTEND_PLUMBING)
    compile_tvm_to_python: bool = option(
        True, doc="Generate a PyBuda Python module from TVM",
        effective=False, inapplicable=TVM_PYTHON)
    retain_tvm_python_files: bool = option(
        False, doc="Keep the generated Python files",
        effective=False, inapplicable=TVM_PYTHON)
    tvm_graph_store_path: str = option(
        "", doc="Where the TVM cache is written", caveat="with `PYBUDA_ENABLE_TVM_CACHE` (1 on, 0 off, -1 clear)")
    tvm_graph_load_path: str = option(
        "", doc="Where the TVM cache is read from", caveat="with `PYBUDA_ENABLE_TVM_CACHE` (1 on, 0 off, -1 clear)")
    tvm_module_to_num_patterns: dict[str, int] = option(
        {}, doc="Repeated-pattern count per module (`set_num_repeated_patterns`)",
        effective=False, inapplicable=TVM_PYTHON)
    # --- lowering / numerics --------------------------------------------------------------------------------
    enable_conv_prestride: bool = option(
        True, doc="Host-side conv prestride: a strided conv over a model input (kernel at least the stride, no "
                  "dilation or groups, weights not trained) becomes a stride-1 conv over the input's space-to-depth "
                  "(`conv2d_prestride_act`, a host op ahead of the device, as the legacy tilizer did; it also pads "
                  "the positions to a tile count with u_kt blocks) with the kernel rearranged alike "
                  "(`conv2d_prestride_weights`, folded in consteval) (docs/models.md, \"CNN path\")",
        caveat="a conv with `override_multi_op_fracture_factor` above 1 is not prestrided; the host op is listed "
               "in `compiled.host_ops` and not timed",
        env=(EnvBool("PYBUDA_PRESTRIDE_DISABLE", negate=True),))
    enable_device_tilize: bool = option(
        False, doc="Tilize op on the embedded platform (the legacy docs say True; the code default is False)",
        env=(EnvBool("PYBUDA_ENABLE_DEVICE_TILIZE"),), effective=False, inapplicable=NO_EMBEDDED)
    max_pool_add_sub_surround: bool = option(
        False, doc="Add a constant before max-pool and subtract it after", effective=False,
        inapplicable=NO_POOL_WORKAROUND)
    max_pool_add_sub_surround_value: float = option(
        1.0, doc="The constant for `max_pool_add_sub_surround`", effective=False, inapplicable=NO_POOL_WORKAROUND)
    enable_stable_softmax: bool = option(
        True, doc="Subtract the max before exp in the softmax decomposition",
        env=(EnvBool("PYBUDA_DISABLE_STABLE_SOFTMAX", negate=True),))
    default_df_override: DataFormat | None = option(
        None, doc="Blanket output data format for all ops (`None` = inferred)", env=(EnvValue("PYBUDA_DEFAULT_DF"),))
    default_accumulate_df: DataFormat | None = option(None, doc="Accumulation data format", alias="accumulate_df")
    default_math_fidelity: MathFidelity = option(
        MathFidelity.HiFi3, doc="Default math fidelity", alias="math_fidelity")
    amp_level: int | None = option(
        None, doc="Automatic mixed-precision level", bounds=(0, 3),
        caveat="levels 1 (B formats) and 2 (A formats) as the legacy AMP; 3 is rejected at compile time",
        env=(EnvValue("PYBUDA_AMP_LEVEL", integer=True, if_none=True),))
    amp_properties: list[AMPNodeProperties] = option(
        [], doc="Mixed-precision rules (`configure_mixed_precision`, `enable_amp_light`)",
        caveat="`op_type` (the framework op a device op came from), `name_regex` (full match of the device op name), "
               "`output_df`, `intermediate_df`, `accumulate_df`, `math_fidelity`, `input_df` for host-fed operands; "
               "`epoch_type` (`fwd`, `bwd`, `opt`: the op's epoch type in a training graph) and `is_gradient_op` (the "
               "op writes a gradient accumulator); a gradient op whose intermediate format becomes Float32 (a matmul "
               "accumulating in Float32) keeps its accumulator in Float32; `input_parameter_indices_to_optimize` is "
               "not used yet",
        env=(EnvCall("PYBUDA_AMP_LIGHT", "enable_amp_light"),))
    default_dram_parameters: bool | None = option(
        None, doc="True: every op streams its parameters and constants from DRAM (`override_dram_parameters(op, "
                  "False)` exempts one); False or None: the balancer holds them in L1 where that plans better",
        caveat="None differs from legacy, where it meant DRAM only at microbatch 1: here the cost model decides",
        env=(EnvBool("PYBUDA_DEFAULT_DRAM_PARAMETERS"),))
    paddings: dict[str, bool] = option({}, doc="Padding-pass bookkeeping", effective=False, inapplicable=LEGACY_STATE)
    # --- per-op overrides -----------------------------------------------------------------------------------
    balancer_op_overrides: dict[str, OpOverride] = option(
        {}, doc="op name -> `OpOverride` (`override_op_size`, `override_u_kt`, ...; docs: the override helpers)",
        caveat="an op named by any balancer or placer override is not fused (it stays an op of its own)")
    placer_op_overrides: list[tuple[str | NodePredicate, PlacerOpOverride]] = option(
        [], doc="(op name or `pybuda.query` predicate, `PlacerOpOverride`) pairs (`override_op_placement`)",
        caveat="`temporal_epoch_break` works through the epoch break it records; `chip_id` puts the part of the "
               "schedule between chip breaks that holds the op on that chip; an op named by any balancer or placer "
               "override is not fused")
    op_names_to_epoch_break: list[list[str | NodePredicate]] = option(
        [], doc="Each entry (op names, `pybuda.query` predicates) starts a new epoch at its first-scheduled op "
                "(`set_epoch_break`)")
    op_names_to_chip_break: list[list[str | NodePredicate]] = option(
        [], doc="Each entry (op names, `pybuda.query` predicates) starts the next chip at its first-scheduled op "
                "(`set_chip_break`)",
        caveat="multi-chip devices: n300 (docs/balancer.md \"Chips\")")
    op_names_dont_fuse: list[str] = option(
        [], doc="Ops excluded from fusion (`dont_fuse`): op names or regular expressions over whole op names")
    op_names_manual_fuse: list[str] = option(
        [], doc="Only these ops may fuse (`manual_fuse`): op names or regular expressions over whole op names")
    scheduler_constraints: list[list[str]] = option(
        [], doc="Partial orderings the scheduler must respect (`add_schedule_constraint`)",
        caveat="the balancer's op schedule keeps them (each within its device segment); an ordering against the "
               "graph's dependencies, across segments or naming an op off the device is a `BalancerError` saying "
               "which")
    buffering_nops_to_insert: dict[tuple[str, str, int | None, int | None], NopInsertionInstruction] = option(
        {}, doc="`NopInsertionInstruction` keyed by (src, dest, input_id, fork_id) (`insert_nop`)",
        caveat="stage `insert_nops` (after `fuse`) puts `nop_count` NOPs `buffer_<k>_<src>_<dest>` on the edge")
    insert_queues: list[tuple[str, str, int]] = option(
        [], doc="(producer, consumer, operand index): force a DRAM queue on that edge",
        caveat="the consumer reads the producer's output from a DRAM queue (`e2e_<producer>_0`) in the same epoch, "
               "costed by the balancer; an entry naming no edge of the Buda graph names the consumer's operands")
    fracture_groups: list[tuple[list[tuple[str, list[int], list[int]]], dict[str, list[int]]]] = option(
        [], doc="(nodes as (name, [dims], [factors]), {name: chip_ids}) (`insert_fracture_group`)",
        parse=_fracture_groups,
        caveat="stage `fracture` (after `decompose`) splits each op of the decomposed graph along one dim into "
               "pieces over operand slices, chained pieces reading each other directly (`passes/fracture.py`); "
               "element-wise ops and matmuls; chip_ids are refused (the pieces run on the chip of their op's part of "
               "the schedule: place it with set_chip_break and override_op_placement(chip_id=))")
    conv_multi_op_fracture_factor_override: dict[str, int] = option(
        {}, doc="Conv op (its name in the framework graph, e.g. `conv2d_0`) -> number of ops to split it into, by "
                "kernel rows (`override_multi_op_fracture_factor`)",
        caveat="a conv2d that runs as im2col pickers and a weight matmul is split by kernel rows into `factor` picker "
               "sparse matmuls and weight matmuls, summed by adds (then the bias); the name is checked against the "
               "framework graph before decomposition; legal: 1..kh; a larger factor, or a factor above 1 on a "
               "patchify conv (stride == kernel on a graph input) or a depthwise tap-sum conv, is an `OpError` naming "
               "the conv and the legal factors")
    manual_dram_queue_placement: dict[str, DramQueueConfigOverride] = option(
        {}, doc="Queue name -> `DramQueueConfigOverride(chip_id, channel)`: every buffer of the queue on that channel",
        caveat="the channel; chip 0 only")
    loopback_outputs: dict[str, int] = option(
        {}, doc="{input name: output index}: keep outputs on device as next inputs",
        caveat="the input becomes device state (a ram the output writes back after every run, never pushed "
               "from the host again; `passes/loopback.py`): whole, or one page of its rows at the run's "
               "`cache_write_index` (two views of one DRAM buffer, netlist `alias`, and the program parameter "
               "`$p_cache_write_index`); a whole state at microbatch 1, a paged one per sample at any; not in a "
               "training compile")
    op_intermediates_to_save: list[str] = option(
        [], doc="Ops of the Buda graph whose outputs the host also reads: each gets an output queue "
                "`intermediate_<op>` and is not fused; after a call, `compiled.intermediates` maps each name to its "
                "output (framework layout); inference compiles only",
        caveat="an op name the device graph lacks fails after fusion with the closest names; the estimate pays for "
               "the extra output queue")
    # --- device / backend / runtime -------------------------------------------------------------------------
    device_mode: DeviceMode = option(
        DeviceMode.CompileAndRun,
        doc="`CompileAndRun`, `CompileOnly` (compile and save a TTI image; the model does not run) or `RunOnly` "
            "(load a TTI image instead of compiling)",
        caveat="`CompileOnly` saves the image at `compile(..., tti_path=)` (default `<output_dir>/<model name>.tti`) "
               "and returns a model that can be inspected and saved but does not run; `RunOnly` loads that image; "
               "it is this version's own format (docs/user_guide.md), not the legacy tar, and `tti_dump_format` is "
               "not used")
    device_config: str | None = option(
        None, doc="The legacy board config: the device a compile without `device=` targets (wh_n150 -> n150, "
                  "wh_n300 -> n300, gs_e150 -> e150)", choices=tuple(DEVICE_OF_CONFIG),
        unsupported=tuple(c for c in SUPPORTED_DEVICE_CONFIGS if c not in DEVICE_OF_CONFIG),
        caveat="a compile whose `device=` names another device is an error")
    harvesting_mask: int = option(
        0, doc="Bitmask of harvested rows: the placer's grid loses one row per harvested row (netlist grids are "
               "logical); harvesting every row is an error",
        bounds=(0, None), alias="harvested_rows", from_alias=get_harvesting_mask)
    performance_trace: PerfTraceLevel = option(
        PerfTraceLevel.NONE, doc="Backend perf-event capture: NONE, LIGHT, VERBOSE",
        env=(EnvValue("PYBUDA_PERFORMANCE_TRACE"),), effective=False, inapplicable=NO_RUNTIME)
    backend_opt_level: int = option(
        4, doc="Backend runtime optimisation level", bounds=(0, 4),
        effective=False, inapplicable=NO_RUNTIME)
    backend_output_dir: str = option(
        "pybuda_out", doc="Build/artifact directory: compile's default `output_dir`",
        env=(EnvDefault("PYBUDA_BUILD_DIR"),))
    backend_device_descriptor_path: str = option(
        "", doc="A legacy SoC descriptor YAML of the compile's device (`grid`, `functional_workers`, `dram`, "
                "`worker_l1_size`, `arch_name`): the worker rows it lists are the grid the compile places on (a "
                "board with harvested rows, as `harvesting_mask`)",
        caveat="the arch, NoC size, worker columns, L1 size and DRAM channels must be the device's (a compile "
               "error names the field otherwise); with `harvesting_mask` as well it is an error",
        env=(EnvValue("PYBUDA_OVERRIDE_DEVICE_YAML"),))
    backend_cluster_descriptor_path: str = option(
        "", doc="Cluster descriptor yaml (stored as given)", env=(EnvValue("PYBUDA_OVERRIDE_CLUSTER_YAML"),),
        effective=False, inapplicable=NO_RUNTIME)
    backend_runtime_params_path: str = option("", doc="Runtime-params yaml", effective=False, inapplicable=NO_RUNTIME)
    backend_runtime_args: str = option(
        "", doc="Extra backend runtime arguments",
        effective=False, inapplicable=NO_RUNTIME)
    store_backend_db_to_yaml: bool = option(
        False, doc="Dump the backend DB to `backend_runtime_params_path`", effective=False, inapplicable=NO_RUNTIME)
    input_queues_on_host: bool = option(
        True, doc="Back input queues with host memory instead of device DRAM",
        env=(EnvBool("PYBUDA_ENABLE_INPUT_QUEUES_ON_HOST"),))
    output_queues_on_host: bool = option(
        True, doc="Back output queues with host memory instead of device DRAM",
        env=(EnvBool("PYBUDA_ENABLE_OUTPUT_QUEUES_ON_HOST"),))
    tti_dump_format: TTIDumpFormat = option(
        TTIDumpFormat.DEFAULT, doc="Tensor serialisation in TTI: DEFAULT (pkl), BACKEND (bin), BACKEND_TILIZED (tbin)",
        env=(EnvFlag("PYBUDA_TTI_BACKEND_TILIZED_FORMAT", TTIDumpFormat.BACKEND_TILIZED),
             EnvFlag("PYBUDA_TTI_BACKEND_FORMAT", TTIDumpFormat.BACKEND)), effective=False, inapplicable=OWN_TTI)

    def __setattr__(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, _validate_field(name, value))

    def __post_init__(self) -> None:
        self.apply_env_config_overrides()

    # --- env ------------------------------------------------------------------------------------------------
    def apply_env_config_overrides(self) -> None:
        """Apply the options' PYBUDA_* environment variables on top of the current values (env wins): option by
        option in declaration order, an option's variables in the order declared (a later one wins)."""
        for name, decl in _OPTIONS.items():
            for env in decl.env:
                env.apply(self, name)

    @helper("amp_properties")
    def enable_amp_light(self, level: int = 1) -> None:
        """Add the AMP-light rule for matmul weights/bias: 1 = 8-bit mantissa HiFi2, 2 = 4-bit HiFi2, 3 = 4-bit LoFi."""
        configs = {1: (8, MathFidelity.HiFi2), 2: (4, MathFidelity.HiFi2), 3: (4, MathFidelity.LoFi)}
        if level == 0:
            return
        if level not in configs:
            raise UserInputError(f"enable_amp_light: invalid level {level!r}; legal values: 0, 1, 2, 3")
        bits, fidelity = configs[level]
        rule = AMPNodeProperties(op_type="matmul", math_fidelity=fidelity,
                                 input_parameter_indices_to_optimize=[(1, bits), (2, bits)])
        if rule not in self.amp_properties:
            self.amp_properties.append(rule)

    # --- override methods -----------------------------------------------------------------------------------
    @helper("op_names_to_epoch_break")
    def place_on_new_epoch(self, op_names: str | NodePredicate | list) -> None:
        """Start a new epoch at whichever of `op_names` is scheduled first."""
        self.op_names_to_epoch_break.append(_ops("place_on_new_epoch", op_names))

    @helper("op_names_to_chip_break")
    def place_on_new_chip(self, op_names: str | NodePredicate | list) -> None:
        """Start placing on the next chip at whichever of `op_names` is scheduled first."""
        self.op_names_to_chip_break.append(_ops("place_on_new_chip", op_names))

    @helper("manual_dram_queue_placement")
    def place_queue_to_chip_dram(self, dram_queue: str, *, chip_id: int | None, channel: int | None) -> None:
        """Pin a DRAM queue to a chip and/or DRAM channel."""
        where = f"place_queue_to_chip_dram({dram_queue!r})"
        _str(where, dram_queue)
        self.manual_dram_queue_placement[dram_queue] = DramQueueConfigOverride(
            _optional_int_at_least(f"{where}: chip_id", chip_id, 0),
            _optional_int_at_least(f"{where}: channel", channel, 0))

    @helper("op_names_dont_fuse")
    def dont_fuse(self, op_names: str | list[str]) -> None:
        """Exclude the ops from the fusion pass (op names or regular expressions over whole op names)."""
        self.op_names_dont_fuse.extend(_str_list("dont_fuse", op_names))

    @helper("op_names_manual_fuse")
    def manual_fuse(self, op_names: str | list[str]) -> None:
        """Only the listed ops (over all calls; op names or regular expressions over whole op names) may take
        part in fusion."""
        self.op_names_manual_fuse.extend(_str_list("manual_fuse", op_names))

    @helper("balancer_op_overrides")
    def balancer_op_override(self, op_name: str, attribute: str, value: Any) -> None:
        """Set one `OpOverride` attribute of `op_name`, checked as declared; dict values are merged into the
        existing dict."""
        _str("balancer_op_override: op_name", op_name)
        attributes = _record_attributes(OpOverride)
        if attribute not in attributes:
            raise UserInputError(f"balancer_op_override: unknown attribute {attribute!r}; legal values: "
                                 f"{', '.join(attributes)}")
        value = attributes[attribute].check(f"{_attribute_helper(attribute)}({op_name!r}): {attribute}", value)
        override = self.balancer_op_overrides.get(op_name, OpOverride())
        if isinstance(value, dict):
            value = {**getattr(override, attribute), **value}
        setattr(override, attribute, value)
        self.balancer_op_overrides[op_name] = override

    def save_intermediates(self) -> bool:
        """True when any op's output is saved (`op_intermediates_to_save`)."""
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


# option name -> its declaration, and its type hint
_OPTIONS: dict[str, Option] = {f.name: f.metadata["option"] for f in dataclasses.fields(CompilerConfig)}
_FIELD_HINTS: dict[str, Any] = typing.get_type_hints(CompilerConfig)


def _validate_field(name: str, value: Any) -> Any:
    """Type-check, normalise and range/choice-check one CompilerConfig field value, as the option declares."""
    if name not in _OPTIONS:
        raise UnknownOptionError(f"CompilerConfig has no option {name!r}{_did_you_mean(name, _OPTIONS)}")
    return _OPTIONS[name].check(name, value, _FIELD_HINTS[name])


@functools.cache
def _record_class(name: str) -> type | None:
    """The per-op override record class in option `name`'s type (OpOverride in dict[str, OpOverride]), if any."""
    def find(hint: Any) -> type | None:
        if isinstance(hint, type) and _record_attributes(hint):
            return hint
        return next((c for c in map(find, typing.get_args(hint)) if c is not None), None)
    return find(_FIELD_HINTS[name])


def _attribute_helper(attr: str) -> str:
    """The helper declared to store `balancer_op_overrides.<attr>` (it names the attribute in messages and in
    op-name references)."""
    stored = f"balancer_op_overrides.{attr}"
    return next(name for name, stores in HELPERS.items() if stored in stores)


def _jsonable(value: Any) -> Any:
    """A value as plain JSON data: enums by name, dataclasses as dicts, dict keys sorted, sets sorted."""
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


# Global config
_g_compiler_config: CompilerConfig = CompilerConfig()


def _get_global_compiler_config() -> CompilerConfig:
    """The global config that all module-level helpers change in place."""
    return _g_compiler_config


def _set_global_compiler_config(cfg: CompilerConfig) -> None:
    """Replace the global config."""
    global _g_compiler_config
    if not isinstance(cfg, CompilerConfig):
        raise UserTypeError(f"_set_global_compiler_config: expected CompilerConfig, got {type(cfg).__name__}")
    _g_compiler_config = cfg


def _clear_global_compiler_config() -> None:
    """Reset the global config to defaults (plus environment overrides)."""
    _set_global_compiler_config(CompilerConfig())


def reset_configuration() -> None:
    """Public alias of `_clear_global_compiler_config`."""
    _clear_global_compiler_config()


# set_configuration_options keyword -> the option it is declared as the alias of (`option(alias=...)`)
_KWARG_ALIASES: dict[str, str] = {decl.alias: name for name, decl in _OPTIONS.items() if decl.alias}


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
    """Set global options (the legacy keyword list); only non-None arguments are written, and nothing is written
    if any value is invalid.

    A keyword declared as an option's `alias` sets that option (accumulate_df, math_fidelity, harvested_rows: a
    list of row indices). place_on_one_row is accepted and ignored. Options with no effect yet warn
    (`IneffectiveOptionWarning`).
    """
    given = {k: v for k, v in locals().items() if k != "unknown" and v is not None}
    if unknown:
        name = next(iter(unknown))
        raise UserTypeError(f"set_configuration_options() got an unexpected keyword argument {name!r}"
                            f"{_did_you_mean(name, _SET_OPTIONS_PARAMS)}")
    if given.pop("place_on_one_row", None) is not None:
        warn_ineffective(["place_on_one_row"], "set_configuration_options")
    updates: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for key, value in given.items():
        name = _KWARG_ALIASES.get(key, key)
        convert = _OPTIONS[name].from_alias if name != key else None
        value = _validate_field(name, convert(value) if convert else value)
        if name in updates and updates[name] != value:
            raise UserInputError(f"set_configuration_options: {sources[name]}={given[sources[name]]!r} conflicts "
                                 f"with {key}={given[key]!r}")
        updates[name], sources[name] = value, key
    cfg = _get_global_compiler_config()
    for name, value in updates.items():
        object.__setattr__(cfg, name, value)
    warn_ineffective([n for n in ineffective_options(cfg) if n in updates], "set_configuration_options")


_SET_OPTIONS_PARAMS: tuple[str, ...] = tuple(
    p.name for p in inspect.signature(set_configuration_options).parameters.values()
    if p.kind is not inspect.Parameter.VAR_KEYWORD)


# Override helpers (all write to the global config)
@helper("op_names_to_epoch_break")
def set_epoch_break(op_names: str | NodePredicate | list) -> None:
    """Start a new epoch at whichever of `op_names` is scheduled first."""
    _get_global_compiler_config().place_on_new_epoch(op_names)


@helper("op_names_to_chip_break")
def set_chip_break(op_names: str | NodePredicate | list) -> None:
    """Start placing on the next chip at whichever of `op_names` is scheduled first."""
    _get_global_compiler_config().place_on_new_chip(op_names)


@helper("manual_dram_queue_placement")
def override_dram_queue_placement(dram_queue: str, *, chip_id: int | None = None,
                                  channel: int | None = None) -> None:
    """Pin a DRAM queue to a chip and/or DRAM channel."""
    _get_global_compiler_config().place_queue_to_chip_dram(dram_queue, chip_id=chip_id, channel=channel)


@helper("balancer_op_overrides.force_dram_parameters")
def override_dram_parameters(op_name: str, force_dram_parameters: bool) -> None:
    """Keep (True) or allow prologue-promotion of (False) the op's parameters in DRAM."""
    _get_global_compiler_config().balancer_op_override(op_name, "force_dram_parameters", force_dram_parameters)


@helper("balancer_op_overrides.grid_shape")
def override_op_size(op_name: str, grid_size: tuple[int, int]) -> None:
    """Force the op's grid shape to (rows, columns)."""
    _get_global_compiler_config().balancer_op_override(op_name, "grid_shape", grid_size)


@helper("balancer_op_overrides.t_stream_dir")
def override_t_stream_dir(op_name: str, direction: str | None) -> None:
    """Force the streaming direction: 'n' (or None, no streaming), 'r', 'c', 'rz' or 'cz' (case-insensitive)."""
    _get_global_compiler_config().balancer_op_override(op_name, "t_stream_dir", "n" if direction is None else direction)


@helper("balancer_op_overrides.t_stream_shape")
def override_t_stream_shape(op_name: str, shape: tuple[int, int]) -> None:
    """Force the streaming factors (r, c); one of them must be 1, (1, 1) disables streaming."""
    _get_global_compiler_config().balancer_op_override(op_name, "t_stream_shape", shape)


@helper("balancer_op_overrides.u_kt")
def override_u_kt(op_name: str, u_kt: int) -> None:
    """Force the matmul inner-dimension block size u_kt."""
    _get_global_compiler_config().balancer_op_override(op_name, "u_kt", u_kt)


@helper("balancer_op_overrides.input_buffer_multiplier")
def override_input_buffer_multiplier(op_name: str, operand_index: int, *, multiplier: int) -> None:
    """Set the input buffer multiplier of one operand (merged with earlier operands' settings)."""
    _get_global_compiler_config().balancer_op_override(op_name, "input_buffer_multiplier", {operand_index: multiplier})


@helper("balancer_op_overrides.output_buffer_multiplier")
def internal_override_output_buffer_multiplier(op_name: str, *, multiplier: int) -> None:
    """Set the output buffer multiplier (internal; may hang the legacy backend)."""
    warnings.warn("internal_override_output_buffer_multiplier is an internal API and may result in hangs",
                  stacklevel=2)
    _get_global_compiler_config().balancer_op_override(op_name, "output_buffer_multiplier", multiplier)


@helper("conv_multi_op_fracture_factor_override")
def override_multi_op_fracture_factor(op_name: str, multi_op_fracture_factor: int) -> None:
    """Split a convolution into `multi_op_fracture_factor` ops."""
    where = f"override_multi_op_fracture_factor({op_name!r})"
    _str(where, op_name)
    _int_at_least(f"{where}: multi_op_fracture_factor", multi_op_fracture_factor, 1)
    _get_global_compiler_config().conv_multi_op_fracture_factor_override[op_name] = multi_op_fracture_factor


@helper("cpu_fallback_ops")
def add_cpu_fallback_ops(op_types: str | list[str]) -> None:
    """Add op types to `cpu_fallback_ops`."""
    _get_global_compiler_config().cpu_fallback_ops.update(_str_list("add_cpu_fallback_ops", op_types))


@helper("cpu_fallback_ops")
def remove_cpu_fallback_ops(op_types: str | list[str]) -> None:
    """Remove op types from `cpu_fallback_ops` (missing ones are ignored)."""
    _get_global_compiler_config().cpu_fallback_ops.difference_update(_str_list("remove_cpu_fallback_ops", op_types))


@helper("fracture_groups")
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
            raise UserInputError(f"{where}({name!r}): need one positive factor per dim, got dims={dims} "
                             f"factors={factors}")
        normalised.append((name, dims, factors))
    if chip_ids is None or isinstance(chip_ids, (list, tuple)):
        ids = _check(f"{where}: chip_ids", list(chip_ids or []), list[int])
        per_node = {name: list(ids) for name, _, _ in normalised}
    else:
        per_node = _check(f"{where}: chip_ids", chip_ids, dict[str, list[int]])
    check_fracture_chips(where, per_node)
    _get_global_compiler_config().fracture_groups.append((normalised, per_node))


@helper("placer_op_overrides", "op_names_to_epoch_break", "op_names_to_chip_break")
def override_op_placement(op_name: str | NodePredicate, *, start: tuple[int, int] | None = None,
                          transpose_op: bool = False,
                          chip_id: int | None = None, spatial_epoch_break: bool = False,
                          temporal_epoch_break: bool = False) -> None:
    """Pin the op's start core (row, column), transpose it, pin its chip, or break the epoch before it.

    temporal_epoch_break also records an epoch break; spatial_epoch_break records a chip break (an epoch break
    when the interactive placer is off).
    """
    where = f"override_op_placement({op_name!r})"
    _expect(where, op_name, "an op name (str) or a pybuda.query predicate", isinstance(op_name, (str, NodePredicate)))
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
    """Check the arguments of a NOP-insertion helper (`where`) and store one instruction per destination."""
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


@helper("buffering_nops_to_insert")
def insert_nop(src_op: str, dest_ops: str | list[str], *, hoist_tms: bool = True, nop_count: int = 1,
               daisy_chain: bool = False) -> None:
    """Insert NOP(s) between `src_op` and each of `dest_ops` (one shared NOP unless daisy_chain)."""
    _insert_nops("insert_nop", src_op, dest_ops, hoist_tms, nop_count, daisy_chain, is_fj_buffering=False)


@helper("buffering_nops_to_insert")
def _internal_insert_fj_buffering_nop(src_op: str, dest_ops: str | list[str], *, hoist_tms: bool = True,
                                      nop_count: int = 1, daisy_chain: bool = False) -> None:
    """Like `insert_nop`, marked as fork-join buffering."""
    _insert_nops("_internal_insert_fj_buffering_nop", src_op, dest_ops, hoist_tms, nop_count, daisy_chain,
                 is_fj_buffering=True)


@helper("buffering_nops_to_insert")
def insert_buffering_nop(src_op: str, dest_ops: str | list[str], *, hoist_tms: bool = True, nop_count: int = 1,
                         daisy_chain: bool = False) -> None:
    """Deprecated alias of `_internal_insert_fj_buffering_nop`; use `insert_nop`."""
    warnings.warn("insert_buffering_nop is deprecated; use insert_nop", DeprecationWarning, stacklevel=2)
    _insert_nops("insert_buffering_nop", src_op, dest_ops, hoist_tms, nop_count, daisy_chain, is_fj_buffering=True)


@helper("scheduler_constraints")
def add_schedule_constraint(partial_ordering: list[str]) -> None:
    """Require the scheduler to place partial_ordering[i] before partial_ordering[i + 1]."""
    ordering = _check("add_schedule_constraint: partial_ordering", partial_ordering, list[str])
    if len(ordering) < 2:
        raise UserInputError(f"add_schedule_constraint: partial_ordering needs at least 2 op names, got {ordering!r}")
    _get_global_compiler_config().scheduler_constraints.append(ordering)


@helper("tvm_module_to_num_patterns")
def set_num_repeated_patterns(module_name: str, num_patterns: int) -> None:
    """Record how many repeated patterns the frontend should look for in a module."""
    _str("set_num_repeated_patterns: module_name", module_name)
    _int_at_least(f"set_num_repeated_patterns({module_name!r}): num_patterns", num_patterns, 1)
    _get_global_compiler_config().tvm_module_to_num_patterns[module_name] = num_patterns


@helper("enable_auto_transposing_placement")
def set_auto_transposing_placement(is_enabled: bool) -> None:
    """Turn automatic op transposition at placement on or off."""
    _get_global_compiler_config().enable_auto_transposing_placement = is_enabled


def _input_df_entry(where: str, value: Any) -> tuple[DataFormat, bool]:
    """One `input_df` entry of `configure_mixed_precision`: (DataFormat or its name, bool)."""
    _expect(where, value, "(DataFormat, bool)", isinstance(value, (tuple, list)) and len(value) == 2)
    return (_parse_enum(where, DataFormat, value[0]), _bool(where, value[1]))


@helper("amp_properties")
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
        raise UserInputError(f"{where}: give at least one selector: op_type, epoch_type, name_regex or is_gradient_op")
    if op_type is not None:
        _str(f"{where}: op_type", op_type)
    if epoch_type is not None and epoch_type not in EPOCH_TYPES:
        raise UserInputError(f"{where}: epoch_type: invalid value {epoch_type!r}; legal values: "
                             f"{', '.join(EPOCH_TYPES)}")
    if name_regex is not None:
        _str(f"{where}: name_regex", name_regex)
        try:
            re.compile(name_regex)
        except re.error as e:
            raise UserInputError(f"{where}: name_regex: invalid regular expression {name_regex!r}: {e}") from None
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



# Derived from the declarations: what takes effect, the training-only warnings, the tables of docs/config.md
def _takes_effect(stored: str) -> bool:
    """Whether a stored option (a field, or `<field>.<attribute>` of its override records) takes effect."""
    name, _, attr = stored.partition(".")
    return _OPTIONS[name].effective and (not attr or _record_attributes(_record_class(name))[attr].effective)


# the options and override helpers that change what the compiler does in this version
EFFECTIVE_OPTIONS: frozenset[str] = frozenset(
    [name for name, decl in _OPTIONS.items() if decl.effective]
    + [name for name, stores in HELPERS.items() if all(map(_takes_effect, stores))])


def inference_compile_warnings(config: CompilerConfig) -> list[str]:
    """A message for each option of `config` set away from its default that only acts in a training compile
    (declared with `training=`): an inference compile warns with them."""
    messages = []
    for f in dataclasses.fields(config):
        value, why = getattr(config, f.name), _OPTIONS[f.name].training
        if why and value != _field_default(f):
            setting = f.name if value is True else f"{f.name}={value!r}"
            messages.append(f"{setting} has no effect on an inference compile ({why})")
    return messages


def _row(*cells: str) -> str:
    """A markdown table row (a `|` inside a cell is escaped)."""
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _effective_cell(name: str, decl: Option) -> str:
    """The Effective cell of docs/config.md: "not yet", or "yes" with the caveat, the attributes of its override
    records that take effect, or that it acts in a training compile only."""
    if decl.inapplicable:
        return f"no: {decl.inapplicable}"
    if not decl.effective:
        return "not yet"
    notes = [decl.caveat] if decl.caveat else []
    attributes = _record_attributes(_record_class(name))
    ignored = [a for a, d in attributes.items() if not d.effective]
    if attributes:
        honoured = _names(a for a in attributes if a not in ignored)
        notes.insert(0, f"attributes {honoured}; not yet: {_names(ignored)}" if ignored else "every attribute")
    if decl.training:
        return "; ".join(["yes, in a training compile", *notes, "an inference compile warns"])
    return "yes: " + "; ".join(notes) if notes else "yes"


def fields_table() -> str:
    """The options as the Fields table of docs/config.md (`pybuda config fields`): one row per option in
    declaration order, with its declared default, meaning and effect."""
    rows = [_row("Field", "Default", "Meaning", "Effective"), "|---|---|---|---|"]
    rows += [_row(f"`{name}`", f"`{_render(decl.default)}`", decl.meaning(), _effective_cell(name, decl))
             for name, decl in _OPTIONS.items()]
    return "\n".join(rows) + "\n"


def env_table() -> str:
    """The options' environment variables as the table of docs/config.md (`pybuda config env`), in the order
    `apply_env_config_overrides` applies them."""
    rows = [_row("Variable", "Option", "Sets it to"), "|---|---|---|"]
    rows += [_row(f"`{env.name}`", f"`{name}`", env.effect()) for name, decl in _OPTIONS.items() for env in decl.env]
    return "\n".join(rows) + "\n"


# Op-name checking


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
        kinds = [_attribute_helper(attr) for attr in _record_attributes(OpOverride)
                 if getattr(override, attr) not in (None, {})]
        refs.extend((op, kind) for kind in kinds or ["balancer_op_override"])
    refs.extend((op, "override_op_placement") for op, _ in config.placer_op_overrides if isinstance(op, str))
    refs.extend((op, "set_epoch_break") for entry in config.op_names_to_epoch_break for op in entry
                if isinstance(op, str))
    refs.extend((op, "set_chip_break") for entry in config.op_names_to_chip_break for op in entry
                if isinstance(op, str))
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
    refs.extend((op, "op_intermediates_to_save") for op in config.op_intermediates_to_save)
    for producer, consumer, _ in config.insert_queues:
        refs.extend([(producer, "insert_queues"), (consumer, "insert_queues")])
    return [OpNameRef(name, kind) for name, kind in dict.fromkeys(refs)]


def resolve_predicates(config: CompilerConfig, nodes: list) -> CompilerConfig:
    """`config` with every `pybuda.query` predicate of the placement overrides and breaks replaced by the names of
    the ops among `nodes` (graph Nodes, in order) it matches: an override applies to each of them, a break entry
    lists them. OverrideError naming each predicate that matches no op."""
    unmatched: list[str] = []

    def names(entry: Any, kind: str) -> list[str]:
        if isinstance(entry, str):
            return [entry]
        found = select(entry, nodes)
        if not found:
            layers = "" if any(n.layer for n in nodes) else " (no op has a layer: layers are the PyBudaModules " \
                "that traced an op; a torch model's ops have none, name_regex matches them)"
            unmatched.append(f"  {kind}: {entry} matches no op of the device graph{layers}")
        return found

    placements = [(name, o) for op, o in config.placer_op_overrides for name in names(op, "override_op_placement")]
    epoch_breaks = [[n for op in entry for n in names(op, "set_epoch_break")]
                    for entry in config.op_names_to_epoch_break]
    chip_breaks = [[n for op in entry for n in names(op, "set_chip_break")] for entry in config.op_names_to_chip_break]
    if unmatched:
        raise OverrideError(f"{len(unmatched)} override predicate(s) match no op:\n" + "\n".join(unmatched), [])
    if (placements, epoch_breaks, chip_breaks) == (config.placer_op_overrides, config.op_names_to_epoch_break,
                                                   config.op_names_to_chip_break):
        return config
    resolved = config.copy()
    resolved.placer_op_overrides = placements
    resolved.op_names_to_epoch_break = epoch_breaks
    resolved.op_names_to_chip_break = chip_breaks
    return resolved


# overrides whose entries are op names or legacy regular expressions over whole op names
PATTERN_OVERRIDES = frozenset({"dont_fuse", "manual_fuse"})
# overrides that name an op of the framework graph (before decomposition), not a device op
FRAMEWORK_OP_OVERRIDES = frozenset({"override_multi_op_fracture_factor"})
# overrides that name an op of the decomposed framework graph, checked where they apply (`passes/fracture.py`)
DECOMPOSED_OP_OVERRIDES = frozenset({"insert_fracture_group"})


def check_override_names(config: CompilerConfig, op_names: list[str], framework: bool = False) -> None:
    """Raise OverrideError listing each override that names an op not in `op_names`, with the closest names;
    `framework`: the overrides naming framework ops (FRAMEWORK_OP_OVERRIDES), else the others."""
    known = set(op_names)
    unknown = [ref for ref in referenced_op_names(config)
               if (ref.kind in FRAMEWORK_OP_OVERRIDES) == framework and ref.kind not in DECOMPOSED_OP_OVERRIDES
               and ref not in known
               and not (ref.kind in PATTERN_OVERRIDES and any(pattern_matches(ref, n) for n in op_names))]
    if not unknown:
        return
    lines = []
    for ref in unknown:
        close = _close(str(ref), sorted(known))
        hint = f"closest: {', '.join(repr(c) for c in close)}" if close else "no similar op names"
        lines.append(f"  {ref.describe()}: no op named {str(ref)!r} in the graph; {hint}")
    raise OverrideError(f"{len(unknown)} override(s) name unknown ops:\n" + "\n".join(lines), unknown)
