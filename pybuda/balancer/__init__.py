"""Balancer and placer: op models (grid, blocking, u_kt), epochs and core locations."""
from .op_model import OpModel, BalancerError, legal_op_models
from .policy import Placement, PlacedOp, balance_and_place

__all__ = ["OpModel", "BalancerError", "legal_op_models", "Placement", "PlacedOp", "balance_and_place"]
