"""Program rules (netlist-format.md §2, §3.6): instructions, variables, loops, and each execute's queue settings."""
from __future__ import annotations

from ..model import VARINST_OPCODES, EndLoop, Execute, Loop, Param, Program, QueueAlloc, Var, VarInst
from .registry import Context, rule, truthy

_BOOL_SETTINGS = ("prologue", "epilogue", "zero", "read_only")
_PTR_SETTINGS = ("rd_ptr_local", "rd_ptr_global", "wr_ptr_global", "rd_ptr_autoinc", "global_rdptr_autoinc",
                 "global_wrptr_autoinc")


def _is_var(v) -> bool:
    return isinstance(v, str) and v.startswith("$")


@rule("program.empty", on=Program, section="§2")
def program_empty(c: Context, p: Program) -> None:
    """A program has at least one instruction (the other program rules skip an empty one)."""
    if not p.instructions:
        c.fail(p, "a program needs at least one instruction", ">= 1 instruction", 0)


def _instructions(p: Program):
    """(index, instruction, loop depth at it) of a program's instructions."""
    depth = 0
    for idx, ins in enumerate(p.instructions):
        yield idx, ins, depth
        if isinstance(ins, Loop):
            depth += 1
        elif isinstance(ins, EndLoop) and depth:
            depth -= 1


@rule("program.param_first", on=Program, section="§2")
def program_param_first(c: Context, p: Program) -> None:
    """param is the first instruction."""
    for idx, ins, _ in _instructions(p):
        if isinstance(ins, Param) and idx != 0:
            c.fail(p, "param must be the first instruction of a program", 0, idx, line=ins.line)


@rule("program.var_name", on=Program, section="§2")
def program_var_name(c: Context, p: Program) -> None:
    """Variables (var, staticvar, varinst outputs) are named $name."""
    for _, ins, _ in _instructions(p):
        if isinstance(ins, Var):
            for v in ins.vars:
                if not _is_var(v):
                    c.fail(p, f"variable names start with $: {v!r}", "$name", v, line=ins.line)
        elif isinstance(ins, VarInst) and ins.op not in ("inc", "incwrap") and not _is_var(ins.dst):
            c.fail(p, f"varinst output {ins.dst!r} must be a $variable", "$name", ins.dst, line=ins.line)


@rule("program.var_redeclared", on=Program, section="§2")
def program_var_redeclared(c: Context, p: Program) -> None:
    """A variable is declared (param, var, staticvar) once."""
    declared: set = set()
    for _, ins, _ in _instructions(p):
        if isinstance(ins, VarInst) and ins.op not in ("inc", "incwrap") and _is_var(ins.dst):
            declared.add(ins.dst)
        names = ins.names if isinstance(ins, Param) else ins.vars if isinstance(ins, Var) else ()
        for v in names:
            if v in declared:
                c.fail(p, f"variable {v!r} is declared twice", "a new name", v, line=ins.line)
            declared.add(v)


@rule("program.const_in_loop", on=Program, section="§2")
def program_const_in_loop(c: Context, p: Program) -> None:
    """A $c_ constant is neither initialized nor modified inside a loop."""
    for _, ins, depth in _instructions(p):
        if not depth:
            continue
        if isinstance(ins, Var):
            for v in ins.vars:
                if v.startswith("$c_"):
                    c.fail(p, f"constant {v!r} may not be initialized inside a loop", "outside loops",
                           f"loop depth {depth}", line=ins.line)
        elif isinstance(ins, VarInst) and ins.dst.startswith("$c_"):
            c.fail(p, f"constant {ins.dst!r} may not be modified inside a loop", "outside loops",
                   f"loop depth {depth}", line=ins.line)


