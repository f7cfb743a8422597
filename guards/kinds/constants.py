"""Constant equality (stage: guard; input: a source and a constant seen at capture; output:
conditions that accept exactly the same constant).

"Same" is strict, because compiled code may have folded the value in:

- the exact type must match (`True` is not `1`, `1` is not `1.0`, a `str` subclass is not `str`);
- floats compare by value, except that `nan` matches `nan` and `-0.0` does not match `0.0`
  (they differ under `1 / x`, `math.copysign`, `atan2`); complex numbers apply this per part;
- tuples match element by element under the same rules;
- `torch.dtype`, `torch.layout`, `torch.memory_format`, `None` and `...` match by identity,
  `torch.device` by type and equality.
"""
from __future__ import annotations

import math
from typing import Any, Hashable

import torch

from guards import messages
from guards.kinds.base import RANK_VALUE, Guard
from guards.sources import Source

_SINGLETON_TYPES = (torch.dtype, torch.layout, torch.memory_format)
_SCALAR_TYPES = (int, float, complex, bool, str, bytes)


def is_constant(value: Any) -> bool:
    """Whether `value` can be guarded by constant equality (and baked into compiled code)."""
    kind = type(value)
    if kind in _SCALAR_TYPES or kind in _SINGLETON_TYPES or kind is torch.device:
        return True
    if value is None or value is Ellipsis:
        return True
    if kind is tuple:
        return all(is_constant(item) for item in value)
    return False


def constant_key(value: Any) -> Hashable:
    """A hashable key equal for two constants exactly when they match under the strict rules."""
    kind = type(value)
    if kind is float:
        return (float, "nan" if math.isnan(value) else repr(value))
    if kind is complex:
        return (complex, constant_key(value.real), constant_key(value.imag))
    if kind is tuple:
        return (tuple, tuple(constant_key(item) for item in value))
    if kind in _SINGLETON_TYPES or value is None or value is Ellipsis:
        return (kind, id(value))
    return (kind, value)


def constants_match(expected: Any, value: Any) -> bool:
    """Whether `value` is the same constant as `expected` under the strict rules."""
    if type(value) is not type(expected):
        return False
    try:
        return constant_key(value) == constant_key(expected)
    except TypeError:
        return False


def _float_conditions(code: str, expected: float, writer: Any) -> list[str]:
    if math.isnan(expected):
        return [f"{code} != {code}"]
    if math.isinf(expected):
        return [f"{code} == {writer.bind(expected, 'inf' if expected > 0 else 'minus_inf')}"]
    if expected == 0.0:
        copysign = writer.bind(math.copysign, "copysign")
        sign = "-1.0" if math.copysign(1.0, expected) < 0 else "1.0"
        return [f"{code} == 0.0", f"{copysign}(1.0, {code}) == {sign}"]
    return [f"{code} == {expected!r}"]


def constant_conditions(code: str, expected: Any, writer: Any) -> list[str]:
    """Conditions over the expression `code` that hold exactly when it matches `expected`."""
    kind = type(expected)
    if expected is None or expected is Ellipsis:
        return [f"{code} is {expected!r}"]
    if kind is bool:
        return [f"{code} is {expected!r}"]
    if kind in _SINGLETON_TYPES:
        return [f"{code} is {writer.bind(expected, str(expected).replace('torch.', ''))}"]
    type_name = writer.bind(kind, kind.__name__)
    conditions = [f"type({code}) is {type_name}"]
    if kind is float:
        return conditions + _float_conditions(code, expected, writer)
    if kind is complex:
        return (conditions + _float_conditions(f"{code}.real", expected.real, writer)
                + _float_conditions(f"{code}.imag", expected.imag, writer))
    if kind is tuple:
        conditions.append(f"len({code}) == {len(expected)}")
        for index, item in enumerate(expected):
            conditions += constant_conditions(f"{code}[{index}]", item, writer)
        return conditions
    if kind is torch.device:
        return conditions + [f"{code} == {writer.bind(expected, 'device_' + str(expected))}"]
    return conditions + [f"{code} == {expected!r}"]


def emit_native_constant(variable: str, expected: Any, writer: Any) -> bool:
    """Check in the writer's native program that `variable` is the constant `expected`;
    returns False, writing nothing, when `variable` is not native or the program cannot
    compare such a constant (tuples, complex numbers, devices stay Python)."""
    if not writer.native(variable):
        return False
    kind = type(expected)
    if expected is None or expected is Ellipsis or kind is bool:
        writer.check_is(variable, expected, repr(expected))
        return True
    if kind in _SINGLETON_TYPES:
        writer.check_is(variable, expected,
                        writer.bind(expected, str(expected).replace("torch.", "")))
        return True
    return writer.check_constant(variable, expected)


def show_difference(expected: Any, value: Any) -> tuple[str, str]:
    """Renderings of two differing constants that read as different (types added when needed)."""
    expected_text, got_text = messages.show(expected), messages.show(value)
    if expected_text == got_text:
        expected_name, got_name = messages.type_names(type(expected), type(value))
        expected_text += f" ({expected_name})"
        got_text += f" ({got_name})"
    return expected_text, got_text


class ConstantGuard(Guard):
    """The value equals a constant, strictly (see the module docstring): `L['n'] == 4`."""

    rank = RANK_VALUE

    def __init__(self, source: Source, value: Any) -> None:
        if not is_constant(value):
            raise TypeError(f"{source.name()}: a {type(value).__name__} is not a constant; "
                            "guard it by type, identity or its parts instead")
        self.source = source
        self.value = value

    def key(self) -> Hashable:
        return constant_key(self.value)

    def emit(self, writer: Any) -> None:
        variable = writer.value(self.source)
        writer.comment(self.describe())
        if not emit_native_constant(variable, self.value, writer):
            writer.require(constant_conditions(writer.export(variable), self.value, writer))

    def reason(self, value: Any) -> str | None:
        if constants_match(self.value, value):
            return None
        return messages.mismatch(self.source.name(), *show_difference(self.value, value))

    def describe(self) -> str:
        return f"{self.source.name()} == {messages.show(self.value)}"
