"""Verifiers of the loop IR and of kernel plans, run between stages under
`inductor.config.verify_ir` (on in the test suite).

Input: a `LoopGraph` or a `GraphPlan`. Output: nothing, or an `IRVerificationError` naming
the first broken invariant: names unique and defined before use, bodies reading only known
buffers at indices over their own loop variables, sizes matching layouts, plans storing every
buffer read outside its kernel.
"""
from __future__ import annotations

import sympy

from inductor.ir.nodes import (ComputedBuffer, ExternKernel, MultiOutput, ReinterpretView,
                               ScatterBuffer)
from inductor.ir.symbols import is_loop_variable, to_expr


class IRVerificationError(AssertionError):
    """An invariant of the loop IR or of a kernel plan is broken: a bug in the stage that
    produced it (the message names the buffer and the rule)."""


def verify_graph(graph) -> None:
    """Check a `LoopGraph`."""
    from inductor.schedule.nodes import AccessRecorder  # the recorder is shared with scheduling
    from inductor.ir.ops import use_handler
    from inductor.ir.symbols import index_symbol

    known = set()
    for buffer in graph.inputs + graph.constants:
        _check(buffer.get_name() not in known, f"duplicate input {buffer.get_name()}")
        known.add(buffer.get_name())
    for buffer in graph.buffers:
        name = buffer.get_name()
        _check(name is not None and name not in known, f"buffer name {name!r} reused or unset")
        if isinstance(buffer, ScatterBuffer):
            _check(buffer.layout.fixed, f"{name}: layout still flexible after lowering")
        elif isinstance(buffer, ComputedBuffer):
            data = buffer.data
            _check(len(data.get_size()) == len(buffer.layout.size) and all(
                sympy.expand(to_expr(a) - to_expr(b)) == 0
                for a, b in zip(data.get_size(), buffer.layout.size)),
                   f"{name}: loop ranges {data.get_size()} differ from layout "
                   f"{buffer.layout.size}")
            _check(buffer.layout.fixed, f"{name}: layout still flexible after lowering")
            outer = [index_symbol("i", n) for n in range(len(data.ranges))]
            inner = [index_symbol("r", n) for n in range(len(getattr(data, "reduction_ranges",
                                                                      [])))]
            recorder = AccessRecorder()
            with use_handler(recorder):
                data.inner_fn(outer, inner) if inner or buffer.is_reduction() \
                    else data.inner_fn(outer)
            allowed = set(outer) | set(inner)
            for access in recorder.reads:
                _check(access.name in known, f"{name} reads {access.name} before it exists")
                if access.index is not None:
                    stray = {symbol for symbol in access.index.free_symbols
                             if not symbol.name.startswith("t") and
                             is_loop_variable(symbol)} - allowed   # (sizes may be symbols)
                    _check(not stray, f"{name} reads {access.name} at an index over unknown "
                                      f"variables {sorted(map(str, stray))}")
        elif isinstance(buffer, ExternKernel):
            for value in buffer.inputs:
                base = value.data.get_name() if isinstance(value, ReinterpretView) \
                    else value.get_name()
                _check(base in known, f"{name} calls a library op on unknown {base}")
        elif isinstance(buffer, MultiOutput):
            _check(buffer.parent.get_name() in known, f"{name}: parent not defined first")
        known.add(name)


def verify_plan(plan) -> None:
    """Check a `GraphPlan`: every buffer a step reads is an input or written earlier."""
    from inductor.schedule.plans import ExternStep

    written = {name for name, buffer in plan.buffers.items()
               if buffer in plan.inputs or type(buffer).__name__ == "ConstantBuffer"}
    for step in plan.steps:
        if isinstance(step, ExternStep):
            reads = step.node.read_names()
            writes = [step.name]
        else:
            reads = set(step.loads)
            writes = step.stores
            _check(bool(step.stages) or getattr(step, "node", None) is not None,
                   f"{step.name} has no stages")
        missing = reads - written
        _check(not missing, f"{step.name} reads {sorted(missing)} before any step writes them")
        written.update(writes)


def _check(condition: bool, message: str) -> None:
    if not condition:
        raise IRVerificationError(message)