@rule("program.varinst", on=Program, section="§2")
def program_varinst(c: Context, p: Program) -> None:
    """A varinst has a legal opcode with its operand count, integer or variable operands."""
    for _, ins, _ in _instructions(p):
        if not isinstance(ins, VarInst):
            continue
        want = VARINST_OPCODES.get(ins.op)
        if want is None:
            c.fail(p, f"invalid varinst opcode {ins.op!r}", "one of " + ", ".join(VARINST_OPCODES), ins.op,
                   line=ins.line)
        elif len(ins.args) != want:
            c.fail(p, f"varinst {ins.op} takes {want} operand(s) after the output", want, len(ins.args),
                   line=ins.line)
        for arg in ins.args:
            if not isinstance(arg, (int, str)) or isinstance(arg, bool):
                c.fail(p, f"varinst operand {arg!r} must be an integer or a variable", "int or $var", arg,
                       line=ins.line)


@rule("program.loop_count", on=Program, section="§2")
def program_loop_count(c: Context, p: Program) -> None:
    """loop takes a count >= 1 or a variable."""
    for _, ins, _ in _instructions(p):
        if not isinstance(ins, Loop):
            continue
        cnt = ins.count
        if isinstance(cnt, bool) or not isinstance(cnt, (int, str)) or (isinstance(cnt, int) and cnt < 1) or \
                (isinstance(cnt, str) and not cnt.startswith("$")):
            c.fail(p, "loop needs a count >= 1 or a variable", ">= 1 or $var", cnt, line=ins.line)


@rule("program.loop_balance", on=Program, section="§2")
def program_loop_balance(c: Context, p: Program) -> None:
    """Every loop is closed by an endloop, and every endloop closes a loop."""
    open_lines: list = []
    for _, ins, _ in _instructions(p):
        if isinstance(ins, Loop):
            open_lines.append(ins.line)
        elif isinstance(ins, EndLoop):
            if not open_lines:
                c.fail(p, "endloop without a loop", "a matching loop", "endloop", line=ins.line)
            else:
                open_lines.pop()
    if open_lines:
        c.fail(p, f"{len(open_lines)} loop(s) are not closed by endloop", 0, len(open_lines), line=open_lines[-1])


@rule("program.undefined_var", on=Program, section="§2")
def program_undefined_var(c: Context, p: Program) -> None:
    """A variable is read (loop count, varinst operand or inc target, queue setting) only after a param, var,
    staticvar or varinst set/add/mul defines it."""
    declared: set = set()

    def use(v, ins, what: str):
        if _is_var(v) and v not in declared:
            c.fail(p, f"{what} uses variable {v!r} before it is declared", "a declared variable", v, line=ins.line)

    for _, ins, _ in _instructions(p):
        if isinstance(ins, (Param, Var)):
            declared.update(ins.names if isinstance(ins, Param) else ins.vars)
        elif isinstance(ins, VarInst):
            for arg in ins.args:
                use(arg, ins, "varinst")
            if ins.op in ("inc", "incwrap"):
                use(ins.dst, ins, "varinst")      # read-modify-write
            elif _is_var(ins.dst):
                declared.add(ins.dst)             # set/add/mul create a local variable if needed
        elif isinstance(ins, Loop) and isinstance(ins.count, str) and ins.count.startswith("$"):
            use(ins.count, ins, "loop")
        elif isinstance(ins, Execute) and ins.graph_name in c.n.graphs:
            for qname, s in ins.queue_settings.items():
                if qname not in c.n.queues:
                    continue
                for f in (*_BOOL_SETTINGS, *_PTR_SETTINGS):
                    use(getattr(s, f), ins, f"queue_settings {qname}.{f}")


@rule("program.unknown_queue", on=Program, section="§2")
def program_unknown_queue(c: Context, p: Program) -> None:
    """allocate_queue / deallocate_queue name queues of the netlist."""
    for _, ins, _ in _instructions(p):
        if isinstance(ins, QueueAlloc):
            for q in ins.queues:
                if q not in c.n.queues:
                    c.fail(p, f"{ins.opcode} names queue {q!r} which does not exist", "a queue of this netlist", q,
                           line=ins.line)


@rule("program.unknown_graph", on=Program, section="§2")
def program_unknown_graph(c: Context, p: Program) -> None:
    """execute names a graph of the netlist (the queue-settings rules skip an execute that does not)."""
    for _, ins, _ in _instructions(p):
        if isinstance(ins, Execute) and ins.graph_name not in c.n.graphs:
            c.fail(p, f"execute names graph {ins.graph_name!r} which does not exist", "a graph of this netlist",
                   ins.graph_name, line=ins.line)


