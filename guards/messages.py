"""Failure messages: how expected and actual values read in a reason (stage: guard; input: values;
output: text in the user's terms).

Every reason has the shape `<what>: expected <x>, got <y>`, where `<what>` is the source's name or
an expression over it (`L['x'].size()[0]`, `type(L['cfg'])`, `grad mode`). Values print the way a
user would write them: `torch.float32`, `cuda:0`, `'abc'`, `nan`, `-0.0`; other objects print by
type.
"""
from __future__ import annotations

import math
from typing import Any

import torch

_MAX_TEXT = 80


def mismatch(subject: str, expected: str, got: str) -> str:
    """The reason text `subject: expected X, got Y`."""
    return f"{subject}: expected {expected}, got {got}"


def type_name(cls: type) -> str:
    """A type's qualified name without its module (`dict`, `Config`, `Outer.Inner`); classes
    defined inside functions drop the `f.<locals>.` prefix."""
    return cls.__qualname__.rpartition("<locals>.")[2]


def type_names(expected: type, got: type) -> tuple[str, str]:
    """Names for two types, module-qualified when their short names would read the same."""
    short_expected, short_got = type_name(expected), type_name(got)
    if short_expected != short_got or expected is got:
        return short_expected, short_got
    return (f"{expected.__module__}.{expected.__qualname__}",
            f"{got.__module__}.{got.__qualname__}")


def show(value: Any) -> str:
    """A short readable rendering of a value for a reason."""
    if isinstance(value, torch.dtype):
        return str(value)
    if isinstance(value, torch.device):
        return str(value)
    if isinstance(value, torch.layout):
        return str(value)
    if type(value) is float:
        return _show_float(value)
    if type(value) is tuple:
        inner = ", ".join(show(item) for item in value)
        return f"({inner},)" if len(value) == 1 else f"({inner})"
    if type(value) in (int, bool, str, bytes, complex, type(None)):
        return _shorten(repr(value))
    if value is Ellipsis:
        return "Ellipsis"
    if isinstance(value, (int, float, complex, str, bytes)):
        return f"{_shorten(repr(value))} ({type_name(type(value))})"
    if isinstance(value, torch.Tensor):
        return (f"{type_name(type(value))}(size={list(value.shape)}, dtype={value.dtype}, "
                f"device={value.device})")
    if isinstance(value, type):
        return f"class {type_name(value)}"
    return _show_object(value)


def _show_float(value: float) -> str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return repr(value)


def _show_object(value: Any) -> str:
    kind = type(value)
    name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    if isinstance(name, str) and callable(value):
        return f"{type_name(kind)} {name}"
    if kind.__name__ == "module" and isinstance(name, str):
        return f"module {name}"
    return f"a {type_name(kind)} object"


def _shorten(text: str) -> str:
    if len(text) <= _MAX_TEXT:
        return text
    return text[: _MAX_TEXT - 3] + "..."


def show_flag(enabled: bool) -> str:
    """`enabled` / `disabled` for on/off state in reasons (`grad mode: expected enabled, ...`)."""
    return "enabled" if enabled else "disabled"
