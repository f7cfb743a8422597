"""Stage "lower": ATen FX graph -> loop IR. Importing this package registers every lowering."""
from inductor.lower import indexing, math, pooling, reductions, views  # noqa: F401
from inductor.lower.graph import LoopGraph, lower

__all__ = ["LoopGraph", "lower"]
