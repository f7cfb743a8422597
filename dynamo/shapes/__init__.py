"""Dynamic shapes (stage: trace): which sizes a trace makes symbolic (`policy`) and the
symbolic sizes of one trace with the guards on what it learned (`environment`).

See docs/dynamic-shapes.md for the user's view: how sizes become dynamic, what is guarded and
how it reads in `explain()` and the recompile log.
"""
from dynamo.shapes.environment import (SymbolicSizes, SymbolicTraceTooSlow,
                                       UnboundSymbol)
from dynamo.shapes.policy import (STATIC, DimensionPolicy, SizeHistory, mark_dynamic,
                                  mark_static)

__all__ = ["SymbolicSizes", "SymbolicTraceTooSlow", "UnboundSymbol", "DimensionPolicy",
           "SizeHistory", "STATIC",
           "mark_dynamic", "mark_static"]
