"""Stage "resume", dynamic shapes: the symbolic dimensions a region's inputs inherit.

Input: the `Capture` of a trace that halted at a stop, that `analysis.Stop`, and the region
code object each way out of it continues in. Output: per region code, {source name: dims}:
for each local and stack value the region starts with, the dimensions that were symbolic in
the trace at the stop (a tensor's sizes; dim 0 for an int that was a symbol, `n = x.size(0)`),
and for a view, its base's under `<name>._base`. `dynamo.shapes.SizeHistory.inherit` keeps
them: the region's first compile traces those dimensions symbolically, as the compiled frame
did, instead of specialising them and recompiling once they change (`dynamo.shapes.policy`).

Values without a decision inherit nothing, and the region's own size history decides for them
as for any frame: what the stop itself produced (the result of the call that ran eagerly, the
next item of a `for` loop), a value the trace never looked at, the stack of an inlined call a
break happened in (its locals and its callers' values do inherit).
"""
from __future__ import annotations

from types import CodeType
from typing import Callable

import torch

from dynamo.instructions import decode
from dynamo.resume.analysis import Stop, untouched_slots
from dynamo.resume.regions import state_names
from dynamo.resume.state import ResumedSource
from dynamo.trace.capture import Capture
from dynamo.variables.base import NULL
from dynamo.variables.lazy import LazyVariable
from dynamo.variables.symbolic import SymbolicVariable
from dynamo.variables.tensor import TensorVariable


def inherited_dims(capture: Capture, stop: Stop, region_of: Callable) -> dict[CodeType, dict]:
    """{region code: {source name: symbolic dims}} for the regions after `stop` (see the
    module docstring); `region_of(edge)` is the region continuing along an edge."""
    point = capture.stop
    if point is None:
        return {}
    root = point.frames[0]
    found: dict[str, frozenset] = {}
    for tracer in point.frames:  # an inlined call's locals: `L['name']` in its region too
        for index, name in enumerate(state_names(tracer.code)):
            if name in tracer.locals:
                _record(found, ResumedSource(None, 1, index, name).name(), tracer.locals[name])
    # a nested stop runs an instruction of the innermost call: the compiled frame's stack
    # reaches the region whole; a plain stop keeps the slots its instructions do not touch
    kept = len(root.stack) if point.nested else untouched_slots(decode(root.code), stop)
    items = [value for value in root.stack[:kept] if value is not NULL]
    for index, value in enumerate(items):
        _record(found, ResumedSource(None, 0, index, f"stack[{index}]").name(), value)
    if not found:
        return {}
    return {region_of(edge): found for edge in stop.edges}


def _record(found: dict, name: str, value) -> None:
    if type(value) is LazyVariable:
        value = value.memo[0]  # None: never looked at
    if isinstance(value, TensorVariable):
        _record_tensor(found, name, value.example)
    elif isinstance(value, SymbolicVariable) and isinstance(value.example, torch.SymInt) and \
            _is_symbolic(value.example):
        _add(found, name, {0})


def _record_tensor(found: dict, name: str, fake: torch.Tensor) -> None:
    if not isinstance(fake, torch.Tensor) or fake.layout is not torch.strided:
        return
    dims = frozenset(dim for dim, size in enumerate(fake.shape) if _is_symbolic(size))
    if dims:
        _add(found, name, dims)
    base = fake._base
    if base is not None and base.layout is torch.strided:
        base_dims = frozenset(dim for dim, size in enumerate(base.shape) if _is_symbolic(size))
        if base_dims:
            _add(found, f"{name}._base", base_dims)


def _add(found: dict, name: str, dims) -> None:
    """Union: an inlined call's local may share its name with the frame's."""
    found[name] = found.get(name, frozenset()) | frozenset(dims)


def _is_symbolic(size) -> bool:
    """Whether a size is still an expression of symbols (not specialised to a number)."""
    if not isinstance(size, torch.SymInt):
        return False
    node = size.node
    return bool(node.shape_env.replace(node.expr).free_symbols)
