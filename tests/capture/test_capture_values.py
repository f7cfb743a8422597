"""Unit tests of the trace stage's value: `trace_frame(view) -> Capture`, no backend run.

Each test traces a small function once (or, for graph breaks, again with the stops that
`dynamo.resume.stops` plans) and asserts on the `Capture`: its graph's operations, guards,
pending side effects, and how the trace ended (returned, stopped, or a graph break).
"""
from __future__ import annotations

import dataclasses
import inspect
import types

import pytest
import torch

from dynamo import breaks
from dynamo.resume.stops import StopPlanner
from dynamo.trace.capture import BreakRecord, Capture, trace_frame

COUNTER = 0


def view_of(function, *args, **kwargs) -> types.SimpleNamespace:
    """What the frame hook hands over on entry: code, function, globals, the bound arguments."""
    bound = inspect.signature(function).bind(*args, **kwargs)
    return types.SimpleNamespace(f_code=function.__code__, f_func=function,
                                 f_globals=function.__globals__, f_locals=dict(bound.arguments))


def trace(function, *args, **options) -> Capture:
    capture = trace_frame(view_of(function, *args), **options)
    capture.release()
    return capture


def _line_of(function, text: str) -> int:
    lines, first = inspect.getsourcelines(function)
    return first + next(number for number, line in enumerate(lines) if text in line)


def pointwise(x):
    return torch.sin(x) + 1


def test_a_returning_frame_records_its_operations_in_order():
    capture = trace(pointwise, torch.ones(3))
    assert capture.ended == "returned"
    assert capture.ops == ["sin", "add"]
    assert capture.stop is None and capture.failure is None
    assert capture.graph.input_sources[0].name() == "L['x']"


def test_the_returned_value_is_the_last_operation():
    capture = trace(pointwise, torch.ones(3))
    last = [node for node in capture.graph.graph.nodes][-1]
    assert capture.returned.node is last


def test_guards_cover_the_tensor_argument_and_the_global_state():
    capture = trace(pointwise, torch.ones(3))
    text = "\n".join(capture.guards.describe())
    assert "L['x']" in text
    assert len(capture.guards.describe()) >= 2  # the tensor's and torch's global state


def test_the_callers_guards_are_part_of_the_capture():
    from guards.kinds.constants import ConstantGuard
    from guards.sources import GlobalSource
    extra = ConstantGuard(GlobalSource("COUNTER"), 0)  # the driver adds its jit scope's
    capture = trace(pointwise, torch.ones(3), guards=(extra,))
    assert extra in capture.guards
    assert len(capture.guards) == len(trace(pointwise, torch.ones(3)).guards) + 1


def test_a_constant_frame_has_no_operations():
    def add(a, b):
        return a + b
    capture = trace(add, 2, 3)
    assert capture.ops == []
    assert capture.returned.as_constant() == 5


def test_appending_to_an_argument_list_is_pending_not_performed():
    def push(x, items):
        items.append(x * 2)
        return x

    items = [1]
    capture = trace(push, torch.ones(2), items)
    assert items == [1]  # nothing mutated while tracing
    [box] = capture.pending
    assert box.kind == "list" and box.source.name() == "L['items']"
    assert capture.ops == ["mul"]


def test_a_global_write_is_pending():
    def count(x):
        global COUNTER
        COUNTER = COUNTER + 1
        return x + 1

    capture = trace(count, torch.ones(2))
    assert COUNTER == 0
    assert [box.kind for box in capture.pending] == ["globals"]


def noisy(x):
    y = x + 1
    print("y")
    return y * 2


def test_a_graph_break_ends_the_trace_with_its_kind_and_location():
    capture = trace(noisy, torch.ones(2))
    assert capture.ended == "failed"
    assert capture.failure.kind is breaks.PRINT
    assert capture.failure.location.endswith(f":{_line_of(noisy, 'print(')}")
    assert capture.ops == ["add"]  # what the trace had recorded before the break
    record = BreakRecord.of(capture.failure, resumed=True)
    assert (record.kind_id, record.resumed) == ("GB001", True)


def test_the_planned_stop_halts_the_next_trace_before_the_break():
    view = view_of(noisy, torch.ones(2))
    planner = StopPlanner(noisy.__code__, fullgraph=True)  # fullgraph: nothing remembered
    first = trace_frame(view, stop_at=planner.stop_at())
    first.release()
    planner.fullgraph = False
    assert planner.after_break(first.failure).resumed
    planner.fullgraph = True
    second = trace_frame(view, stop_at=planner.stop_at())
    second.release()
    assert second.ended == "stopped"
    assert second.stop.index == first.failure.root_index
    assert second.ops == ["add"]
    assert "y" in second.stop.frames[0].locals
    assert planner.stop_of(second.stop).layout == second.stop.layout()


def test_a_branch_on_a_tensor_is_a_graph_break_of_its_own_kind():
    def branch(x):
        if x.sum() > 0:
            return x + 1
        return x - 1

    capture = trace(branch, torch.ones(2))
    assert capture.failure.kind is breaks.TENSOR_BRANCH


def helper(t):
    t = t + 1
    print("t")
    return t * 2


def calls_helper(x):
    return helper(x.sin()) - 1


def test_a_break_inside_an_inlined_call_names_both_frames():
    capture = trace(calls_helper, torch.ones(2))
    assert capture.failure.kind is breaks.PRINT
    assert len(capture.failure.user_frames) == 2  # helper's print, then the call
    assert capture.ops == ["sin", "add"]


def test_a_nested_stop_halts_inside_the_inlined_call():
    view = view_of(calls_helper, torch.ones(2))
    planner = StopPlanner(calls_helper.__code__, fullgraph=False)
    first = trace_frame(view)
    first.release()
    planner.after_break(first.failure)
    assert planner.nested_points()
    second = trace_frame(view, stop_at=planner.stop_at(),
                         nested_stops=planner.nested_points())
    second.release()
    assert second.ended == "stopped"
    assert [tracer.code.co_name for tracer in second.stop.frames] == ["calls_helper",
                                                                       "helper"]


def test_a_capture_is_frozen():
    capture = trace(pointwise, torch.ones(3))
    with pytest.raises(dataclasses.FrozenInstanceError):
        capture.returned = None


def test_printing_shows_graph_guards_side_effects_and_ending():
    text = str(trace(pointwise, torch.ones(3)))
    assert "graph:\n  l_x = input L['x']\n  sin = sin(l_x)\n  add = add(sin, 1)\n" in text
    assert "guards:" in text and "side effects:\n  (none)" in text
    assert text.endswith("returned: " + text.rsplit("returned: ", 1)[1])
    broken = str(trace(noisy, torch.ones(2)))
    assert "graph break: GB001 print, logging or warnings: print()" in broken


def test_printing_a_stop_names_the_instruction():
    view = view_of(noisy, torch.ones(2))
    first = trace_frame(view)
    first.release()
    index = first.failure.root_index
    stopped = trace_frame(view, stop_at=frozenset({index}))
    stopped.release()
    assert f"stopped: before instruction {index}" in str(stopped)
