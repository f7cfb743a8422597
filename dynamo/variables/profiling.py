"""Stage "trace": `torch.autograd.profiler.record_function(name)` blocks met while tracing.

Input: the class `record_function`, read by traced code (torch.optim's step wrapper opens one
around every `step()`: `Optimizer.step#SGD.step`). Output: a variable whose call makes a `with`
block that records nothing in the graph; the block's body is traced as usual. Traced as
torch's own code, `__enter__` breaks the graph (`DisableTorchFunctionSubclass`), and the block,
a user context manager whose `__exit__` runs Python code, made every later write of a param in
it refuse capture (an error there would run that code). Compiled code therefore has no such
profiling range: with a profiler running, eager's trace shows the range around the step, the
compiled region's shows its graph's kernels (torch.compile drops these ranges too).
"""
from __future__ import annotations

from typing import Any

import torch

from dynamo.breaks import UNSUPPORTED_CALL, Unsupported
from dynamo.variables.base import Variable, variable
from dynamo.variables.contexts import NullContext


def is_record_function(value: Any) -> bool:
    return value is torch.autograd.profiler.record_function


@variable
class RecordFunctionClass(Variable):
    """The class `torch.autograd.profiler.record_function`: calling it makes a null block."""

    value: Any
    is_real: bool = True

    def python_type(self) -> type:
        return type

    def describe(self) -> str:
        return "torch.autograd.profiler.record_function"

    def call(self, tx, args, kwargs) -> Variable:
        if not args or len(args) > 2 or set(kwargs) - {"args"}:
            raise Unsupported(UNSUPPORTED_CALL, "record_function() with unexpected arguments")
        return NullContext()
