"""Capturing one frame: trace it, plan the rebuild, compile the graph, assemble the rewrite.

Input: a `FrameView` and the `FrameDriver` asking. Output: a `CompileRecord` whose
`replacement` is installed in the hook's cache (with its guard check), or whose `failure` says
why the frame runs eagerly, or with neither when the frame does no tensor work.

Graph breaks: when tracing cannot go on at some instruction, the frame gets *stops*
(`dynamo.resume`): the instruction itself when it is outside loops, else the headers of the
loops around it. The frame is traced again up to the first stop; its replacement is a
skeleton that runs the stops eagerly and everything between them as compiled regions.
Stops found for a code object are remembered, so later recompiles trace once.
"""
from __future__ import annotations

import dataclasses
import weakref
from types import CodeType
from typing import Optional

import torch

from dynamo import _C, hook, logs
from dynamo.breaks import GraphBreakError, Unsupported
from dynamo.driver import CompileRecord, JitScopeGuard, log_capture, now
from dynamo.instructions import decode
from dynamo.resume import analysis, nested
from dynamo.resume.regions import STATE, region_for, region_info, state_names, tag_of
from dynamo.resume.skeleton import build_skeleton
from dynamo.rewrite.glue import GluePlan
from dynamo.rewrite.rebuild import replay, replay_calls, write_frame_cells
from dynamo.rewrite.replacement import glue_call, replacement_calling
from dynamo.trace.graph import GraphBuilder
from dynamo.trace.interpreter import NestedStopReached, TraceState, Tracer
from dynamo.variables.side_effects import SideEffects
from dynamo.variables.base import NULL
from dynamo.variables.functions import CellVariable
from dynamo.variables.lazy import LazyVariable
from guards import GlobalStateGuard, GuardSet
from guards.sources import LocalSource

_MAX_ATTEMPTS = 8
_log_breaks = logs.get("graph_breaks")
_known_stops: "weakref.WeakKeyDictionary[CodeType, dict]" = weakref.WeakKeyDictionary()


@dataclasses.dataclass
class BreakRecord:
    """One graph break as the user sees it (read by `explain()`)."""

    kind_id: str
    title: str
    detail: str
    location: Optional[str]  # user file:line of the construct
    frames: list  # file:line of the inlined calls leading to it, innermost first
    hint: str
    resumed: bool  # False: the frame ran eagerly instead


def forget_stops() -> None:
    """`dynamo.reset()`: forget where every code object broke."""
    _known_stops.clear()


def root_tracer(state: TraceState, view, stops: dict) -> Tracer:
    """A tracer for the intercepted frame: arguments and free variables read lazily."""
    code = view.f_code
    tracer = Tracer(state, code, view.f_globals, {}, {})
    tracer.stops = frozenset(stops)
    frame_locals = view.f_locals
    is_region = region_info(code) is not None
    for name in code.co_varnames[:_argument_count(code)]:
        if name in frame_locals:
            value, source = frame_locals[name], LocalSource(name)
            factory = _region_state(code, value, source) if is_region and name == STATE \
                else None
            tracer.locals[name] = LazyVariable.of(value, source, factory)
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


def _region_state(code, value, source):
    """`__state` realises as the special variable the region prologue's `enter` unpacks."""
    from dynamo.resume.state import region_state
    return lambda: region_state(code, value, source)


def _argument_count(code: CodeType) -> int:
    from dynamo.rewrite import arg_slot_count
    return arg_slot_count(code)


