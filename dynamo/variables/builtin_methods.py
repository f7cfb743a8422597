"""Methods of Python's builtin types taken from the type: `dict.get`, `list.append`,
`object.__setattr__`, `OrderedDict.__setitem__`, `str.join`, and `object.__new__`.

Input: such a method descriptor and the arguments of a call (the instance first). Output: the
builtin behaviour on the instance's variable, bypassing Python overrides of its class — which
is what `super().__setitem__(key, value)` inside a dict subclass, or `object.__setattr__(self,
name, value)` inside a `__setattr__` override, asks for.
"""
from __future__ import annotations

import collections
from typing import Any

from dynamo.breaks import UNSUPPORTED_CALL, Unsupported
from dynamo.variables.base import NotConstant, Variable, variable
from dynamo.variables.constant import ConstantVariable
from dynamo.variables import attributes, operators
from dynamo.variables.construct import allocate
from dynamo.variables.containers import (DictVariable, ListVariable, SetVariable, TupleVariable,
                                         constant_key)
from dynamo.variables.objects import tx_getattr
from dynamo.variables.operators import identity

_DESCRIPTOR_KINDS = ("method_descriptor", "wrapper_descriptor", "classmethod_descriptor")
_IMMUTABLE = (str, bytes, int, float, complex, bool, tuple, frozenset, type(None))
NONE = ConstantVariable(None)


def is_method_descriptor(value: Any) -> bool:
    """A method of a builtin type, unbound (`dict.get`, `object.__setattr__`)."""
    return type(value).__name__ in _DESCRIPTOR_KINDS and \
        isinstance(getattr(value, "__objclass__", None), type)


@variable
class SlotFunctionVariable(Variable):
    """A method descriptor of a builtin type; calling it applies the builtin behaviour."""

    value: Any
    is_real: bool = True

    def python_type(self) -> type:
        return type(self.value)

    def as_constant(self) -> Any:
        return self.value

    def describe(self) -> str:
        return f"{self.value.__objclass__.__name__}.{self.value.__name__}"

    def call(self, tx, args, kwargs) -> Variable:
        if not args:
            raise Unsupported(UNSUPPORTED_CALL, f"{self.describe()}() without an instance "
                              "(TypeError)")
        owner, rest = args[0], list(args[1:])
        objclass, name = self.value.__objclass__, self.value.__name__
        if type(self.value).__name__ == "classmethod_descriptor":
            return _class_method(tx, self, owner, name, rest, kwargs)
        if objclass is object:
            return _object_method(tx, owner, name, rest, kwargs)
        if objclass is BaseException and name == "__init__" and not kwargs and \
                hasattr(owner, "set_args"):
            owner.set_args(tuple(rest))
            return NONE
        if isinstance(owner, (DictVariable, ListVariable, SetVariable, TupleVariable)) and \
                issubclass(owner.python_type(), objclass):
            # here, not at the top: a cycle (variables.container_methods -> variables.builder -> var
            from dynamo.variables.container_methods import call_container_method
            return call_container_method(tx, owner, name, rest, kwargs)
        if objclass in _IMMUTABLE:
            return _fold(tx, self, [owner, *rest], kwargs)
        raise Unsupported(UNSUPPORTED_CALL, f"{self.describe()} on {owner.describe()}")


def _object_method(tx, owner: Variable, name: str, args: list, kwargs: dict) -> Variable:
    if name == "__setattr__" and len(args) == 2 and not kwargs:
        attribute = tx.constant(args[0], "the attribute name")
        attributes.raw_store_attribute(tx, owner, attribute, args[1])
        return NONE
    if name == "__delattr__" and len(args) == 1 and not kwargs:
        attributes.raw_delete_attribute(tx, owner, tx.constant(args[0], "the attribute name"))
        return NONE
    if name == "__getattribute__" and len(args) == 1 and not kwargs:
        return attributes.raw_getattr(tx, owner, tx.constant(args[0], "the attribute name"))
    if name in ("__init__", "__init_subclass__") and not args and not kwargs:
        return NONE
    if name in ("__eq__", "__ne__") and len(args) == 1:
        same = identity(tx, owner, args[0])
        if name == "__eq__":
            return ConstantVariable(True if same else NotImplemented)
        return ConstantVariable(False if same else NotImplemented)
    raise Unsupported(UNSUPPORTED_CALL, f"object.{name} on {owner.describe()}")


def _class_method(tx, function: SlotFunctionVariable, owner: Variable, name: str, args: list,
                  kwargs: dict) -> Variable:
    cls = tx.constant(owner, "the class of a class method")
    if name == "fromkeys" and issubclass(cls, dict) and not kwargs:
        instance = allocate(tx, cls)
        value = args[1] if len(args) > 1 else NONE
        for key in tx.iterate(args[0]):
            instance.items[constant_key(key)] = value
        return instance
    return _fold(tx, function, [owner, *args], kwargs)


def _fold(tx, function: SlotFunctionVariable, args: list, kwargs: dict) -> Variable:
    try:
        values = [arg.as_constant() for arg in args]
        keywords = {key: value.as_constant() for key, value in kwargs.items()}
    except NotConstant:
        raise Unsupported(UNSUPPORTED_CALL, f"{function.describe()} with non-constant "
                          "arguments") from None
    try:
        if type(function.value).__name__ == "classmethod_descriptor":
            result = function.value.__get__(None, values[0])(*values[1:], **keywords)
        else:
            result = function.value(*values, **keywords)
    except Exception as error:
        raise Unsupported(UNSUPPORTED_CALL, f"{function.describe()} raised "
                          f"{type(error).__name__}: {error}") from None
    return tx.wrap_result(result)


def tuple_new(tx, cls_variable: Variable, iterable: Variable = None) -> Variable:
    """`tuple.__new__(cls, iterable)` (namedtuple classes build their instances this way)."""
    cls = tx.constant(cls_variable, "the class passed to tuple.__new__")
    items = tx.iterate(iterable) if iterable is not None else []
    return TupleVariable(tuple(items), cls)


def object_new(tx, cls_variable: Variable, *args, **kwargs) -> Variable:
    """`object.__new__(cls)` (and `dict.__new__`, `list.__new__`): an instance whose
    `__init__` has not run."""
    return allocate(tx, tx.constant(cls_variable, "the class passed to __new__"))


NEW_FUNCTIONS = (object.__new__, dict.__new__, list.__new__, collections.OrderedDict.__new__)


@variable
class GetterVariable(Variable):
    """`operator.itemgetter(*keys)`, `attrgetter(*names)`, `methodcaller(name, *args)`."""

    kind: str  # "item", "attribute" or "method"
    keys: tuple
    arguments: tuple = ()
    keywords: tuple = ()

    def call(self, tx, args, kwargs) -> Variable:
        target = args[0]
        if self.kind == "method":
            method = tx_getattr(tx, target, self.keys[0])
            return method.call(tx, list(self.arguments), dict(self.keywords))
        values = []
        for key in self.keys:
            if self.kind == "item":
                values.append(operators.subscript(tx, target, key))
            else:
                value = target
                for part in tx.constant(key, "an attribute name").split("."):
                    value = tx_getattr(tx, value, part)
                values.append(value)
        return values[0] if len(values) == 1 else TupleVariable(tuple(values))


def getter_rule(kind: str):
    def make(tx, *args, **kwargs) -> Variable:
        if kind == "method":
            return GetterVariable(kind, (tx.constant(args[0], "the method name"),), args[1:],
                                  tuple(kwargs.items()))
        return GetterVariable(kind, tuple(args))
    return make
