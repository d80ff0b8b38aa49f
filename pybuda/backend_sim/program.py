"""Interpreter for netlist programs (netlist-format.md §2): variables, loops, execute and queue lifetime.

It runs the typed instructions of a `pybuda.netlist.Program` (Var, Param, VarInst, Loop ... EndLoop, Execute,
QueueAlloc, EndProgram); loops nest by matching each Loop with its EndLoop. The interpreter owns control flow
and variables; what an `execute` does is up to a listener (the numeric executor or the timing model).
"""
from __future__ import annotations

import dataclasses
from typing import Any, Mapping, Protocol

from pybuda.netlist import EndLoop, Execute, Loop, Param, Program, QueueAlloc, QueueSettings, Var, VarInst
from pybuda.netlist.model import VARINST_OPCODES
from pybuda.netlist.schema import record_items

from .errors import SimulatorError


@dataclasses.dataclass(frozen=True)
class QueueSetting:
    """One queue's `queue_settings` of an execute: as written (values may be `$variables`) and their values when
    the execute ran (only the fields that are set)."""

    queue: str
    written: QueueSettings
    values: Mapping[str, int]

    def get(self, field: str, default: int | None = None) -> int | None:
        return self.values.get(field, default)

    def flag(self, field: str) -> bool:
        return bool(self.values.get(field, 0))

    def reads_variable(self, field: str, variable: str) -> bool:
        """True if `field` is written as the program variable `variable` (e.g. rd_ptr_global: $ptr)."""
        value = getattr(self.written, field)
        return isinstance(value, str) and value.strip() == variable


class ProgramListener(Protocol):
    """What the interpreter reports; `begin_repeat`/`end_repeat` are used only with `loop_shortcut`."""

    def execute(self, graph: str, settings: Mapping[str, QueueSetting]) -> None: ...

    def variable_changed(self, name: str, value: int) -> None: ...

    def allocate(self, queues: list[str], allocate: bool) -> None: ...


def param_names(program: Program) -> list[str]:
    """The program's `param` variables (with their '$')."""
    return [name for ins in program.instructions if isinstance(ins, Param) for name in ins.names]


class ProgramRunner:
    """Runs one program once.

    params: values for `param` variables (names with or without the leading '$'); a missing one is an error
    unless `default_param` is given. statics: the program's persistent `staticvar` store (mutated in place).
    loop_shortcut: for loops whose body cannot change any loop count, run the body once and ask the listener to
    repeat what it recorded (listener.begin_repeat() / listener.end_repeat(n)); used by the timing model.
    """

    def __init__(self, program: Program, listener: Any, *, params: Mapping[str, Any] | None = None,
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
        self._ends = _loop_ends(program)
        self._loop_count_vars = {ins.count.strip() for ins in program.instructions
                                 if isinstance(ins, Loop) and isinstance(ins.count, str)
                                 and ins.count.strip().startswith("$")}

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
        self._block(0, len(self.program.instructions))

    def _block(self, start: int, stop: int) -> None:
        """Run instructions [start, stop); a Loop runs its body up to its EndLoop, then execution goes on after."""
        instructions = self.program.instructions
        i = start
        while i < stop:
            ins = instructions[i]
            if isinstance(ins, Loop):
                end = self._ends[i]
                self._loop(ins, i + 1, end)
                i = end + 1
            else:
                self._instr(ins)
                i += 1

    def _loop(self, loop: Loop, start: int, stop: int) -> None:
        count = self.resolve(loop.count)
        if count < 1:
            raise SimulatorError(f"program {self.program.name!r}: loop count {loop.count!r} = {count}; must be >= 1")
        if self.loop_shortcut and count > 1 and not (self._assigned_vars(start, stop) & self._loop_count_vars):
            self.listener.begin_repeat()
            self._block(start, stop)
            self.listener.end_repeat(count)
            return
        for _ in range(count):
            self._iterations += 1
            if self._iterations > self.max_loop_iterations:
                raise SimulatorError(f"program {self.program.name!r}: more than {self.max_loop_iterations} loop "
                                     f"iterations")
            self._block(start, stop)

    def _assigned_vars(self, start: int, stop: int) -> set[str]:
        """Variables that instructions [start, stop) (nested loops included) declare or assign."""
        out: set[str] = set()
        for ins in self.program.instructions[start:stop]:
            if isinstance(ins, VarInst):
                out.add(ins.dst)
            elif isinstance(ins, Var):
                out |= set(ins.vars)
            elif isinstance(ins, Param):
                out |= set(ins.names)
        return out

    def _declare(self, ins: Var, store: dict[str, int] | None) -> None:
        for name, init in ins.vars.items():
            if not name.startswith("$"):
                raise SimulatorError(f"program {self.program.name!r}: {ins.opcode} name {name!r} must start with '$'")
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

    def _instr(self, ins: Any) -> None:
        if isinstance(ins, Execute):
            settings = {}
            for queue, written in ins.queue_settings.items():
                values = {key: self.resolve(v) for key, v in record_items(written)}
                settings[queue] = QueueSetting(queue=queue, written=written, values=values)
            self.listener.execute(ins.graph_name, settings)
        elif isinstance(ins, VarInst):
            self._varinst(ins)
        elif isinstance(ins, Var):
            self._declare(ins, self.statics if ins.opcode == "staticvar" else None)
        elif isinstance(ins, Param):
            for name in ins.names:
                if name in self.params:
                    self.vars[name] = self.resolve(self.params[name])
                elif self.default_param is not None:
                    self.vars[name] = self.default_param
                else:
                    raise SimulatorError(f"program {self.program.name!r} needs parameter {name}; pass it to "
                                         f"run(), e.g. run({name.lstrip('$')}=1)")
        elif isinstance(ins, QueueAlloc):
            self.listener.allocate(list(ins.queues), ins.opcode == "allocate_queue")
        # EndProgram: nothing to do

    def _varinst(self, ins: VarInst) -> None:
        where = f"program {self.program.name!r}: varinst [{ins.dst}, {ins.op}, {', '.join(map(str, ins.args))}]"
        need = VARINST_OPCODES.get(ins.op)
        if need is None:
            raise SimulatorError(f"{where}: unknown opcode {ins.op!r}; legal: {', '.join(VARINST_OPCODES)}")
        if len(ins.args) != need:
            raise SimulatorError(f"{where}: {ins.op} takes {need} operand(s)")
        vals = [self.resolve(v) for v in ins.args]
        if ins.op == "set":
            value = vals[0]
        elif ins.op == "add":
            value = vals[0] + vals[1]
        elif ins.op == "mul":
            value = vals[0] * vals[1]
        elif ins.op == "inc":
            value = self.resolve(ins.dst) + vals[0]
        else:
            if vals[1] == 0:
                raise SimulatorError(f"{where}: incwrap with wrap 0")
            value = (self.resolve(ins.dst) + vals[0]) % vals[1]
        self._set(ins.dst, value)


def _loop_ends(program: Program) -> dict[int, int]:
    """Index of the EndLoop closing each Loop (by the Loop's index); SimulatorError if they do not match."""
    ends: dict[int, int] = {}
    open_loops: list[int] = []
    for i, ins in enumerate(program.instructions):
        if isinstance(ins, Loop):
            open_loops.append(i)
        elif isinstance(ins, EndLoop):
            if not open_loops:
                raise SimulatorError(f"program {program.name!r}: endloop without loop")
            ends[open_loops.pop()] = i
    if open_loops:
        raise SimulatorError(f"program {program.name!r}: loop without endloop")
    return ends
