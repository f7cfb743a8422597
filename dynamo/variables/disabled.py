"""Calls the user asked never to capture: `dynamo.disable` and torch's disable decorators.

Input: a real function the traced program calls, and its arguments. Output: a graph break
(`DISABLED`) for a function marked with `dynamo.disable`, `torch.compiler.disable` or
`torch._dynamo.disable` (read from the attributes torch 2.11-2.14 set on the wrapper they
return, `_torchdynamo_disable` and friends; `torch._dynamo` is never imported), the variable
of a `dynamo.disable()` scope object (entering it is the one break of a `with dynamo.disable():`
block), a graph break with a plain reason for `dynamo.set_stance(...)`, or None for any
other function.

At run time the break's call runs the function with capture off (`dynamo.driver` answers
torch's wrapper frames with `hook.DISABLE`; `dynamo.disable` wrappers turn it off themselves).
"""
from __future__ import annotations

from typing import Any, Optional

from dynamo.breaks import DISABLED, UNSUPPORTED_CALL, Unsupported
from dynamo.variables.base import Variable, variable


def torch_disable_marks(function: Any) -> Optional[tuple[Any, bool, Optional[str]]]:
    """(the function torch's disable wrapper wraps, recursive?, the reason given) when
    `function` is such a wrapper, else None."""
    attributes = getattr(function, "__dict__", None)
    if not isinstance(attributes, dict) or attributes.get("_torchdynamo_disable") is not True:
        return None
    original = attributes.get("_torchdynamo_orig_callable", function)
    recursive = attributes.get("_torchdynamo_disable_recursive", True) is not False
    return original, recursive, attributes.get("_torchdynamo_disable_msg")


def disabled_call(function: Any, args: list, kwargs: dict) -> Optional[Variable]:
    """Raise the graph break of a call to a disabled function; the scope variable of
    `dynamo.disable()`; None for a function that may be traced."""
    attributes = getattr(function, "__dict__", None)
    if not isinstance(attributes, dict):
        return None
    if attributes.get("_framejit_disable_scope") is True:
        if args or kwargs:
            raise Unsupported(DISABLED, "dynamo.disable(...) applied inside a jitted function "
                              "(decorate the function where it is defined instead)")
        return DisableScopeVariable(function())
    if attributes.get("_framejit_stance") is True:
        raise Unsupported(UNSUPPORTED_CALL, "dynamo.set_stance(...) inside a jitted function "
                          "runs eagerly; the new stance applies from the next frame on")
    if attributes.get("_framejit_disabled") is True:
        raise Unsupported(DISABLED, f"{_name(function)} is marked dynamo.disable")
    marks = torch_disable_marks(function)
    if marks is None:
        return None
    original, _recursive, message = marks
    detail = f"{_name(original)} is marked torch.compiler.disable"
    raise Unsupported(DISABLED, f"{detail} ({message})" if message else detail)


def _name(function: Any) -> str:
    return getattr(function, "__qualname__", None) or repr(function)


@variable
class DisableScopeVariable(Variable):
    """The object `dynamo.disable()` returns: entering it inside a jitted function is one graph
    break, after which the block (and the rest of the call) runs eagerly."""

    value: Any
    is_real: bool = True  # rebuilt as the object itself at the break

    def python_type(self) -> type:
        return type(self.value)

    def describe(self) -> str:
        return "dynamo.disable()"

    def enter(self, tx):
        raise Unsupported(DISABLED, "a `with dynamo.disable():` block runs eagerly, and so "
                          "does the rest of this function call after it")
