"""Balancer and placer: op models (grid, blocking, u_kt), epochs and core locations, costed by the one backend
model (`pybuda.arch`)."""
from .op_model import BalancerError, OpModel, legal_op_models
from .policy import Placement, balance_and_place
from .placer import PlacedOp

__all__ = ["OpModel", "BalancerError", "legal_op_models", "Placement", "PlacedOp", "balance_and_place"]