def capture_frame(view, driver, reason) -> CompileRecord:
    code = view.f_code
    record = CompileRecord(code, None, [], None, reason=reason)
    started = now()
    stops = {} if driver.settings.fullgraph else dict(_known_stops.get(code, {}))
    for _ in range(_MAX_ATTEMPTS):
        state = TraceState(GraphBuilder(), GuardSet(), SideEffects(), view.f_globals,
                           driver.option("inline_depth"))
        state.guards.add(GlobalStateGuard())
        state.guards.add(JitScopeGuard(driver))
        state.nested_stop = tuple(stop.points for stop in stops.values() if stop.points)
        tracer = None
        try:
            tracer, returned, grad_at_stop = _trace(state, view, stops)
            if tracer.stopped is not None and isinstance(stops[tracer.stopped], PendingNested):
                stops[tracer.stopped] = _finish_nested(code, stops, tracer)
            plan = GluePlan(view.f_globals)
            plan.frame_cells = {id(cell.box): name for name, cell in tracer.cells.items()}
            if tracer.stopped is None:
                returned_expression = plan.reconstruct(returned)
            else:
                returned_expression = _stop_state(plan, tracer, stops[tracer.stopped],
                                                  grad_at_stop)
            replay(plan, state.side_effects.pending())
            write_frame_cells(plan, _own_cells(tracer), every=tracer.stopped is not None)
            replay_calls(plan, state.side_effects.deferred_calls)
        except _Retrace:
            state.side_effects.release()
            continue
        except Unsupported as failure:
            state.side_effects.release()
            if failure.location is None and tracer is not None:  # met building the glue
                failure.location = tracer.location()
                failure.user_frames = [failure.location]
            if _add_stops(code, failure, stops, driver, record):
                continue
            record.failure = failure
            _run_as_is(view, state, record)  # the same guards would fail the same way
            return record
        break
    else:
        record.failure = Unsupported(record.breaks[-1].kind, "too many graph breaks")
        return record
    record.seconds["trace"] = now() - started
    if state.graph.op_count() == 0 and tracer.stopped is None:
        state.side_effects.release()
        if _may_do_tensor_work(view):
            _run_as_is(view, state, record)  # other values may take a path with tensor work
        return record  # else: no tensor work, and none to expect (the driver skips the code)
    _finish(state, plan, returned_expression, driver, record, view,
            stops if tracer.stopped is not None else None)
    state.side_effects.release()
    log_capture(record)
    return record


def _own_cells(tracer: Tracer) -> dict:
    """The compiled frame's own cell variables (not its free variables), as traced."""
    return {name: tracer.cells[name] for name in tracer.code.co_cellvars
            if name in tracer.cells}


def _trace(state: TraceState, view, stops: dict):
    """Trace the frame; the tracer says where it stopped (its `nested` holds the inlined
    calls' tracers when it stopped inside them)."""
    stopping = {index for index, stop in stops.items() if not stop.points}
    tracer = root_tracer(state, view, stopping)
    tracer.nested = []
    try:
        try:
            returned = tracer.run()
        except NestedStopReached as reached:
            chain = [reached.tracer]
            while chain[-1].parent is not None:
                chain.append(chain[-1].parent)
            tracer.nested, tracer.stopped, returned = chain[::-1][1:], tracer.current.index, None
        return tracer, returned, torch.is_grad_enabled()
    finally:
        for undo in reversed(state.undo_log):
            undo()
        state.undo_log.clear()


@dataclasses.dataclass(frozen=True)
class PendingNested:
    """A nested stop planned from a break, finished (`nested.finish`) on the next trace."""

    points: tuple  # (code, index) per frame, the compiled frame first
    fallback: Optional[analysis.Stop]  # a plain stop at the compiled frame's call
    copied: tuple = ()
    loop_header: bool = False


def _finish_nested(code: CodeType, stops: dict, tracer: Tracer) -> analysis.Stop:
    pending = stops[tracer.stopped]
    stop = nested.finish(pending.points, [tracer, *tracer.nested])
    if stop is None:
        if pending.fallback is None:
            raise Unsupported(stop_kind(), "a graph break inside a call that cannot resume")
        stops[tracer.stopped] = pending.fallback
        _known_stops[code] = dict(stops)
        raise _Retrace()
    known = dict(stops)
    known[tracer.stopped] = stop
    _known_stops[code] = known
    return stop