# --- queue settings of an execute ----------------------------------------------------------------------------------

def _settings(c: Context, p: Program):
    """(execute, queue name, its settings, the queue, the line) of every queue setting of a program's executes
    of existing graphs that names an existing queue."""
    for _, ins, _ in _instructions(p):
        if not isinstance(ins, Execute) or ins.graph_name not in c.n.graphs:
            continue
        for qname, s in ins.queue_settings.items():
            q = c.n.queues.get(qname)
            if q is not None:
                yield ins, qname, s, q, s.line or ins.line


def _executes(c: Context, p: Program):
    return (ins for _, ins, _ in _instructions(p) if isinstance(ins, Execute) and ins.graph_name in c.n.graphs)


@rule("queue_settings.unknown_queue", on=Program, section="§3.6")
def queue_settings_unknown_queue(c: Context, p: Program) -> None:
    """queue_settings name queues of the netlist."""
    for ins in _executes(c, p):
        for qname, s in ins.queue_settings.items():
            if qname not in c.n.queues:
                c.fail(p, f"queue_settings for {qname!r} which is not a queue", "a queue of this netlist", qname,
                       line=s.line or ins.line)


@rule("queue_settings.not_graph_io", on=Program, section="§3.6")
def queue_settings_not_graph_io(c: Context, p: Program) -> None:
    """queue_settings name queues the executed graph reads or writes."""
    for ins, qname, _, _, line in _settings(c, p):
        if qname not in c.graph_io.get(ins.graph_name, set()):
            c.fail(p, f"queue_settings for {qname!r}, which graph {ins.graph_name} neither reads nor writes",
                   f"an input or output queue of {ins.graph_name}", qname, line=line)


@rule("queue_settings.rd_ptr_global", on=Program, section="§3.6")
def queue_settings_rd_ptr_global(c: Context, p: Program) -> None:
    """Every queue setting has rd_ptr_global."""
    for _, qname, s, _, line in _settings(c, p):
        if s.rd_ptr_global is None:
            c.fail(p, f"queue_settings for {qname!r} need rd_ptr_global", "rd_ptr_global", None, line=line)


@rule("queue_settings.queue_ptrs", on=Program, section="§3.6")
def queue_settings_queue_ptrs(c: Context, p: Program) -> None:
    """A `queue` has rd_ptr_local and no wr_ptr_global."""
    for _, qname, s, q, line in _settings(c, p):
        if q.type != "queue":
            continue
        if s.wr_ptr_global is not None:
            c.fail(p, f"{qname!r} is a queue: wr_ptr_global is only for rams", "no wr_ptr_global", s.wr_ptr_global,
                   line=line)
        if s.rd_ptr_local is None:
            c.fail(p, f"{qname!r} is a queue: it needs rd_ptr_local and rd_ptr_global", "rd_ptr_local", None,
                   line=line)


@rule("queue_settings.epilogue_op_fed", on=Program, section="§3.6")
def queue_settings_epilogue_op_fed(c: Context, p: Program) -> None:
    """An op-fed `queue` is not epilogued."""
    for _, qname, s, q, line in _settings(c, p):
        if q.type == "queue" and truthy(s.epilogue) and q.fed_by_op:
            c.fail(p, f"{qname!r} is an op-fed queue: epilogue: true is not supported", "epilogue false", s.epilogue,
                   line=line)


@rule("queue_settings.ram_ptrs", on=Program, section="§3.6")
def queue_settings_ram_ptrs(c: Context, p: Program) -> None:
    """A ram has wr_ptr_global and no rd_ptr_local."""
    for _, qname, s, q, line in _settings(c, p):
        if q.type == "queue":
            continue
        if s.rd_ptr_local is not None:
            c.fail(p, f"{qname!r} is a ram: rd_ptr_local is only for queues", "no rd_ptr_local", s.rd_ptr_local,
                   line=line)
        if s.wr_ptr_global is None:
            c.fail(p, f"{qname!r} is a ram: it needs rd_ptr_global and wr_ptr_global", "wr_ptr_global", None,
                   line=line)


