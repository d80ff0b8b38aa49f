"""The graph IR shared by every compile stage."""
from .graph import INTERMEDIATE_OUTPUT, Graph, Node, Operand, GraphError, ShapeOnly, as_operand
from .epoch_types import (EPOCH_TYPES, GRADIENT_OUTPUT, accumulated_parameter, accumulator_of, epoch_types,
                          gradient_ops, loopback_writers, loss_gradient_input, loss_gradient_output, residual_of,
                          residual_parameter, state_of, updated_with)
from ..arch.tms import TM, apply_tms, tm_shape

__all__ = ["Graph", "Node", "Operand", "GraphError", "ShapeOnly",
           "as_operand", "TM", "apply_tms", "tm_shape", "EPOCH_TYPES",
           "GRADIENT_OUTPUT", "INTERMEDIATE_OUTPUT", "epoch_types", "gradient_ops", "loopback_writers",
           "loss_gradient_input", "loss_gradient_output", "accumulator_of", "accumulated_parameter", "residual_of",
           "residual_parameter", "state_of", "updated_with"]