class _Retrace(Exception):
    """Trace again: a planned stop turned out not to work and was replaced."""


def _add_stops(code: CodeType, failure: Unsupported, stops: dict, driver,
               record: CompileRecord) -> bool:
    """Record the break; add the stops that resume around it. False: run the frame eagerly."""
    new = _stops_for(code, failure)
    resumable = bool(new) and not all(index in stops for index in new)
    kind = failure.kind
    record.breaks.append(BreakRecord(kind.id, kind.title, failure.detail, failure.location,
                                     list(failure.user_frames), kind.hint, resumable))
    if driver.settings.fullgraph:
        raise GraphBreakError.from_failure(failure)
    if resumable:
        _log_breaks.debug("graph break in %s at %s: %s %s: %s%s", code.co_qualname,
                          failure.location, kind.id, kind.title, failure.detail,
                          "".join(f"\n  called from {frame}" for frame in failure.user_frames[1:]))
    if not resumable:
        return False
    stops.update(new)
    _known_stops[code] = dict(stops)
    return True


def _stops_for(code: CodeType, failure: Unsupported) -> Optional[dict]:
    index = failure.root_index
    if index is None or failure.root_layout is None:
        return None
    decoded = decode(code)
    enclosing = analysis.enclosing_loops(decoded, index)
    if not enclosing:
        stop = analysis.stop_at(decoded, index, failure.root_layout)
        planned = None if failure.exact_frames else nested.plan(failure.chain or [])
        if planned is not None:
            return {index: PendingNested(planned.points, stop)}
        return None if stop is None else {index: stop}
    static = analysis.layouts(decoded)
    found = {}
    for loop in enclosing:
        layout = static.get(loop.header)
        stop = None if layout is None else \
            analysis.stop_at(decoded, loop.header, layout, loop_header=True)
        if stop is None:
            return None
        found[loop.header] = stop
    return found


def _stop_state(plan: GluePlan, tracer: Tracer, stop: analysis.Stop,
                grad_enabled: bool) -> str:
    """The entry glue's result at a stop: (tag, stack items, locals)."""
    from dynamo import _frame_state
    layout = tracer.layout() if not tracer.nested else \
        tracer.layout() + (False,) + tracer.nested[-1].layout()
    if layout != stop.layout:
        raise Unsupported(stop_kind(), "the stack at a graph break changed between traces")
    _close_blocks_for_break([tracer, *tracer.nested])
    items = [plan.reconstruct(value) for value in tracer.stack if value is not NULL]
    if tracer.nested:
        items.append(_inner_states(plan, tracer.nested))
        items += [plan.reconstruct(value) for value in tracer.nested[-1].stack
                  if value is not NULL]
    values = []
    for name in state_names(tracer.code):
        if name in tracer.locals:
            values.append(plan.reconstruct(tracer.locals[name]))
        else:
            values.append(plan.constant(_frame_state.UNBOUND))
    if grad_enabled != torch.is_grad_enabled():  # tracing has restored the entry state
        plan.statements.append(f"{plan.bind(torch._C._set_grad_enabled, 'set_grad')}"
                               f"({grad_enabled})")
    tag = tag_of(tracer.code, tracer.stopped)
    return f"({tag}, ({''.join(item + ', ' for item in items)}), " \
           f"({''.join(value + ', ' for value in values)}))"


def _close_blocks_for_break(tracers: list) -> None:
    """`with` blocks open at a stop end inside the graph (innermost first); the glue enters
    them again for real, so every backend leaves the same state behind."""
    from dynamo.variables.contexts import ContextExit
    for tracer in reversed(tracers):
        for value in reversed(tracer.stack):
            if isinstance(value, ContextExit) and value.close_for_break is not None:
                value.close_for_break()


