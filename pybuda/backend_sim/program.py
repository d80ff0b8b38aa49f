"""Interpreter for netlist programs (netlist-format.md §2): variables, loops, execute and queue lifetime.

The interpreter owns control flow and variables; what an `execute` does is up to a listener (the numeric
executor or the timing model).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Protocol

from .errors import SimulatorError
from .netlist_io import Instr, Loop, ProgramDef

QUEUE_SETTING_FIELDS = ("prologue", "epilogue", "zero", "rd_ptr_local", "rd_ptr_global", "wr_ptr_global",
                        "rd_ptr_autoinc", "global_rdptr_autoinc", "global_wrptr_autoinc", "read_only")


@dataclasses.dataclass(frozen=True)
class QueueSetting:
    """One queue's `queue_settings` entry of an execute: raw YAML values and their values when executed."""

    queue: str
    raw: Mapping[str, Any]
    values: Mapping[str, int]

    def get(self, field: str, default: int | None = None) -> int | None:
        return self.values.get(field, default)

    def flag(self, field: str) -> bool:
        return bool(self.values.get(field, 0))


class ProgramListener(Protocol):
    """What the interpreter reports; `begin_repeat`/`end_repeat` are used only with `loop_shortcut`."""

    def execute(self, graph: str, settings: Mapping[str, QueueSetting]) -> None: ...

    def variable_changed(self, name: str, value: int) -> None: ...

    def allocate(self, queues: list[str], allocate: bool) -> None: ...


