"""Stage "resume", part 1: planning the stops of a frame with graph breaks.

Input: the graph breaks met while tracing a frame (`Unsupported`, with the instruction and
stack layout of the compiled frame where each happened) and the `Capture` of a trace that
halted at a stop. Output: the frame's stops (`analysis.Stop` per instruction index), the
entry glue's result at a stop, and the skeleton replacement that runs the stops eagerly.

A break outside loops stops at the breaking instruction itself (or, inside an inlined call,
at a copy of it: a *nested* stop, settled once a trace reaches it); inside loops, at the
headers of the loops around it. Stops found for a code object are remembered, so that its
later recompiles trace once.
"""
from __future__ import annotations

import dataclasses
import weakref
from types import CodeType
from typing import Optional

import torch

from dynamo import _frame_state
from dynamo.breaks import UNSUPPORTED_BYTECODE, Unsupported
from dynamo.instructions import decode
from dynamo.resume import analysis, nested
from dynamo.resume.inheritance import inherited_dims
from dynamo.resume.regions import region_for, state_names, tag_of
from dynamo.resume.skeleton import build_skeleton
from dynamo.rewrite.glue import GluePlan
from dynamo.rewrite.replacement import glue_call, runs_again
from dynamo.trace.capture import BreakRecord, Capture, StopPoint
from dynamo.variables.base import NULL

_known_stops: "weakref.WeakKeyDictionary[CodeType, dict]" = weakref.WeakKeyDictionary()


def forget_stops() -> None:
    """`dynamo.reset()`: forget where every code object broke."""
    _known_stops.clear()


@dataclasses.dataclass(frozen=True)
class PendingNested:
    """A nested stop planned from a break, finished (`nested.finish`) on the next trace."""

    points: tuple  # (code, index) per frame, the compiled frame first
    fallback: Optional[analysis.Stop]  # a plain stop at the compiled frame's call
    copied: tuple = ()
    loop_header: bool = False


@dataclasses.dataclass(frozen=True)
class Settled:
    """What settling a trace's stop decided: go on (the default), trace again (`retrace`: a
    planned nested stop did not work and its fallback replaced it), or a graph break."""

    retrace: bool = False
    failure: Optional[Unsupported] = None


class StopPlanner:
    """The stops of one frame across its traces (`fullgraph`: none, and none remembered)."""

    def __init__(self, code: CodeType, fullgraph: bool):
        self.code = code
        self.fullgraph = fullgraph
        self.stops: dict = {} if fullgraph else dict(_known_stops.get(code, {}))

    def stop_at(self) -> frozenset:
        """Instructions of the compiled frame the next trace halts before."""
        return frozenset(index for index, stop in self.stops.items() if not stop.points)

    def nested_points(self) -> tuple:
        """Chains of (code, index), the compiled frame first: stops inside inlined calls."""
        return tuple(stop.points for stop in self.stops.values() if stop.points)

    def settle(self, capture: Capture) -> Settled:
        """Finish the nested stop a trace reached, now that its frames are known."""
        index = None if capture.stop is None else capture.stop.index
        pending = self.stops.get(index)
        if not isinstance(pending, PendingNested):
            return Settled()
        stop = nested.finish(pending.points, list(capture.stop.frames))
        if stop is None:
            if pending.fallback is None:
                return Settled(failure=Unsupported(
                    UNSUPPORTED_BYTECODE, "a graph break inside a call that cannot resume"))
            self.stops[index] = pending.fallback
            _known_stops[self.code] = dict(self.stops)
            return Settled(retrace=True)
        self.stops[index] = stop
        _known_stops[self.code] = dict(self.stops)
        return Settled()

    def after_break(self, failure: Unsupported) -> BreakRecord:
        """The break as the user sees it; when it can resume (`resumed`), its stops are added
        for the next trace (never under `fullgraph`, where the break is an error)."""
        new = _stops_for(self.code, failure)
        resumable = bool(new) and not all(index in self.stops for index in new)
        if resumable and not self.fullgraph:
            self.stops.update(new)
            _known_stops[self.code] = dict(self.stops)
        return BreakRecord.of(failure, resumable)

    def stop_of(self, point: StopPoint) -> analysis.Stop:
        return self.stops[point.index]


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


def stop_state(plan: GluePlan, capture: Capture, stop: analysis.Stop) -> str:
    """The entry glue's result at a stop: (tag, stack items, locals)."""
    point = capture.stop
    if point.layout() != stop.layout:
        raise Unsupported(UNSUPPORTED_BYTECODE,
                          "the stack at a graph break changed between traces")
    root = point.frames[0]
    items = [plan.reconstruct(value) for value in root.stack if value is not NULL]
    if point.nested:
        items.append(_inner_states(plan, point.nested))
        items += [plan.reconstruct(value) for value in point.nested[-1].stack
                  if value is not NULL]
    values = []
    for name in state_names(root.code):
        if name in root.locals:
            values.append(plan.reconstruct(root.locals[name]))
        else:
            values.append(plan.constant(_frame_state.UNBOUND))
    if point.grad_enabled != torch.is_grad_enabled():  # tracing has restored the entry state
        plan.statements.append(f"{plan.bind(torch._C._set_grad_enabled, 'set_grad')}"
                               f"({point.grad_enabled})")
    tag = tag_of(root.code, point.index)
    return f"({tag}, ({''.join(item + ', ' for item in items)}), " \
           f"({''.join(value + ', ' for value in values)}))"


def _inner_states(plan: GluePlan, tracers: tuple) -> str:
    """The inlined calls' states for a nested stop: (function, stack below the call, locals,
    the instance a class call's `__init__` builds as a 1-tuple or ()) per call, outermost
    first; the innermost call's stack travels separately."""
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


def skeleton_replacement(code: CodeType, glue, plan: GluePlan, stops: dict) -> CodeType:
    """The replacement of a frame with stops: the entry glue's call, then the skeleton."""
    entry = glue_call(code, glue, plan.parameters, plan.cell_parameters)
    return build_skeleton(code, entry, stops, _regions_of(code, stops), runs_again(glue))


def inherited_dynamism(capture: Capture, stops: dict) -> dict:
    """{region code: {source name: dims}}: the dimensions of the values each region after
    the capture's stop starts with that the capture traced symbolically
    (`dynamo.resume.inheritance`)."""
    if capture.stop is None or capture.stop.index not in stops:
        return {}
    return inherited_dims(capture, stops[capture.stop.index], _regions_of(capture.code, stops))


def _regions_of(code: CodeType, stops: dict):
    """The region continuing along an edge of one of `stops` (cached per code and edge)."""
    exits = {index: (tag_of(code, index), stop.layout) for index, stop in stops.items()
             if stop.loop_header}

    def region(edge: analysis.Edge) -> CodeType:
        return region_for(code, edge.target, edge.layout, exits, edge.inner)
    return region
