"""Mutable state seen while tracing, and the mutations to replay after the graph runs.

Input: mutations of lists, dicts, sets, objects, globals and closure cells performed by the
traced program. Output: a replay plan for the rewritten frame (`SideEffects.pending()`).

Nothing is mutated during tracing. Each mutable value is a `Box`: a container variable points at
its box, and the box holds the current contents as variables. Boxes of objects that existed
before the frame ran carry the source to reach them; when such a box changes, the change is
replayed on the real object after the compiled graph has run. Boxes of objects created during
the trace need no replay: they are rebuilt where they escape.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Optional

from guards.sources import Source


@dataclasses.dataclass(eq=False)
class Box:
    """The current contents of one mutable value."""

    kind: str  # "list", "dict", "set", "object", "cell", "globals"
    contents: Any  # list[Variable] | dict[key, Variable] | dict[attr, Variable] | Variable
    source: Optional[Source] = None  # set for values that existed before the frame ran
    real: Any = None  # the real pre-existing object (held only while tracing)
    mutated: bool = False
    python_type: Optional[type] = None
    deleted: set = dataclasses.field(default_factory=set)  # object attributes deleted

    @property
    def preexisting(self) -> bool:
        return self.source is not None

    def touch(self) -> None:
        self.mutated = True


class SideEffects:
    """All boxes of pre-existing values, in the order they were first seen."""

    def __init__(self):
        self._by_id: dict[tuple[int, str], Box] = {}
        self._order: list[Box] = []
        self._keepalive: list[Any] = []
        # calls made after the graph instead of during the trace, in program order: a real
        # function and its argument variables (`logger.warning_once(message)`, see special.py)
        self.deferred_calls: list[tuple[Any, list]] = []

    def box_for(self, real: Any, facet: str = "") -> Optional[Box]:
        """The box already made for a pre-existing object, if any (keeps aliasing right).

        `facet` tells apart two boxes of one object: a dict subclass instance has its items
        (facet "") and its instance attributes (facet "attributes").
        """
        return self._by_id.get((id(real), facet))

    def track(self, box: Box, facet: str = "") -> Box:
        if box.real is not None:
            self._by_id[(id(box.real), facet)] = box
            self._keepalive.append(box.real)
        self._order.append(box)
        return box

    def pending(self) -> list[Box]:
        """Boxes of pre-existing values whose contents changed, in first-seen order."""
        return [box for box in self._order if box.mutated]

    def release(self) -> None:
        """Drop references to real objects once code generation is done."""
        for box in self._order:
            box.real = None
        self._by_id.clear()
        self._keepalive.clear()
