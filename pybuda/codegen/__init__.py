"""Code generation: a placed Buda graph to the netlist model (and the data its queues are loaded with)."""
from .netlist_builder import build_netlist, sparse_queue_values

__all__ = ["build_netlist", "sparse_queue_values"]
