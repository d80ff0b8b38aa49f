"""The netlist's programs (netlist-format.md §2): the queue settings of every execute, the pointer variables of
the queues the device reads as FIFOs, and the allocation of dynamic epoch-to-epoch queues.

Inference: one program, `run_fwd_0`, running every epoch in a loop of `$p_loop_count` microbatches; with
`compile_subgraphs`, one program `run_fwd_<k>` per disjoint subgraph, over its own epochs. With paged
state (`passes/loopback.py`) a program that writes a page also takes `$p_cache_write_index`, the page each state's
writer view writes (held in `$v_cache_write_index`); the readers' view is read-only and streamed (not prologued:
it changes). With microbatch B, sample b reads the readers' entry b and writes the writer's entry b * pages past
the write index (`global_rdptr_autoinc` 1, `global_wrptr_autoinc` pages).

Training, as the legacy training netlists: `run_fwd` (the forward epochs, `$p_microbatch_count` times), `run_bwd`
(the backward epochs; `$p_zero_grad` zeroes the gradient accumulators on its first microbatch, the gradient ops
sum into them after) and `run_opt` (the optimizer epochs, once). A FIFO queue that several programs read (a graph
input the backward epochs read again) is popped only by the last of them: the others read it through a local
pointer and keep its global read pointer in a shadow variable. Each program's pointer variables carry its own
prefix, so one program's pointer updates never move a queue another program set up.
"""
from __future__ import annotations

import dataclasses

from ..netlist.model import EndLoop, Execute, Loop, Param, Program, QueueAlloc, QueueSettings, Var, VarInst

PROGRAMS = {"forward": ("run_fwd", "f"), "backward": ("run_bwd", "b"), "optimizer": ("run_opt", "o")}
WRITE_INDEX_PARAM = "$p_cache_write_index"   # the page a paged state's writer view writes this run
WRITE_INDEX_VAR = "$v_cache_write_index"


def _ram_settings(prologue: bool = False, zero: bool | str = False) -> QueueSettings:
    return QueueSettings(prologue=prologue, epilogue=False, zero=zero, rd_ptr_global="$c_zero", wr_ptr_global="$c_zero")


