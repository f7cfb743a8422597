"""Stage "lower": ATen FX graph -> loop IR. Importing this package registers every lowering."""
from inductor.lower import indexing, math, reductions, views  # noqa: F401  (registrations)
from inductor.lower.graph import LoopGraph, lower

__all__ = ["LoopGraph", "lower"]
