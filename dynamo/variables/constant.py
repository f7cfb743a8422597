"""Immutable Python values known at trace time: numbers, strings, None, bools, dtypes, devices,
`torch.Size`, tuples of those, `slice`s, `range`s, enum members, `Ellipsis`.

Operations on them are folded at trace time (they are pure); the guards installed when they were
read from the frame keep that sound.
"""
from __future__ import annotations

import enum
import types
from typing import Any

import torch

from dynamo.breaks import UNSUPPORTED_CALL, UNSUPPORTED_OBJECT, Unsupported
from dynamo.variables.base import NotConstant, Variable, variable

CONSTANT_TYPES = (int, float, bool, str, bytes, complex, type(None), type(Ellipsis),
                  type(NotImplemented), torch.dtype, torch.device, torch.layout,
                  torch.memory_format, range, slice, enum.Enum, torch.finfo, torch.iinfo,
                  types.CodeType)


_SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)


def specialise(value: Any) -> Any:
    """The Python value of `value` (recursively through tuples): a symbolic size is fixed to
    its traced value, which its `ShapeEnv` records as a guard (see `dynamo.shapes`)."""
    if isinstance(value, torch.SymBool):
        return bool(value)
    if isinstance(value, torch.SymInt):
        return int(value)
    if isinstance(value, torch.SymFloat):
        return float(value)
    if type(value) in (tuple, torch.Size) and any(isinstance(item, _SYMBOLIC) for item in value):
        return type(value)(specialise(item) for item in value)
    return value


def is_constant_value(value: Any) -> bool:
    if isinstance(value, CONSTANT_TYPES):
        return True
    if type(value) in (tuple, torch.Size, frozenset):
        return all(is_constant_value(item) for item in value)
    return False


@variable
class ConstantVariable(Variable):
    value: Any

    def __post_init__(self):
        # A symbolic size must never leak into the graph or the glue as a constant: one that
        # reaches here is fixed to its traced value, which its ShapeEnv records as a guard.
        if isinstance(self.value, _SYMBOLIC) or (type(self.value) in (tuple, torch.Size) and any(
                isinstance(item, _SYMBOLIC) for item in self.value)):
            object.__setattr__(self, "value", specialise(self.value))

    def python_type(self) -> type:
        return type(self.value)

    def as_constant(self) -> Any:
        return self.value

    def describe(self) -> str:
        return repr(self.value) if self.source is None else super().describe()

    def getattr(self, tx, name: str) -> Variable:
        try:
            attribute = getattr(self.value, name)
        except AttributeError:
            raise Unsupported(UNSUPPORTED_OBJECT, f"{type(self.value).__name__} has no "
                              f"attribute {name!r}") from None
        if callable(attribute) and not isinstance(attribute, (type, *CONSTANT_TYPES)):
            return ConstantMethodVariable(self, name)
        return ConstantVariable(attribute)

    def has_attribute(self, tx, name: str) -> bool:
        return hasattr(self.value, name)

    def iterate(self, tx) -> list[Variable]:
        try:
            return [ConstantVariable(item) for item in self.value]
        except TypeError:
            raise Unsupported(UNSUPPORTED_OBJECT, f"iterating over {self.describe()}") from None

    def truth(self, tx) -> bool:
        return bool(self.value)


def _argument(tx, value: Variable) -> Any:
    """A constant argument: constants, containers of constants, or an iterator over
    constants (consumed, as the real method would consume it)."""
    # here, not at the top: variables.containers imports this module (a cycle)
    from dynamo.variables.containers import constant_copy
    # here, not at the top: variables.iterators imports this module (a cycle)
    from dynamo.variables.iterators import IteratorVariable
    if isinstance(value, IteratorVariable):
        return [item.as_constant() for item in tx.iterate(value)]
    return constant_copy(value)


@variable
class ConstantMethodVariable(Variable):
    """A method of a constant (`"a,b".split`, `dtype.to_complex`): folded when called."""

    owner: ConstantVariable
    name: str

    def call(self, tx, args, kwargs) -> Variable:
        try:
            values = [_argument(tx, arg) for arg in args]
            keywords = {key: _argument(tx, arg) for key, arg in kwargs.items()}
        except NotConstant as error:
            raise Unsupported(UNSUPPORTED_CALL, f"{type(self.owner.value).__name__}.{self.name} "
                              f"with a non-constant argument ({error})") from None
        try:
            result = getattr(self.owner.value, self.name)(*values, **keywords)
        except (ArithmeticError, LookupError, TypeError, ValueError) as error:
            # here, not at the top: variables.exceptions imports this module (a cycle)
            from dynamo.variables.exceptions import python_error
            raise python_error(type(error), *map(str, error.args[:1])) from None
        return tx.wrap_result(result)

    def describe(self) -> str:
        return f"{self.owner.describe()}.{self.name}"
