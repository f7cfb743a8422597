"""Stage "trace", its function: `trace_frame(view, ...) -> Capture`.

Input: a frame view (code, function, globals, locals by name), the stops to halt at (chosen by
`dynamo.resume.stops` after earlier graph breaks) and the guards the caller adds. Output: a
frozen `Capture` holding what one symbolic run of the frame produced:

- `graph`: the FX graph so far (placeholders and operations; the rewrite stage adds the
  outputs once it knows which values leave the graph);
- `guards`: every specialisation made, as a `GuardSet`;
- `side_effects`: mutations of pre-existing objects, pending replay after the graph;
- how the trace ended: the value the frame `returned`, the `stop` it halted at (an
  instruction chosen as a graph break's resumption point), or the `failure` (an
  `Unsupported`: a graph break) that cut it short.

No backend runs and no code object is built here; `print(capture)` reads as the graph's
operations, the guards, the pending side effects and the ending.
"""
from __future__ import annotations

import dataclasses
import inspect
from types import CodeType
from typing import Any, Callable, Mapping, Optional

import torch

from dynamo.breaks import Unsupported, without_frames
from dynamo.shapes import STATIC, DimensionPolicy
from dynamo.trace.graph import GraphBuilder
from dynamo.trace.interpreter import NestedStopReached, TraceState, Tracer
from dynamo.variables.side_effects import SideEffects
from dynamo.variables.contexts import ContextExit
from dynamo.variables.functions import CellVariable
from dynamo.variables.lazy import LazyVariable
from guards import GlobalStateGuard, GuardSet
from guards.sources import LocalSource, Source

ArgumentFactory = Callable[[Any, Source], Callable[[], Any]]
"""For an argument needing a special variable: (value, source) -> a function realising it."""


@dataclasses.dataclass(frozen=True)
class BreakRecord:
    """One graph break as the user sees it (read by `explain()`)."""

    kind_id: str
    title: str
    detail: str
    location: Optional[str]  # user file:line of the construct
    frames: list  # file:line of the inlined calls leading to it, innermost first
    hint: str
    resumed: bool  # False: the frame ran eagerly instead

    @classmethod
    def of(cls, failure: Unsupported, resumed: bool) -> "BreakRecord":
        kind = failure.kind
        return cls(kind.id, kind.title, failure.detail, failure.location,
                   list(failure.user_frames), kind.hint, resumed)


@dataclasses.dataclass(frozen=True)
class StopPoint:
    """Where a trace halted at a planned stop, with the frames' states there."""

    index: int  # the stop instruction of the compiled frame
    frames: tuple  # the `Tracer` of each frame, the compiled frame first, inlined calls after
    grad_enabled: bool  # grad mode at the stop (the trace has since restored the entry state)

    @property
    def nested(self) -> tuple:
        """The inlined calls' tracers, when the stop is inside them (outermost first)."""
        return self.frames[1:]

    def layout(self) -> tuple:
        """The stack layout at the stop, inner frames' appended after a False for the call."""
        root = self.frames[0].layout()
        return root if not self.nested else root + (False,) + self.frames[-1].layout()


@dataclasses.dataclass(frozen=True)
class Capture:
    """What one trace of one frame produced; `ended` says which of `returned` (the frame's
    returned Variable), `stop` or `failure` applies."""

    code: CodeType
    graph: GraphBuilder
    guards: GuardSet
    side_effects: SideEffects
    cells: Mapping[str, CellVariable]  # the compiled frame's cells and free variables
    location: Optional[str]  # file:line of the last instruction traced (None: none ran)
    returned: Any = None  # the returned Variable
    stop: Optional[StopPoint] = None
    failure: Optional[Unsupported] = None

    @property
    def ended(self) -> str:
        """"returned", "stopped" or "failed"."""
        if self.failure is not None:
            return "failed"
        return "stopped" if self.stop is not None else "returned"

    @property
    def ops(self) -> list[str]:
        """The graph's operations, by target name, in order."""
        return [_target_name(node.target) for node in self.graph.graph.nodes
                if node.op in ("call_function", "call_method")]

    @property
    def pending(self) -> list:
        """Boxes of pre-existing values the trace changed, replayed after the graph."""
        return self.side_effects.pending()

    @property
    def deferred_calls(self) -> list:
        return list(self.side_effects.deferred_calls)

    def own_cells(self) -> dict:
        """The compiled frame's own cell variables (not its free variables), as traced."""
        return {name: self.cells[name] for name in self.code.co_cellvars
                if name in self.cells}

    def release(self) -> None:
        """Drop the references to real objects the side effects held while tracing."""
        self.side_effects.release()

    def describe(self) -> str:
        lines = [f"capture of {self.code.co_qualname} "
                 f"({self.code.co_filename}:{self.code.co_firstlineno})", "graph:"]
        lines += [f"  {_node_line(node)}" for node in self.graph.graph.nodes] or ["  (empty)"]
        lines.append("guards:")
        lines += [f"  {text}" for text in self.guards.describe()]
        lines.append("side effects:")
        effects = [f"  {box.kind} {box.source.name()} changed" for box in self.pending]
        effects += [f"  call {getattr(function, '__qualname__', repr(function))} before the "
                    "graph" for function, _ in self.side_effects.early_calls]
        effects += [f"  call {getattr(function, '__qualname__', repr(function))} after the "
                    "graph" for function, _ in self.side_effects.deferred_calls]
        lines += effects or ["  (none)"]
        lines.append(self._ending_line())
        return "\n".join(lines)

    __str__ = describe

    def _ending_line(self) -> str:
        if self.failure is not None:
            kind = self.failure.kind
            return f"graph break: {kind.id} {kind.title}: {self.failure.detail} at " \
                   f"{self.failure.location}"
        if self.stop is not None:
            inner = "".join(f" inside {tracer.code.co_qualname} at instruction "
                            f"{tracer.current.index}" for tracer in self.stop.nested)
            return f"stopped: before instruction {self.stop.index}{inner} ({self.location})"
        shown = "None" if self.returned is None else self.returned.describe()
        return f"returned: {shown}"


