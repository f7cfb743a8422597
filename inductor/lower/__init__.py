"""Stage "lower": ATen FX graph -> loop IR. Importing this package registers every lowering."""
from inductor.lower import (attention, convolution, extern, indexing,  # noqa: F401
                            math, pooling, random, reductions, scans, scatter,
                            views)
from inductor.lower.graph import LoopGraph, lower

__all__ = ["LoopGraph", "lower"]