def _inner_states(plan: GluePlan, tracers: list) -> str:
    """The inlined calls' states for a nested stop: (function, stack below the call, locals,
    the instance a class call's `__init__` builds as a 1-tuple or ()) per call, outermost
    first; the innermost call's stack travels separately."""
    from dynamo import _frame_state
    states = []
    for tracer in tracers:
        below = "" if tracer is tracers[-1] else "".join(
            plan.reconstruct(value) + ", " for value in tracer.stack if value is not NULL)
        values = "".join((plan.reconstruct(tracer.locals[name]) if name in tracer.locals
                          else plan.constant(_frame_state.UNBOUND)) + ", "
                         for name in state_names(tracer.code))
        constructs = "" if tracer.constructs is None else \
            plan.reconstruct(tracer.constructs) + ", "
        states.append(f"({plan.bind(tracer.function, 'function')}, ({below}), ({values}), "
                      f"({constructs}))")
    return "(" + "".join(state + ", " for state in states) + ")"


def stop_kind():
    from dynamo.breaks import UNSUPPORTED_BYTECODE
    return UNSUPPORTED_BYTECODE


def _finish(state, plan, returned_expression, driver, record, view, stops) -> None:
    code = view.f_code
    graph = state.graph
    compiled = None
    if graph.op_count() or plan.outputs:
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
    if stops is None:
        replacement = replacement_calling(code, glue, plan.parameters, plan.cell_parameters)
    else:
        replacement = _skeleton(code, glue, plan, stops)
    _install(code, state, replacement, record)
    record.replacement = replacement
    record.glue_source = text
    record.stops = sorted(stops) if stops else []
    record.seconds["total"] = sum(record.seconds.values())


def _may_do_tensor_work(view) -> bool:
    """Whether a frame that did no tensor work this time may on other calls: a resumed
    region, or a frame given tensors or modules."""
    if region_info(view.f_code) is not None:
        return True
    values = list(view.f_locals.values())
    for value in list(values):
        if isinstance(value, (list, tuple)):
            values.extend(value[:16])
        elif isinstance(value, dict):
            values.extend(list(value.values())[:16])
    return any(isinstance(value, (torch.Tensor, torch.nn.Module)) for value in values)


def _run_as_is(view, state: TraceState, record: CompileRecord) -> None:
    """Cache "run the original code" under the trace's guards, so that calls like this one
    are not traced again."""
    code = view.f_code
    replacement = as_is(code)
    _install(code, state, replacement, record)
    record.replacement = replacement
    record.runs_as_is = True


_as_is: "weakref.WeakKeyDictionary[CodeType, CodeType]" = weakref.WeakKeyDictionary()


def as_is(code: CodeType) -> CodeType:
    """`code` itself, with the all-positional signature a replacement has (cached)."""
    from dynamo.instructions.decoding import decode_bytecode as decode_body
    from dynamo.rewrite import assemble
    cached = _as_is.get(code)
    if cached is None:
        # the same instructions: the original's stack size holds (and `bytecode` cannot
        # compute it for a region that enters a `try` block in its middle)
        cached = _as_is[code] = assemble(decode_body(code), code, stacksize=code.co_stacksize)
    return cached


def _install(code: CodeType, state: TraceState, replacement: CodeType,
             record: CompileRecord) -> None:
    check = state.guards.compile()
    entry = hook.add_entry(code, check, replacement)
    code_ref = weakref.ref(code)

    def drop(_guard_set, entry=entry):
        live = code_ref()
        if live is not None:
            hook.remove_entry(live, entry)
    state.guards.on_invalidate(drop)
    record.compiled = check
    record.guards = state.guards.describe()


def _skeleton(code: CodeType, glue, plan: GluePlan, stops: dict) -> CodeType:
    exits = {index: (tag_of(code, index), stop.layout) for index, stop in stops.items()
             if stop.loop_header}

    def region(edge: analysis.Edge) -> CodeType:
        return region_for(code, edge.target, edge.layout, exits, edge.inner)
    entry = glue_call(code, glue, plan.parameters, plan.cell_parameters)
    return build_skeleton(code, entry, stops, region)