def trace_frame(view, *, stop_at: frozenset = frozenset(), nested_stops: tuple = (),
                guards: tuple = (), inline_depth: int = 32,
                argument_factories: Optional[Mapping[str, ArgumentFactory]] = None,
                dimensions: DimensionPolicy = STATIC) -> Capture:
    """Trace the frame of `view` once.

    stop_at: instruction indices of the frame to halt before; nested_stops: chains of
    (code, index), the compiled frame first, to halt at inside inlined calls; guards: guards
    added before tracing (after the global torch state's); argument_factories: arguments
    that realise as special variables (a resumed region's state); dimensions: which input
    sizes are traced symbolically (`dynamo.shapes.policy`).
    """
    state = TraceState(GraphBuilder(dimensions), GuardSet(), SideEffects(), view.f_globals,
                       inline_depth)
    state.guards.add(GlobalStateGuard())
    for guard in guards:
        state.guards.add(guard)
    state.nested_stop = tuple(nested_stops)
    tracer = None
    try:
        tracer = root_tracer(state, view, stop_at, argument_factories or {})
        returned, stop = _run(state, tracer)
    except Unsupported as failure:  # kept: without the frames it passed (breaks.without_frames)
        return _capture(view.f_code, state, tracer, failure=without_frames(failure))
    if stop is not None:
        _close_blocks_for_break(stop.frames)
    return _capture(view.f_code, state, tracer, returned=returned, stop=stop)


def _capture(code: CodeType, state: TraceState, tracer: Optional[Tracer], **ending) -> Capture:
    return Capture(code, state.graph, state.guards, state.side_effects,
                   {} if tracer is None else tracer.cells,
                   None if tracer is None else tracer.location(), **ending)


def _run(state: TraceState, tracer: Tracer) -> tuple[Any, Optional[StopPoint]]:
    """Run the root tracer: (returned variable, None) or (None, the stop reached). Real
    state changes made while tracing are undone on every way out."""
    try:
        try:
            returned = tracer.run()
            frames = (tracer,)
        except NestedStopReached as reached:
            chain = [reached.tracer]
            while chain[-1].parent is not None:
                chain.append(chain[-1].parent)
            frames, returned = tuple(chain[::-1]), None
            tracer.stopped = tracer.current.index
        grad_enabled = torch.is_grad_enabled()
    finally:
        for undo in reversed(state.undo_log):
            undo()
        state.undo_log.clear()
    if tracer.stopped is None:
        return returned, None
    return None, StopPoint(tracer.stopped, frames, grad_enabled)


def root_tracer(state: TraceState, view, stop_at: frozenset,
                argument_factories: Mapping[str, ArgumentFactory]) -> Tracer:
    """A tracer for the intercepted frame: arguments and free variables read lazily."""
    code = view.f_code
    tracer = Tracer(state, code, view.f_globals, {}, {})
    tracer.stops = frozenset(stop_at)
    frame_locals = view.f_locals
    for name in code.co_varnames[:_argument_count(code)]:
        if name in frame_locals:
            value, source = frame_locals[name], LocalSource(name)
            special = argument_factories.get(name)
            factory = None if special is None else special(value, source)
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


def _argument_count(code: CodeType) -> int:
    """How many local slots hold bound arguments."""
    flags = code.co_flags
    return (code.co_argcount + code.co_kwonlyargcount
            + bool(flags & inspect.CO_VARARGS) + bool(flags & inspect.CO_VARKEYWORDS))


def _close_blocks_for_break(tracers: tuple) -> None:
    """`with` blocks open at a stop end inside the graph (innermost first); the glue enters
    them again for real, so every backend leaves the same state behind."""
    for tracer in reversed(tracers):
        for value in reversed(tracer.stack):
            if isinstance(value, ContextExit) and value.close_for_break is not None:
                value.close_for_break()


def _target_name(target) -> str:
    """`sin` for torch.sin, `add` for operator.add, the method name for a method call."""
    if isinstance(target, str):
        return target
    return getattr(target, "__name__", None) or str(target)


def _node_line(node: torch.fx.Node) -> str:
    if node.op == "placeholder":
        source = node.meta.get("source")
        return f"{node.name} = input {source.name() if source is not None else node.target}"
    arguments = [_argument(value) for value in node.args]
    arguments += [f"{key}={_argument(value)}" for key, value in node.kwargs.items()]
    target = _target_name(node.target)
    if node.op == "call_method":
        return f"{node.name} = {arguments[0]}.{target}({', '.join(arguments[1:])})"
    return f"{node.name} = {target}({', '.join(arguments)})"


def _argument(value) -> str:
    if isinstance(value, torch.fx.Node):
        return value.name
    if isinstance(value, (list, tuple)):
        inner = ", ".join(_argument(item) for item in value)
        if isinstance(value, list):
            return f"[{inner}]"
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    return repr(value)