class ProgramBuilder:
    """Programs over the epochs' graphs: `reads[epoch]` and `writes[epoch]` are the queues each epoch's ops read and
    the rams they write; `queues` the netlist's queues; `dynamic` the queues allocated per program run, with their
    (first, last) epoch; `prologue` the rams held in L1 for an epoch."""

    def __init__(self, queues: dict, reads: dict[int, list[str]], writes: dict[int, list[str]], graph_names: dict,
                 dynamic: dict[str, tuple[int, int]], prologue: dict[str, bool], microbatch: int,
                 pages: dict[str, str] | None = None):
        self.queues, self.reads, self.writes = queues, reads, writes
        self.graph_names, self.dynamic, self.prologue, self.microbatch = graph_names, dynamic, prologue, microbatch
        self.pages = pages or {}     # paged state (readers' view) -> its writer view

    def _fifo(self, epochs: list[int]) -> list[str]:
        read = {q for e in epochs for q in self.reads.get(e, ())}
        return [q for q in self.queues if self.queues[q].type == "queue" and q in read]

    def _body(self, epochs: list[int], ptr: dict[str, str], zeroed: frozenset = frozenset()) -> list:
        allocate: dict[int, list[str]] = {}
        free: dict[int, list[str]] = {}
        for q, (first, last) in self.dynamic.items():
            allocate.setdefault(first, []).append(q)
            free.setdefault(last, []).append(q)
        body: list = []
        for epoch in epochs:
            settings = {}
            for q in dict.fromkeys([*self.reads.get(epoch, ()), *self.writes.get(epoch, ())]):
                if self.queues[q].type == "queue":
                    settings[q] = QueueSettings(prologue=False, epilogue=False, zero=False,
                                                rd_ptr_local=f"$lptr_{ptr[q]}", rd_ptr_global=f"$gptr_{ptr[q]}")
                elif q in zeroed:
                    settings[q] = _ram_settings(zero="$v_zero_grad")
                elif q in self.pages:       # sample b reads entry b
                    settings[q] = dataclasses.replace(_ram_settings(), read_only=True,
                                                      global_rdptr_autoinc=1 if self.microbatch > 1 else None)
                elif q in self.pages.values():  # sample b writes entry b * pages past the write index
                    stride = self.queues[q].entries // self.microbatch
                    settings[q] = dataclasses.replace(_ram_settings(), wr_ptr_global=WRITE_INDEX_VAR,
                                                      global_wrptr_autoinc=stride if self.microbatch > 1 else None)
                else:
                    settings[q] = _ram_settings(prologue=self.prologue.get(q, False))
            if epoch in allocate:
                body.append(QueueAlloc(opcode="allocate_queue", queues=allocate[epoch]))
            body.append(Execute(graph_name=self.graph_names[epoch], queue_settings=settings))
            if epoch in free:
                body.append(QueueAlloc(opcode="deallocate_queue", queues=free[epoch]))
        return body

    def inference(self, epochs: list[int], program: int = 0) -> Program:
        """`run_fwd_<program>`: every epoch, `$p_loop_count` times (pointer variables prefixed by the program's
        number past the first: the programs of `compile_subgraphs` read other queues)."""
        fifo = self._fifo(epochs)
        ptr = {q: f"{f's{program}' if program else ''}q{i}" for i, q in enumerate(fifo)}
        paged = any(q in self.pages.values() for e in epochs for q in self.writes.get(e, ()))   # writes a page
        instructions: list = [Param(names=["$p_loop_count", *([WRITE_INDEX_PARAM] if paged else [])]),
                              Var(opcode="var", vars={"$c_microbatch_size": self.microbatch, "$c_one": 1, "$c_zero": 0,
                                                      **({WRITE_INDEX_VAR: 0} if paged else {})})]
        if paged:
            instructions.append(VarInst(dst=WRITE_INDEX_VAR, op="set", args=[WRITE_INDEX_PARAM]))
        if fifo:
            instructions.append(Var(opcode="staticvar", vars={v: 0 for q in fifo for v in
                                                              (f"$gptr_{ptr[q]}", f"$lptr_{ptr[q]}")}))
        instructions.append(Loop(count="$p_loop_count"))
        instructions += self._body(epochs, ptr)
        instructions += self._advance(fifo, ptr, popped=set(fifo))
        instructions.append(EndLoop())
        return Program(name=f"run_fwd_{program}", instructions=instructions)

    def training(self, epochs_by_type: dict[str, list[int]], accumulators: list[str]) -> list[Program]:
        """`run_fwd`, `run_bwd` and `run_opt` over the epochs of each type (module docstring)."""
        order = [t for t in PROGRAMS if epochs_by_type.get(t)]
        last_reader: dict[str, str] = {}
        for kind in order:
            for q in self._fifo(epochs_by_type[kind]):
                last_reader[q] = kind
        programs = []
        for kind in order:
            name, prefix = PROGRAMS[kind]
            epochs = epochs_by_type[kind]
            fifo = self._fifo(epochs)
            ptr = {q: f"{prefix}q{i}" for i, q in enumerate(fifo)}
            popped = {q for q in fifo if last_reader[q] == kind}
            params = {"forward": ["$p_microbatch_count"], "backward": ["$p_zero_grad", "$p_microbatch_count"]}
            instructions: list = [Param(names=params[kind])] if kind in params else []
            instructions.append(Var(opcode="var", vars={"$c_microbatch_size": self.microbatch, "$c_one": 1,
                                                        "$c_zero": 0}))
            if fifo:
                static = {}
                for q in fifo:
                    static[f"$gptr_{ptr[q]}"] = 0
                    static[f"$lptr_{ptr[q]}"] = 0
                    if q not in popped:
                        static[f"$gptr_{ptr[q]}_shadow"] = 0
                instructions.append(Var(opcode="staticvar", vars=static))
                instructions += [VarInst(dst=f"$gptr_{ptr[q]}", op="set", args=[f"$gptr_{ptr[q]}_shadow"])
                                 for q in fifo if q not in popped]
            if kind == "optimizer":   # one input per run (its graphs' input_count is 1)
                instructions += self._body(epochs, ptr)
                instructions += self._advance(fifo, ptr, popped, step="$c_one")
            else:
                if kind == "backward":
                    instructions.append(VarInst(dst="$v_zero_grad", op="set", args=["$p_zero_grad"]))
                instructions.append(Loop(count="$p_microbatch_count"))
                zeroed = frozenset(accumulators) if kind == "backward" else frozenset()
                instructions += self._body(epochs, ptr, zeroed)
                instructions += self._advance(fifo, ptr, popped)
                if kind == "backward":
                    instructions.append(VarInst(dst="$v_zero_grad", op="set", args=[0]))
                instructions.append(EndLoop())
            programs.append(Program(name=name, instructions=instructions))
        return programs

    def _advance(self, fifo: list[str], ptr: dict[str, str], popped: set[str],
                 step: str = "$c_microbatch_size") -> list:
        """Move every FIFO's pointers by `step` inputs: the global one (a pop) where this program pops the queue,
        else its shadow; the local one always."""
        out = []
        for q in fifo:
            wrap = 2 * self.queues[q].entries
            glob = f"$gptr_{ptr[q]}" if q in popped else f"$gptr_{ptr[q]}_shadow"
            out.append(VarInst(dst=glob, op="incwrap", args=[step, wrap]))
            out.append(VarInst(dst=f"$lptr_{ptr[q]}", op="incwrap", args=[step, wrap]))
        return out
