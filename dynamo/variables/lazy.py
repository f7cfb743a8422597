"""Values read from the frame but not yet used: moving them installs no guard.

Input: a real value and the source it was read from (an argument of the compiled frame, or a
local or stack item a resumed region starts with). Output: a `LazyVariable` that loads,
stores, stack shuffles, `return` and graph breaks carry as it is; the first operation that
looks at it (the tracer's `pop`/`peek`) turns it into a real variable, installing the guards
that make specialising on it sound. A loop counter that only reaches `print` is never guarded,
so each iteration of a loop with a graph break reuses one compiled region.
"""
from __future__ import annotations

from typing import Any, Callable, Optional

from dynamo.breaks import UNSUPPORTED_OBJECT, Unsupported
from dynamo.variables.base import Variable, variable


@variable
class LazyVariable(Variable):
    """A real value with a source; `memo[0]` holds its realised variable once there is one."""

    value: Any
    memo: list  # [None] until realised, then [variable]; shared by every copy
    factory: Optional[Callable] = None  # builds the variable instead of `tx.wrap`
    is_real: bool = True

    @staticmethod
    def of(value: Any, source, factory: Optional[Callable] = None) -> "LazyVariable":
        return LazyVariable(value, [None], factory, source=source)

    def describe(self) -> str:
        return self.source.name() if self.source is not None else "a value"

    def realize(self, tx) -> Variable:
        if self.memo[0] is None:
            if self.factory is not None:
                self.memo[0] = self.factory()
            else:
                self.memo[0] = tx.wrap(self.value, self.source)
        return self.memo[0]

    def python_type(self) -> type:
        return type(self.value)


def realize(tx, value: Variable) -> Variable:
    """The variable to operate on: lazy values are realised, others returned as they are."""
    return value.realize(tx) if type(value) is LazyVariable else value


def is_unbound(tx, value: Variable, unbound: Any) -> bool:
    """Whether a local a region started with holds the unbound marker (guarded either way):
    3.12's `LOAD_FAST_AND_CLEAR` saves such a local as NULL, not as the marker."""
    if type(value) is not LazyVariable or value.memo[0] is not None:
        return False
    from guards import IdentityGuard, TypeGuard
    if value.value is unbound:
        tx.guards.add(IdentityGuard(value.source, unbound))
        return True
    tx.guards.add(TypeGuard(value.source, type(value.value)))
    return False


def check_bound(tx, value: Variable, unbound: Any, name: str) -> None:
    """Reading a local a region started with: guard that it is still bound (by its type),
    or stop here if it is not (eager code raises UnboundLocalError)."""
    if type(value) is not LazyVariable or value.memo[0] is not None:
        return
    from guards import IdentityGuard, TypeGuard
    if value.value is unbound:
        tx.guards.add(IdentityGuard(value.source, unbound))
        raise Unsupported(UNSUPPORTED_OBJECT, f"local {name!r} read before assignment "
                          "(UnboundLocalError)")
    tx.guards.add(TypeGuard(value.source, type(value.value)))
