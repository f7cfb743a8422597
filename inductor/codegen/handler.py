"""What the C++ and Triton `ops` handlers share: values, common subexpressions, mask scopes
and the primitives the table spells (`ir/primitives.py`).

Input: `ops.*` calls made by loop bodies inside a scope a kernel printer opens. Output: one
named value per distinct expression, its declaration handed to the backend (`declare`).
A primitive whose row has an `operator` prints as `a <operator> b` (`infix`, per backend:
integer narrowing in C++, bare literals in Triton); one whose row spells a function for this
backend (column `cpp` or `triton`) prints as a call (`call`); anything else is a method of
the backend's handler, or its `special` text, or an error carrying the row's reason.
"""
from __future__ import annotations

from typing import Callable, Optional

import torch

from inductor.ir.ops import OpsHandler
from inductor.ir.primitives import BY_NAME, Primitive


class Value:
    """A named value of a kernel (a temporary's name, or in Triton an inline constant) and
    its compute dtype; `bare` marks a Triton Python literal, not a tensor until wrapped."""

    __slots__ = ("name", "dtype", "bare")

    def __init__(self, name: str, dtype: torch.dtype, bare: bool = False):
        self.name = name
        self.dtype = dtype
        self.bare = bare

    def __str__(self) -> str:
        return self.name


class KernelOpsHandler(OpsHandler):
    """The base of both code generators' handlers. A subclass sets `language` (for errors),
    `column` (its spelling column of the table: "cpp" or "triton"), `conjunction` (its `and`
    of two masks), `value_type`, and defines `declare`, `infix` and `call`."""

    language = ""
    column = ""
    conjunction = "&&"
    value_type = Value

    def __init__(self, prefix: str = "tmp"):
        self.prefix = prefix
        self.cse: dict = {}
        self.count = 0
        self.predicate: Optional[str] = None
        self.indirect_count = 0

    # -- emission --------------------------------------------------------------------------
    def emit(self, text: str, dtype: torch.dtype) -> Value:
        """The value of expression `text`: a new temporary, or the one holding it already."""
        key = (text, dtype)
        if key in self.cse:
            return self.cse[key]
        name = f"{self.prefix}{self.count}"
        self.count += 1
        self.declare(name, text, dtype)
        value = self.value_type(name, dtype)
        self.cse[key] = value
        return value

    def declare(self, name: str, text: str, dtype: torch.dtype) -> None:
        raise NotImplementedError

    def under_mask(self, mask: str, body: Callable):
        """`body()` computed where `mask` (and every enclosing mask) holds; the values it
        computes are forgotten after it (they hold only there)."""
        saved = self.predicate
        self.predicate = mask if saved is None else \
            self.emit(f"{saved} {self.conjunction} {mask}", torch.bool).name
        saved_cse = dict(self.cse)
        result = body()
        self.cse = saved_cse
        self.predicate = saved
        return result

    # -- the table's primitives ------------------------------------------------------------
    def infix(self, row: Primitive, a, b) -> Value:
        raise NotImplementedError

    def call(self, row: Primitive, function: str, values: tuple) -> Value:
        raise NotImplementedError

    def special(self, name: str, values: tuple) -> Optional[Value]:
        """The backend's own text for a one-operand op without a method, or None."""
        return None

    def default(self, name, *args, **kwargs):
        row = BY_NAME.get(name)
        if row is not None and len(args) == row.arity:
            if row.operator is not None:
                return self.infix(row, *args)
            function = getattr(row, self.column)
            if function is not None:
                return self.call(row, function, args)
        value = self.special(name, args)
        if value is not None:
            return value
        reason = getattr(row, f"{self.column}_missing") if row is not None else ""
        raise NotImplementedError(f"{self.language} code generation has no operation {name!r}"
                                  + (f": {reason}" if reason else ""))
