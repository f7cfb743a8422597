"""Objects a check compares against without keeping them alive (stage: guard; input: an object
seen at capture; output: a handle that knows its id and whether the object still lives).

A compiled entry must never be what keeps a user's object alive: entries live on code objects
(which outlive most programs' objects), so a strong reference from a check to a module, a class
or a function would keep it, and everything it holds, until `dynamo.reset()`. Guards therefore
hold the objects they compare against through a `HeldObject`: by weak reference when the object
allows it, and the guard set dies with the object (its check rejects every frame and the cache
drops the entry). Objects that cannot be weakly referenced (lists, dicts, ints) are held
strongly, so that their `id` is never reused while a check compares against it.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable

from guards import messages


class HeldObject:
    """An object a guard compares against by identity, held without keeping it alive if possible.

    Objects that allow weak references are held weakly; when one dies, `alive` turns False and
    every watcher is called once. Objects that do not (lists, dicts, ints...) are held strongly,
    so their `id` can never be reused while a check compares against it.
    """

    def __init__(self, target: Any) -> None:
        self.object_id = id(target)
        self.text = messages.show(target)
        self.alive = True
        self._watchers: list[Callable[[], None]] = []
        self._strong: Any = None
        try:
            # the weak reference (and through its callback, this object) is owned by this
            # object only: a live target never keeps a dead guard set alive
            self._reference: weakref.ref | None = weakref.ref(target, self._died)
        except TypeError:
            self._reference = None
            self._strong = target

    @property
    def weak(self) -> bool:
        """Whether the object is held by weak reference."""
        return self._reference is not None

    @property
    def reference(self) -> Any:
        """What a check binds to reach the object: the weak reference, or the object itself."""
        return self._reference if self._reference is not None else self._strong

    def _died(self, reference: weakref.ref) -> None:
        self.alive = False
        watchers, self._watchers = self._watchers, []
        for callback in watchers:
            callback()

    def watch(self, callback: Callable[[], None]) -> None:
        """Call `callback()` once when the object dies (at once if it already has)."""
        if not self.alive:
            callback()
        else:
            self._watchers.append(callback)

    def get(self) -> Any:
        """The object, or None once it has died."""
        return self._strong if self._reference is None else self._reference()
