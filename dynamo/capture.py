"""Capturing one frame: trace it, plan the rebuild, compile the graph, assemble the rewrite.

Input: a `FrameView` and the `FrameDriver` asking. Output: a `CompileRecord` whose
`replacement` is installed in the hook's cache (with its guard check), or whose `failure` says
why the frame runs eagerly, or with neither when the frame does no tensor work.
"""
from __future__ import annotations

import weakref
from types import CodeType

import torch

from dynamo import _C, hook
from dynamo.breaks import Unsupported
from dynamo.driver import CompileRecord, log_capture, now
from dynamo.rewrite.glue import GluePlan
from dynamo.rewrite.rebuild import replay
from dynamo.rewrite.replacement import replacement_calling
from dynamo.trace.graph import GraphBuilder
from dynamo.trace.interpreter import TraceState, Tracer
from dynamo.trace.side_effects import SideEffects
from dynamo.variables.functions import CellVariable
from guards import GlobalStateGuard, GuardSet
from guards.sources import LocalSource


def root_tracer(state: TraceState, view) -> Tracer:
    """A tracer for the intercepted frame: arguments and free variables read lazily."""
    code = view.f_code
    tracer = Tracer(state, code, view.f_globals, {}, {})
    frame_locals = view.f_locals
    for name in code.co_varnames[:_argument_count(code)]:
        if name in frame_locals:
            tracer.lazy_locals[name] = _reader(tracer, frame_locals[name], LocalSource(name))
    closure = view.f_func.__closure__ or ()
    for name, cell in zip(code.co_freevars, closure):
        source = LocalSource(name)
        value = frame_locals.get(name, _EMPTY)
        read = (lambda: None) if value is _EMPTY else _reader(tracer, value, source)
        cell_variable = CellVariable.preexisting(cell, source, read)
        state.side_effects.track(cell_variable.box)
        tracer.cells[name] = cell_variable
    return tracer


_EMPTY = object()


def _reader(tracer: Tracer, value, source):
    return lambda: tracer.wrap(value, source)


def _argument_count(code: CodeType) -> int:
    from dynamo.rewrite import arg_slot_count
    return arg_slot_count(code)


def capture_frame(view, driver, reason) -> CompileRecord:
    code = view.f_code
    record = CompileRecord(code, None, [], None, reason=reason)
    started = now()
    state = TraceState(GraphBuilder(), GuardSet(), SideEffects(), view.f_globals,
                       driver.option("inline_depth"))
    state.guards.add(GlobalStateGuard())
    try:
        returned = _trace(state, view)
        plan = GluePlan(view.f_globals)
        returned_expression = plan.reconstruct(returned)
        replay(plan, state.side_effects.pending())
    except Unsupported as failure:
        record.failure = failure
        state.side_effects.release()
        return record
    record.seconds["trace"] = now() - started
    if state.graph.op_count() == 0:
        state.side_effects.release()
        return record  # no tensor work
    _finish(state, plan, returned_expression, driver, record, view)
    state.side_effects.release()
    log_capture(record)
    return record


def _trace(state: TraceState, view):
    tracer = root_tracer(state, view)
    try:
        return tracer.run()
    finally:
        for undo in reversed(state.undo_log):
            undo()
        state.undo_log.clear()


def _finish(state, plan, returned_expression, driver, record, view) -> None:
    code = view.f_code
    graph = state.graph
    module = graph.output(plan.outputs)
    record.graph = module
    started = now()
    compiled = driver.settings.backend(module, list(graph.example_inputs))
    record.seconds["backend"] = now() - started
    compiled = _C.ScopedCall(compiled, None)  # nothing inside a compiled graph is captured
    glue, text = plan.build(compiled, graph.input_sources, returned_expression,
                            name=f"{code.co_name}_glue" if code.co_name.isidentifier()
                            else "glue")
    hook.mark_skip(glue.__code__)
    replacement = replacement_calling(code, glue, plan.parameters, plan.cell_parameters)
    check = state.guards.compile()
    entry = hook.add_entry(code, check, replacement)
    code_ref = weakref.ref(code)

    def drop(_guard_set, entry=entry):
        live = code_ref()
        if live is not None:
            hook.remove_entry(live, entry)
    state.guards.on_invalidate(drop)
    record.replacement = replacement
    record.glue_source = text
    record.guards = state.guards.describe()
    record.compiled = check
    record.seconds["total"] = sum(record.seconds.values())


def example_inputs_of(record: CompileRecord) -> list[torch.Tensor]:
    return []
