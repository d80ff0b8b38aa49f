"""The backend's netlist rules as a registry (`RULES`: rule id -> `Rule`), one small function per rule, grouped by
family in the modules below; `rule_table()` is the rule table of docs/netlist.md."""
from __future__ import annotations

from . import attributes, connections, formats, fused, memory, objects, programs, streams, tile_dims  # noqa: F401
from .registry import RULES, Context, Edge, Rule, declared_rule, rule, run

_SCHEMA_RULES = {
    "file.read": "The netlist file can be read.",
    "yaml.syntax": "The text is YAML.",
    "schema.type": "Sections, records and fields have the declared YAML type (map, list, integer, ...).",
    "schema.unknown_field": "Every key is a declared field of its record (netlist-format.md §1).",
    "schema.missing_field": "Every required field is present (dram or host as `loc` names it; grid_loc on Tensix ops).",
    "schema.missing_section": "devices, queues, graphs and programs are present.",
    "schema.value": "A field with a fixed set of values has one of them (queue type, loc, layout, ublock_order, "
                    "arch).",
    "schema.duplicate_key": "No key appears twice in a map.",
    "name.duplicate": "Queue, graph, op (within a graph), program and fused-op names are unique.",
    "df.invalid": "Data formats are ones the backend knows.",
    "fidelity.invalid": "Math fidelities are ones the backend knows.",
    "tile_dim.invalid": "tile_dim is one of 32x32, 16x32, 8x32, 4x32, 2x32, 1x32, 32x16.",
    "tm.unknown": "TMs are transpose, broadcast, hslice, hstack, vslice, vstack, pad or tile_broadcast.",
    "tm.syntax": "Each TM has its argument form (broadcast {r|c|z: n}, pad [rt, ct, value], ...).",
    "tm.input_index": "input_N_tms / _pad / _unpad name an input of the op.",
    "attr.unknown": "An attribute applies to the op's type (netlist_parser.cpp parse_op).",
    "attr.vector": "vector is r, c or rc.",
    "attr.reduce_dim": "A reduce's dim is r, c or z.",
    "attr.reduce_type": "A reduce's type is max.",
    "attr.relu_mode": "relu_mode is min or max.",
    "attr.stoch_rnd_mode": "stoch_rnd_mode is none, fpu, pack or all.",
    "attr.splice_granularity": "A splice's granularity is ublock or t.",
    "attr.sfpu_execution_thread": "sfpu_execution_thread is math or pack.",
    "attr.topk_sort": "A topk's sort is max or argmax.",
    "program.opcode": "Instructions are var, staticvar, param, varinst, loop, endloop, execute, allocate_queue or "
                      "deallocate_queue.",
    "program.syntax": "Each instruction has its argument form.",
}
for _id, _doc in _SCHEMA_RULES.items():
    declared_rule(_id, _doc)
declared_rule("devices.arch", "The arch asked for is listed in `devices`, and pybuda has a device description for "
              "it (else the device rules are not checked).", on="selection", section="§1.1")

__all__ = ["RULES", "Context", "Edge", "Rule", "rule", "run", "rule_table"]


def _on(r: Rule) -> str:
    kinds = r.on if isinstance(r.on, tuple) else (r.on,)
    return ", ".join(k if isinstance(k, str) else k.__name__ for k in kinds)


def rule_table() -> str:
    """The registry as the markdown table of docs/netlist.md: one row per rule (id, the ids it reports when they
    differ, what it checks on, what it says, the netlist-format.md section)."""
    rows = ["| rule | checks | on | section |", "|---|---|---|---|"]
    for r in sorted(RULES.values(), key=lambda r: (r.on != "schema", r.section, r.id)):
        ids = ", ".join(f"`{i}`" for i in r.reports) if r.ids else f"`{r.id}`"
        rows.append(f"| {ids} | {r.doc} | {_on(r)} | {r.section} |")
    return "\n".join(rows) + "\n"
