"""Stage "lower": ATen FX graph -> loop IR. Importing this package registers every lowering."""
from inductor.lower import (extern, indexing, math, pooling, random,  # noqa: F401
                            reductions, scatter, views)
from inductor.lower.graph import LoopGraph, lower

__all__ = ["LoopGraph", "lower"]
