"""framejit's own values and code that the stages above `variables` hand to the tracer.

Input: registrations made at import by the stages that create such values (`dynamo.resume.state`
registers the `_frame_state` helpers and `resume_calls` that its generated code calls, and
says which of framejit's own code objects, its regions, may be traced, and which sources name
values a resumed frame starts with). Output: the special
variable for one of those values (`own_value`) and the answer to "may this code of framejit
be traced?" (`traceable_own_code`), asked by the builder and by inlining.

The table keeps `variables` below `resume`: the builder finds resume's callables here instead
of importing the stage that makes them.
"""
from __future__ import annotations

from types import CodeType
from typing import Any, Callable, Optional

from dynamo.variables.base import Variable
from guards.sources import LocalSource

# id(value) -> (value, make): `make()` builds the variable that stands for `value`
_OWN_VALUES: dict[int, tuple[Any, Callable[[], Variable]]] = {}
_TRACEABLE_OWN_CODE: list[Callable[[CodeType], bool]] = []
_FRAME_SOURCES: list[type] = [LocalSource]


def register_value(value: Any, make: Callable[[], Variable]) -> None:
    """Trace `value` (one of framejit's own objects) as the variable `make()` returns."""
    _OWN_VALUES[id(value)] = (value, make)


def register_traceable_code(predicate: Callable[[CodeType], bool]) -> None:
    """Let inlining trace framejit's own code objects for which `predicate` is true."""
    _TRACEABLE_OWN_CODE.append(predicate)


def register_frame_source(kind: type) -> None:
    """Sources of this kind name a value the frame starts with (a resumed region's locals and
    stack, as `LocalSource` names a function's arguments): ints read through them may be traced
    as symbols (`dynamo.shapes.policy`)."""
    _FRAME_SOURCES.append(kind)


def is_frame_source(source: Any) -> bool:
    """Whether `source` names a value the frame starts with."""
    return isinstance(source, tuple(_FRAME_SOURCES))


def own_value(value: Any) -> Optional[Variable]:
    """The variable registered for `value`, or None."""
    entry = _OWN_VALUES.get(id(value))
    if entry is None or entry[0] is not value:
        return None
    return entry[1]()


def traceable_own_code(code: CodeType) -> bool:
    """Whether `code`, framejit's own, was registered as traceable (a region)."""
    return any(predicate(code) for predicate in _TRACEABLE_OWN_CODE)
