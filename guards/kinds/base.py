"""The guard protocol (stage: guard; input: a source and what was seen at capture; output: check
code, a failure reason, a description).

A guard is an immutable fact about one source's value that a compiled entry relies on. Guards of
one kind with the same source and the same expectation are equal, so a `GuardSet` keeps one.
Each guard can:

- `emit(writer)`: write its conditions into the generated check (see `guards.codegen`);
- `reason(value)`: `None` when the fetched value satisfies it, else the text of the first
  property that differs, in the user's terms (`L['x'].size()[0]: expected 4, got 8`);
- `describe()`: one readable line for logs and `explain()`.

`rank` orders guards in the check: cheap and discriminating checks run first.
"""
from __future__ import annotations

from typing import Any, Callable, ClassVar, Hashable

from guards.sources import Source

RANK_TYPE = 0
"""Exact type and identity: one pointer comparison each."""
RANK_VALUE = 1
"""Constants, None-ness, truthiness, lengths, dict keys, hasattr, module training flags."""
RANK_OBJECT = 2
"""Snapshots of user objects' attributes (mutation since capture)."""
RANK_TENSOR = 3
"""Tensor properties; all tensor guards run together."""
RANK_GLOBAL_STATE = 4
"""Torch global state, checked once per call."""


class Guard:
    """Base of every guard kind: a source plus the expectation captured for it."""

    rank: ClassVar[int] = RANK_VALUE
    source: Source

    def key(self) -> Hashable:
        """The expectation, as a hashable value: equal guards have equal kind, source and key."""
        raise NotImplementedError

    def emit(self, writer: Any) -> None:
        """Write this guard's conditions into a `guards.codegen.CheckWriter`."""
        raise NotImplementedError

    def reason(self, value: Any) -> str | None:
        """None if `value` (fetched from the source) satisfies the guard, else why not."""
        raise NotImplementedError

    def reason_in(self, value: Any, L: dict, G: dict) -> str | None:
        """`reason(value)`, for guards that also read other sources of the frame view (aliases,
        partitions): they override this."""
        return self.reason(value)

    def describe(self) -> str:
        """One readable line stating what the guard requires."""
        raise NotImplementedError

    def holds(self, L: dict, G: dict) -> bool:
        """Slow-path check of this guard alone against a frame view; never raises."""
        try:
            return self.reason_in(self.source.fetch(L, G), L, G) is None
        except Exception:
            return False

    def watch(self, callback: Callable[[Guard], None]) -> None:
        """Ask to be told (once) when the guard can never hold again; most guards never die."""

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.source == other.source and self.key() == other.key()

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.source, self.key()))

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.describe()}>"