class ProgramRunner:
    """Runs one program once.

    params: values for `param` variables (names with or without the leading '$'); a missing one is an error
    unless `default_param` is given. statics: the program's persistent `staticvar` store (mutated in place).
    loop_shortcut: for loops whose body cannot change any loop count, run the body once and ask the listener to
    repeat what it recorded (listener.begin_repeat() / listener.end_repeat(n)); used by the timing model.
    """

    def __init__(self, program: ProgramDef, listener: Any, *, params: Mapping[str, Any] | None = None,
                 statics: dict[str, int] | None = None, default_param: int | None = None,
                 loop_shortcut: bool = False, max_loop_iterations: int = 10_000_000):
        self.program = program
        self.listener = listener
        self.params = {(k if str(k).startswith("$") else f"${k}"): v for k, v in (params or {}).items()}
        self.statics = statics if statics is not None else {}
        self.default_param = default_param
        self.loop_shortcut = loop_shortcut
        self.max_loop_iterations = max_loop_iterations
        self.vars: dict[str, int] = {}
        self._iterations = 0
        self._loop_count_vars = _loop_count_vars(program.body)

    # -- values -------------------------------------------------------------------------------------------
    def resolve(self, value: Any) -> int:
        """Integer value of an instruction argument: a $variable, an int, or a bool/int literal."""
        if isinstance(value, bool):
            return int(value)
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            s = value.strip()
            if s.startswith("$"):
                if s not in self.vars:
                    raise SimulatorError(f"program {self.program.name!r}: variable {s} is not declared")
                return self.vars[s]
            low = s.lower()
            if low in ("true", "false"):
                return int(low == "true")
            try:
                return int(s, 0)
            except ValueError:
                pass
        raise SimulatorError(f"program {self.program.name!r}: cannot evaluate {value!r}")

    # -- execution -----------------------------------------------------------------------------------------
    def run(self) -> None:
        self._block(self.program.body)

    def _block(self, body: tuple) -> None:
        for node in body:
            if isinstance(node, Loop):
                self._loop(node)
            else:
                self._instr(node)

    def _loop(self, node: Loop) -> None:
        count = self.resolve(node.count)
        if count < 1:
            raise SimulatorError(f"program {self.program.name!r}: loop count {node.count!r} = {count}; must be >= 1")
        if self.loop_shortcut and count > 1 and not (_assigned_vars(node.body) & self._loop_count_vars):
            self.listener.begin_repeat()
            self._block(node.body)
            self.listener.end_repeat(count)
            return
        for _ in range(count):
            self._iterations += 1
            if self._iterations > self.max_loop_iterations:
                raise SimulatorError(f"program {self.program.name!r}: more than {self.max_loop_iterations} loop "
                                     f"iterations")
            self._block(node.body)

    def _declare(self, args: Any, store: dict[str, int] | None, kind: str) -> None:
        items = args.items() if isinstance(args, Mapping) else ((a, 0) for a in (args or []))
        for name, init in items:
            name = str(name)
            if not name.startswith("$"):
                raise SimulatorError(f"program {self.program.name!r}: {kind} name {name!r} must start with '$'")
            if store is not None:  # staticvar: initialised once, then persistent
                if name not in store:
                    store[name] = self.resolve(init)
                self.vars[name] = store[name]
                continue
            if name in self.vars:
                raise SimulatorError(f"program {self.program.name!r}: variable {name} declared twice")
            self.vars[name] = self.resolve(init)

    def _set(self, name: str, value: int) -> None:
        if not name.startswith("$"):
            raise SimulatorError(f"program {self.program.name!r}: varinst target {name!r} must start with '$'")
        # The backend accepts a varinst on an undeclared variable (it declares it); reads still need a value.
        self.vars[name] = value
        if name in self.statics:
            self.statics[name] = value
        self.listener.variable_changed(name, value)

    def _instr(self, ins: Instr) -> None:
        op, args = ins.opcode, ins.args
        if op == "var":
            self._declare(args, None, "var")
        elif op == "staticvar":
            self._declare(args, self.statics, "staticvar")
        elif op == "param":
            for name in (args or []):
                name = str(name)
                if name in self.params:
                    self.vars[name] = self.resolve(self.params[name])
                elif self.default_param is not None:
                    self.vars[name] = self.default_param
                else:
                    raise SimulatorError(f"program {self.program.name!r} needs parameter {name}; pass it to "
                                         f"run(), e.g. run({name.lstrip('$')}=1)")
        elif op == "varinst":
            self._varinst(args)
        elif op == "execute":
            settings = {}
            for q, raw in (args.get("queue_settings") or {}).items():
                raw = dict(raw or {})
                values = {f: self.resolve(v) for f, v in raw.items() if f in QUEUE_SETTING_FIELDS}
                settings[str(q)] = QueueSetting(queue=str(q), raw=raw, values=values)
            self.listener.execute(str(args["graph_name"]), settings)
        elif op in ("allocate_queue", "deallocate_queue"):
            names = [str(n) for n in (args if isinstance(args, list) else [args])]
            self.listener.allocate(names, op == "allocate_queue")
        elif op == "endprogram":
            pass

    def _varinst(self, args: Any) -> None:
        if not isinstance(args, list) or len(args) < 3:
            raise SimulatorError(f"program {self.program.name!r}: varinst needs [$out, opcode, operands...], "
                                 f"got {args!r}")
        out, opcode, operands = str(args[0]), str(args[1]), args[2:]
        need = {"set": 1, "add": 2, "mul": 2, "inc": 1, "incwrap": 2}
        if opcode not in need:
            raise SimulatorError(f"program {self.program.name!r}: unknown varinst opcode {opcode!r}; legal: "
                                 f"{', '.join(need)}")
        if len(operands) != need[opcode]:
            raise SimulatorError(f"program {self.program.name!r}: varinst {opcode} takes {need[opcode]} operand(s), "
                                 f"got {args!r}")
        vals = [self.resolve(v) for v in operands]
        if opcode == "set":
            value = vals[0]
        elif opcode == "add":
            value = vals[0] + vals[1]
        elif opcode == "mul":
            value = vals[0] * vals[1]
        elif opcode == "inc":
            value = self.resolve(out) + vals[0]
        else:
            if vals[1] == 0:
                raise SimulatorError(f"program {self.program.name!r}: incwrap with wrap 0 in {args!r}")
            value = (self.resolve(out) + vals[0]) % vals[1]
        self._set(out, value)


def _assigned_vars(body: tuple) -> set[str]:
    out: set[str] = set()
    for node in body:
        if isinstance(node, Loop):
            out |= _assigned_vars(node.body)
        elif node.opcode == "varinst" and isinstance(node.args, list) and node.args:
            out.add(str(node.args[0]))
        elif node.opcode in ("var", "staticvar", "param"):
            args = node.args
            out |= {str(a) for a in (args.keys() if isinstance(args, Mapping) else (args or []))}
    return out


def _loop_count_vars(body: tuple) -> set[str]:
    out: set[str] = set()
    for node in body:
        if isinstance(node, Loop):
            if isinstance(node.count, str) and node.count.strip().startswith("$"):
                out.add(node.count.strip())
            out |= _loop_count_vars(node.body)
    return out
