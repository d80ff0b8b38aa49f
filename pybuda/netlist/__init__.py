"""Buda netlists: the typed model, YAML reader and writer, the backend's validation rules, inspection and diff.

    netlist = pybuda.netlist.load("model_netlist.yaml")      # path or YAML text -> Netlist (schema-checked)
    pybuda.netlist.validate(netlist)                         # raises NetlistError listing every violation
    text = pybuda.netlist.dump_netlist(netlist)              # legacy layout; load(text) == netlist
"""
from .diff import NetlistChange, diff
from .errors import CompiledNetlistError, NetlistError, NetlistViolation
from .inspect import EpochSummary, NetlistSummary, draw_grid, epoch_summaries, summary
from .model import (Attributes, Devices, EndLoop, EndProgram, Execute, FusedOp, FusedSubOp, Graph, Loop, Netlist,
                    Op, Pad, Param, Program, Queue, QueueAlloc, QueueSettings, Var, VarInst)
from .reader import load
from .validator import check, validate
from .writer import dump_netlist, netlist_text, netlist_to_data, write_netlist


__all__ = [
    "load", "validate", "check", "dump_netlist", "netlist_text", "write_netlist", "netlist_to_data",
    "NetlistError", "CompiledNetlistError", "NetlistViolation", "summary", "epoch_summaries", "draw_grid",
    "NetlistSummary", "EpochSummary",
    "diff", "NetlistChange",
    "Netlist", "Devices", "Queue", "Graph", "Op", "Attributes", "Pad", "FusedOp", "FusedSubOp", "Program",
    "QueueSettings", "Var", "Param", "VarInst", "Loop", "EndLoop", "EndProgram", "Execute", "QueueAlloc",
]
