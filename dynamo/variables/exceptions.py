"""Exceptions raised and caught inside the traced region.

Input: a `raise` in traced code (or a builtin operation that raises: a missing key, an index
out of range, an exhausted iterator, a missing attribute). Output: an `ExceptionVariable`
carried by `RaisedInTrace`, which the interpreter delivers to the innermost `try` of the traced
frames (`dynamo.trace.handlers.exceptions.unwind`). An exception no traced frame catches stops
the trace (the frame runs eagerly, where it raises for real).
"""
from __future__ import annotations

from typing import Any

from dynamo.variables.side_effects import Box
from dynamo.variables.base import NotConstant, Variable, variable
from dynamo.variables.constant import ConstantVariable
from dynamo.variables.attributes import MISSING, class_lookup, generic_getattr, python_override
from dynamo.variables.containers import TupleVariable


@variable
class ExceptionVariable(Variable):
    """An exception object created during the trace. `state.contents` holds `args`, the
    chaining attributes and any instance attributes."""

    python_class: type
    state: Box

    @staticmethod
    def new(cls: type, args: tuple) -> "ExceptionVariable":
        contents = {"args": TupleVariable(tuple(args)), "__cause__": ConstantVariable(None),
                    "__context__": ConstantVariable(None),
                    "__suppress_context__": ConstantVariable(False),
                    "__traceback__": ConstantVariable(None)}
        return ExceptionVariable(cls, Box("object", contents, python_type=cls))

    def python_type(self) -> type:
        return self.python_class

    def describe(self) -> str:
        try:
            return f"{self.python_class.__name__}{self.as_constant().args!r}"
        except NotConstant:
            return f"a {self.python_class.__name__}"

    def as_constant(self) -> Any:
        """The real exception, for builtin exception classes with constant arguments."""
        if self.python_class.__module__ != "builtins":
            raise NotConstant(self.python_class.__name__)
        args = self.state.contents["args"].as_constant()
        return self.python_class(*args)

    def getattr(self, tx, name: str) -> Variable:
        if name in self.state.contents:
            return self.state.contents[name]
        return generic_getattr(tx, self, self.python_class, name, self.state)

    def has_attribute(self, tx, name: str) -> bool:
        return name in self.state.contents or hasattr(self.python_class, name)

    def attribute_box(self, tx) -> Box:
        return self.state

    def pending_attributes(self, tx) -> Box:
        return self.state

    def real_object(self) -> Any:
        return MISSING

    def set_args(self, args: tuple) -> None:
        self.state.contents["args"] = TupleVariable(tuple(args))

    def text(self, tx, converter) -> Variable:
        """`str(exception)` / `repr(exception)`, when the class keeps the builtin ones."""
        # here, not at the top: variables.construct imports this module (a cycle)
        from dynamo.variables.construct import _builtin_base
        base = _builtin_base(self.python_class)
        name = "__str__" if converter is str else "__repr__"
        if class_lookup(self.python_class, name) is not class_lookup(base, name):
            function = python_override(self.python_class, name)
            if function is None:
                raise NotConstant(f"{self.python_class.__name__}.{name}")
            return tx.wrap(function, None).call(tx, [self], {})
        proxy = base(*self.state.contents["args"].as_constant())
        text = converter(proxy)
        if converter is repr:
            text = self.python_class.__name__ + text[len(base.__name__):]
        return ConstantVariable(text)

    def rebuild(self, plan) -> str:
        """A fresh exception of the same class with the same arguments and attributes (once:
        two references stay one object)."""
        existing = plan.rebuilt(id(self.state))
        if existing is not None:
            return existing
        kind = plan.bind(self.python_class, self.python_class.__name__)
        args = plan.reconstruct(self.state.contents["args"])
        name = plan.remember(id(self.state), f"{kind}.__new__({kind}, *{args})")
        plan.statements.append(f"{name}.args = {args}")
        for attribute, value in self.state.contents.items():
            if attribute in ("args", "__traceback__", "__suppress_context__") or \
                    (attribute in ("__cause__", "__context__") and value.is_constant()):
                continue
            plan.statements.append(f"object.__setattr__({name}, {attribute!r}, "
                                   f"{plan.reconstruct(value)})")
        return name

    def message(self) -> str:
        try:
            return f"{self.python_class.__name__}: {self.as_constant()}"
        except NotConstant:
            return self.python_class.__name__


class RaisedInTrace(Exception):
    """Control flow of the tracer: `exception` (a variable) is being raised in traced code."""

    def __init__(self, exception: ExceptionVariable):
        super().__init__(exception.message())
        self.exception = exception


def python_error(cls: type, *message: str) -> RaisedInTrace:
    """The exception a builtin operation raises, ready to `raise`."""
    return RaisedInTrace(ExceptionVariable.new(cls, tuple(ConstantVariable(text)
                                                          for text in message)))


def is_exception_class(value: Any) -> bool:
    return isinstance(value, type) and issubclass(value, BaseException)
