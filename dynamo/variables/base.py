"""Abstract values of the symbolic interpreter: the base class and the stack's NULL marker.

Input: values flowing through a traced frame. Output: the operations the interpreter asks of
them (attribute reads, calls, iteration, truth), each answered with another `Variable` or by
raising `Unsupported`. Variables are immutable; the state of mutable containers and objects
lives in the side-effect tracker (`dynamo.variables.side_effects`) under the variable's `box`.

Every variable may carry the `Source` it was read from (how to fetch it from the frame again);
variables created during the trace have none.
"""
from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Optional

from dynamo.breaks import UNSUPPORTED_CALL, UNSUPPORTED_OBJECT, Unsupported
from guards.sources import Source

if TYPE_CHECKING:
    from dynamo.trace.interpreter import Tracer


class NotConstant(Exception):
    """Raised by `as_constant` when a variable has no single Python value at trace time."""


variable = dataclasses.dataclass(frozen=True, eq=False, repr=False)
"""Decorator for Variable subclasses: frozen, compared and hashed by identity."""


@variable
class Variable:
    """Base of every abstract value."""

    source: Optional[Source] = dataclasses.field(default=None, kw_only=True)

    # -- facts ---------------------------------------------------------------------------
    def python_type(self) -> type:
        """The type the real value would have."""
        raise Unsupported(UNSUPPORTED_OBJECT, f"the type of {self.describe()} is not known")

    def as_constant(self) -> Any:
        """The Python value, when it is fully known at trace time."""
        raise NotConstant(self.describe())

    def is_constant(self) -> bool:
        try:
            self.as_constant()
        except NotConstant:
            return False
        return True

    def describe(self) -> str:
        """How the value reads in a message to the user (never a framejit class name)."""
        if self.source is not None:
            return self.source.name()
        try:
            kind = self.python_type()
        except Exception:
            return "a value computed in the compiled region"
        return f"a {getattr(kind, '__name__', 'Python')} object"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.describe()})"

    # -- operations ------------------------------------------------------------------------
    def getattr(self, tx: "Tracer", name: str) -> "Variable":
        raise Unsupported(UNSUPPORTED_OBJECT, f"attribute {name!r} of {self.describe()}")

    def call(self, tx: "Tracer", args: list["Variable"], kwargs: dict[str, "Variable"]):
        raise Unsupported(UNSUPPORTED_CALL, f"calling {self.describe()}")

    def call_method(self, tx: "Tracer", name: str, args: list["Variable"],
                    kwargs: dict[str, "Variable"]) -> "Variable":
        """`self.name(*args, **kwargs)`; by default, read the attribute and call it."""
        return self.getattr(tx, name).call(tx, args, kwargs)

    def iterate(self, tx: "Tracer") -> list["Variable"]:
        """All items, for unpacking and `for` loops over finite containers."""
        raise Unsupported(UNSUPPORTED_OBJECT, f"iterating over {self.describe()}")

    def truth(self, tx: "Tracer") -> bool:
        """`bool(self)` at trace time; specialises (and guards) when needed. A value whose
        type defines neither `__bool__` nor `__len__` (functions, classes, modules) is true."""
        try:
            return bool(self.as_constant())
        except NotConstant:
            pass
        try:
            kind = self.python_type()
        except Unsupported:
            kind = None
        if kind is not None and not any(hasattr(kind, name) for name in ("__bool__", "__len__")):
            return True
        raise Unsupported(UNSUPPORTED_OBJECT, f"truth value of {self.describe()}")

    def has_attribute(self, tx: "Tracer", name: str) -> bool:
        raise Unsupported(UNSUPPORTED_OBJECT, f"hasattr on {self.describe()}")


@variable
class NullVariable(Variable):
    """The NULL CPython pushes below a callable (PUSH_NULL, LOAD_GLOBAL, LOAD_ATTR)."""

    def describe(self) -> str:
        return "NULL"


NULL = NullVariable()