@rule("queue_settings.autoinc", on=Program, section="§3.6")
def queue_settings_autoinc(c: Context, p: Program) -> None:
    """rd_ptr_autoinc and global_rdptr_autoinc are equal when both are set."""
    for _, qname, s, q, line in _settings(c, p):
        default_rd = "1" if q.type == "queue" else "0"
        rd = str(s.rd_ptr_autoinc) if s.rd_ptr_autoinc is not None else default_rd
        grd = str(s.global_rdptr_autoinc) if s.global_rdptr_autoinc is not None else "0"
        if grd != "0" and rd != "0" and rd != grd:
            c.fail(p, f"{qname!r}: rd_ptr_autoinc and global_rdptr_autoinc must be equal when both are set", grd,
                   rd, line=line)


@rule("queue_settings.static", on=Program, section="§3.6")
def queue_settings_static(c: Context, p: Program) -> None:
    """prologue and epilogue are not runtime parameters."""
    params: set = set()
    for _, ins, _ in _instructions(p):
        if isinstance(ins, Param):
            params.update(ins.names)
        elif isinstance(ins, Execute) and ins.graph_name in c.n.graphs:
            for qname, s in ins.queue_settings.items():
                for f in ("prologue", "epilogue") if qname in c.n.queues else ():
                    v = getattr(s, f)
                    if _is_var(v) and v in params:
                        c.fail(p, f"{qname!r}: {f} cannot be a runtime parameter", "a constant", v,
                               line=s.line or ins.line)


@rule("queue_settings.value", on=Program, section="§3.6")
def queue_settings_value(c: Context, p: Program) -> None:
    """Boolean settings are booleans or variables, pointer settings integers or variables."""
    for _, qname, s, _, line in _settings(c, p):
        for f in _BOOL_SETTINGS:
            v = getattr(s, f)
            if v is None or _is_var(v):
                continue
            if not (isinstance(v, bool) or (isinstance(v, int) and v in (0, 1)) or
                    (isinstance(v, str) and v.lower() in ("true", "false"))):
                c.fail(p, f"{qname!r}: {f} must be a boolean or a variable", "true/false/$var", v, line=line)
        for f in _PTR_SETTINGS:
            v = getattr(s, f)
            if v is not None and not _is_var(v) and (isinstance(v, bool) or not isinstance(v, int)):
                c.fail(p, f"{qname!r}: {f} must be an integer or a variable", "int or $var", v, line=line)


@rule("queue_settings.missing", on=Program, section="§3.6")
def queue_settings_missing(c: Context, p: Program) -> None:
    """An execute has queue_settings for every HOST-fed `queue` its graph reads."""
    for ins in _executes(c, p):
        for qname in sorted(c.graph_io.get(ins.graph_name, set())):
            q = c.n.queues[qname]
            if qname not in ins.queue_settings and q.input == "HOST" and q.type == "queue":
                c.fail(p, f"execute of {ins.graph_name} has no queue_settings for input queue {qname!r}",
                       f"queue_settings for {qname}", None, line=ins.line)


@rule("queue_settings.gradient_missing", on=Program, section="§3.6")
def queue_settings_gradient_missing(c: Context, p: Program) -> None:
    """An execute has queue_settings for every queue a gradient op of its graph writes."""
    grad_queues: dict = {}
    for qname, q in c.n.queues.items():
        op = c.ops.get(q.input) if q.fed_by_op else None
        if op is not None and op.gradient_op:
            grad_queues.setdefault(op.graph, []).append(qname)
    for ins in _executes(c, p):
        for qname in grad_queues.get(ins.graph_name, []):
            if qname not in ins.queue_settings:
                c.fail(p, f"execute of {ins.graph_name}: gradient output queue {qname!r} needs a queue_setting",
                       f"queue_settings for {qname}", None, line=ins.line)
