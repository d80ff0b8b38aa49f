"""The graph IR shared by every compile stage."""
from .graph import Graph, Node, Operand, GraphError, as_operand
from ..arch.tms import TM, apply_tms, tm_shape

__all__ = ["Graph", "Node", "Operand", "GraphError", "as_operand", "TM", "apply_tms", "tm_shape"]
