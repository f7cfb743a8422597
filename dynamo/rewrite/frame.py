"""Stage "rewrite", for one frame: from a `Capture` to the code the rewritten frame runs.

Input: a `Capture` (dynamo.trace.capture) and, once planned, the compiled graph. Output:
`plan_glue`: the glue's plan (`GluePlan`: which tensors the graph outputs, the replay of
side effects, the returned value's expression), or the graph break met planning it;
`build_glue`: the glue function itself; `as_is`: the replacement that runs a frame's own
code (frames that run eagerly under the guards of their trace).

The replacement that calls the glue is `replacement.replacement_calling`, or, for a frame
with graph breaks, the skeleton of `dynamo.resume.stops`.
"""
from __future__ import annotations

import dataclasses
import weakref
from types import CodeType
from typing import Callable, Optional

from dynamo import hook
from dynamo.breaks import Unsupported, without_frames
from dynamo.instructions.decoding import decode_bytecode
from dynamo.rewrite import assemble
from dynamo.rewrite.glue import GluePlan
from dynamo.rewrite.raising import plan_error_path
from dynamo.rewrite.rebuild import replay, replay_calls, write_frame_cells
from dynamo.trace.capture import Capture


@dataclasses.dataclass(frozen=True)
class PlannedGlue:
    """The glue's plan and the expression it returns, or the break met planning them."""

    plan: Optional[GluePlan]
    returned: str = ""
    failure: Optional[Unsupported] = None


def plan_glue(capture: Capture, frame_globals: dict,
              result: Optional[Callable[[GluePlan], str]] = None) -> PlannedGlue:
    """Plan the glue of a capture that returned (`result` None: the returned value is
    rebuilt) or stopped (`result(plan)`: the state handed to the stop's skeleton)."""
    plan = GluePlan(frame_globals)
    plan.frame_cells = {id(cell.box): name for name, cell in capture.cells.items()}
    try:
        plan.error_path = plan_error_path(capture.graph, capture.side_effects.exception_path)
        returned = plan.reconstruct(capture.returned) if result is None else result(plan)
        replay(plan, capture.pending)
        write_frame_cells(plan, capture.own_cells(), every=capture.stop is not None)
        replay_calls(plan, capture.side_effects.deferred_calls)
        replay_calls(plan, capture.side_effects.early_calls, plan.early)
    except Unsupported as failure:  # kept: without the frames it passed (breaks.without_frames)
        return PlannedGlue(None, failure=without_frames(failure))
    return PlannedGlue(plan, returned)


def build_glue(code: CodeType, plan: GluePlan, compiled, input_sources: list,
               returned: str):
    """The glue function (never intercepted by the hook) and its source text. Its
    `error_path` attribute tells the replacement whether it may return `RUN_EAGERLY`."""
    if compiled is None:
        plan.error_path = None
    glue, text = plan.build(compiled, input_sources, returned,
                            name=f"{code.co_name}_glue" if code.co_name.isidentifier()
                            else "glue")
    hook.mark_skip(glue.__code__)
    glue.error_path = plan.error_path
    return glue, text


_as_is: "weakref.WeakKeyDictionary[CodeType, CodeType]" = weakref.WeakKeyDictionary()


def as_is(code: CodeType) -> CodeType:
    """`code` itself, with the all-positional signature a replacement has (cached)."""
    cached = _as_is.get(code)
    if cached is None:
        # the same instructions: the original's stack size holds (and `bytecode` cannot
        # compute it for a region that enters a `try` block in its middle)
        cached = _as_is[code] = assemble(decode_bytecode(code), code,
                                         stacksize=code.co_stacksize)
    return cached
