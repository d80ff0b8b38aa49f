"""Buda netlists: building one from a placed graph, writing it as YAML."""
from .builder import build_netlist
from .writer import dump_netlist, write_netlist

__all__ = ["build_netlist", "dump_netlist", "write_netlist"]
