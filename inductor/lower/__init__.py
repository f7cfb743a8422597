"""Stage "lower": ATen FX graph -> loop IR. Importing this package registers every lowering."""
from inductor.lower import (attention, extern, indexing, math, pooling,  # noqa: F401
                            random, reductions, scatter, views)
from inductor.lower.graph import LoopGraph, lower

__all__ = ["LoopGraph", "lower"]
