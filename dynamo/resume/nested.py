"""Stage "resume", part 6: graph breaks inside inlined calls resume inside them.

Input: the chain of frames the tracer was in when a break happened (the compiled frame, then
each inlined call). Output: a *nested stop*: the compiled frame's skeleton runs the breaking
instruction itself (a copy, placed where the compiled frame's call is, so that frame's `try`
blocks apply), and one region then finishes every inlined call, innermost first, and goes on
in the compiled frame -- two graphs where splitting at the outermost call gives four.

    def helper(t):            def f(x):
        t = t + 1                 y = x.sin()
        print(t)   # break        return helper(y) - 1
        return t * 2
                              graph 1: sin, + 1      print(t) runs      graph 2: * 2, - 1

A call qualifies when the caller's CALL instruction made it (not a builtin that instruction
called, like `map` or a sort key: its result is not the instruction's), is a plain Python
function (its closure is real), has no cells of its own, is not a generator, and the break
point is neither in a loop nor in a `try` of it; the chain is cut at the first call that does
not, which then runs as a frame of its own.
"""
from __future__ import annotations

import dataclasses
import sys
import types
from typing import Optional

from bytecode import Instr

from dynamo import _frame_state
from dynamo.instructions import decode
from dynamo.resume import analysis
from dynamo.resume.regions import entry_position, region_info

CALLS = ("CALL", "CALL_FUNCTION_EX")
_COPYABLE = {"CALL", "CALL_FUNCTION_EX", "BINARY_SUBSCR", "BINARY_OP", "COMPARE_OP",
             "CONTAINS_OP", "IS_OP", "UNARY_NEGATIVE", "UNARY_NOT", "UNARY_INVERT", "GET_ITER",
             "FORMAT_VALUE", "BUILD_STRING", "BUILD_TUPLE", "BUILD_LIST", "LOAD_ATTR",
             "STORE_SUBSCR", "STORE_ATTR", "LOAD_CONST", "PUSH_NULL", "KW_NAMES", "PRECALL",
             "COPY", "SWAP", "POP_TOP", "LIST_EXTEND", "LIST_TO_TUPLE", "BUILD_MAP",
             "DICT_MERGE", "DICT_UPDATE", "CALL_INTRINSIC_1"}


@dataclasses.dataclass(frozen=True)
class NestedPlan:
    """Where to stop: (code, instruction index) per frame, the compiled frame first."""

    points: tuple


def plan(chain: list) -> Optional[NestedPlan]:
    """The deepest resumable stop for a break met with this chain of frames, or None."""
    if len(chain) < 2 or chain[0].opname not in CALLS:
        return None
    if analysis.handling(decode(chain[0].code)).get(chain[0].index, 0):
        return None  # the call is in an `except` body: see analysis.stop_at
    depth = 0
    for position in range(1, len(chain)):
        frame = chain[position]
        if not _resumable(frame) or not _copyable(frame.code, frame.index):
            break
        depth = position
        if frame.opname not in CALLS:
            break
    if depth == 0:
        return None
    return NestedPlan(tuple((frame.code, frame.index) for frame in chain[:depth + 1]))


def _resumable(frame) -> bool:
    function = frame.function
    code = frame.code
    if not frame.direct:  # called by a builtin (`list(map(f, xs))`): its result is not the
        return False      # caller's instruction's
    if not isinstance(function, types.FunctionType) or function.__code__ is not code:
        return False
    if frame.is_generator or code.co_cellvars or region_info(code) is not None:
        return False
    decoded = decode(code)
    if decoded.instructions[frame.index].handler is not None:
        return False  # a `try` of the callee would not see an exception raised by the copy
    return not analysis.enclosing_loops(decoded, frame.index)


def _copyable(code, index: int) -> bool:
    decoded = decode(code)
    last = analysis._span_end(decoded.instructions, index, _unknown_layout())
    if last is None:
        return False
    return all(instruction.opname in _COPYABLE
               for instruction in decoded.instructions[index:last + 1])


def _unknown_layout() -> tuple:
    return ()


def finish(points: tuple, tracers: list) -> Optional[analysis.Stop]:
    """The stop in the compiled frame once the trace reached the nested point: `tracers`
    are the frames' tracers, the compiled frame first."""
    root, innermost = tracers[0], tracers[-1]
    code, index = points[-1]
    decoded = decode(code)
    layout = innermost.layout()
    if None in layout or any(None in tracer.layout() for tracer in tracers):
        return None
    last = analysis._span_end(decoded.instructions, index, layout)
    if last is None:
        return None
    before = layout
    for position in range(index, last):
        before = analysis._after(decoded.instructions[position], before)
        if before is None:
            return None
    edges = analysis._edges(decoded, decoded.instructions[last], before)
    if not edges or len(edges) != 1 or edges[0].jumps:
        return None
    inner = tuple(analysis.InnerFrame(tracer.code, tracer.current.index + 1,
                                      tracer.layout() + (False,)) for tracer in tracers[1:-1])
    inner += (analysis.InnerFrame(code, edges[0].target, edges[0].layout),)
    below = root.layout()
    edge = analysis.Edge(root.current.index + 1, below + (False, False), inner=inner)
    return analysis.Stop(root.current.index, root.current.index, below + (False,) + layout,
                         (edge,), copied=_copy(code, decoded, index, last), points=points)


def _copy(code, decoded, first: int, last: int) -> tuple:
    """The callee's instructions `first..last`, for the compiled frame's skeleton."""
    body = decoded.body
    start = entry_position(decoded, first)
    end = decoded.instructions[last].origin
    return tuple(Instr(item.name, item.arg, location=item.location)
                 for item in body[start:end + 1] if isinstance(item, Instr))


def resume_calls(inner: tuple, stack: tuple, codes: tuple):
    """Finish the inlined call `inner[0]` eagerly and return its result (region prologues
    call this; the tracer models it instead). `codes` holds the call's region, which itself
    finishes `inner[1]` first (passed on as raw state) when there is one, so callers stay on
    the frame stack while their callees finish. A call that a class call made to initialise
    an instance gives its caller the instance. The region runs with this helper's frame
    hidden (its `f_back` is the caller's frame, as in eager), and an exception leaves
    without this helper in its traceback."""
    try:
        function, below, values, constructs = inner[0]
        items = stack if len(inner) == 1 else below + (inner[1:], stack)
        region = types.FunctionType(codes[0], function.__globals__, function.__name__, None,
                                    function.__closure__)
        state = (items, values)
        arguments = (None, state) if codes[0].co_argcount == 2 else (state,)
        value = _frame_state.call(region, *arguments)[1][0]
        if constructs:
            if value is not None:
                raise TypeError(f"__init__() should return None, not "
                                f"'{type(value).__name__}'")
            value = constructs[0]
    except BaseException as error:
        entry = error.__traceback__
        if entry is not None and entry.tb_frame is sys._getframe():
            error.__traceback__ = entry.tb_next
        raise
    return value
