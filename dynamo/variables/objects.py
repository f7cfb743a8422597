"""User objects, classes and `super()` as values.

A pre-existing object (`UserObjectVariable`) is read attribute by attribute, each read guarded
through its source; writes go to its `Box` and are replayed after the graph. Objects created
during the trace (`NewObjectVariable`) live only in their box and are rebuilt where they escape.
Attribute reads and writes follow Python's protocol (`dynamo.variables.attributes`).
"""
from __future__ import annotations

import functools
import types
from typing import Any, Optional

from dynamo.breaks import UNSUPPORTED_CALL, UNSUPPORTED_OBJECT, Unsupported
from dynamo.variables.side_effects import Box
from dynamo.variables.attributes import (MISSING, bind_class_attribute, class_attribute_source,
                                         class_lookup, generic_getattr, generic_hasattr,
                                         preexisting_box, python_override)
from dynamo.variables.base import NULL, NotConstant, Variable, variable
from guards.sources import AttrSource, Source, TypeSource
from dynamo.variables.attributes import guard_class_attribute
from dynamo.variables.containers import is_subclass_instance
from dynamo.variables.exceptions import RaisedInTrace
from dynamo.variables.functions import BoundMethodVariable
from dynamo.variables.lazy import realize

__all__ = ["UserObjectVariable", "NewObjectVariable", "ClassVariable", "SuperVariable",
           "class_lookup", "instance_getattr", "lookup_dunder", "load_method", "tx_getattr",
           "globals_box"]


@variable
class UserObjectVariable(Variable):
    """An object that existed before the frame ran."""

    value: Any
    is_real: bool = True

    def python_type(self) -> type:
        return type(self.value)

    def describe(self) -> str:
        return self.source.name() if self.source is not None else \
            f"a {type(self.value).__name__} object"

    def getattr(self, tx, name: str) -> Variable:
        return instance_getattr(tx, self, self.value, name, self.source)

    def has_attribute(self, tx, name: str) -> bool:
        if self.source is not None and python_override(type(self.value),
                                                       "__getattribute__") is not None:
            # a Python __getattribute__ (transformers' configs map names): hasattr is
            # getattr catching AttributeError, traced, so its guards are the reads it makes
            try:
                self.getattr(tx, name)
            except RaisedInTrace as raised:
                if issubclass(raised.exception.python_type(), AttributeError):
                    return False
                raise
            return True
        return generic_hasattr(type(self.value), name, tx.side_effects.box_for(self.value),
                               self.value, tx, self.source)

    def attribute_box(self, tx) -> Box:
        return preexisting_box(tx, self.value, self.source)

    def pending_attributes(self, tx) -> Optional[Box]:
        return tx.side_effects.box_for(self.value)

    def real_object(self) -> Any:
        return self.value

    def call(self, tx, args, kwargs) -> Variable:
        if isinstance(self.value, functools._lru_cache_wrapper):
            # its cache decides what a call does; only functions given a meaning of their
            # own (transformers' `warning_once`) are handled, the rest break the graph
            # here, not at the top: a cycle (variables.special -> variables.copying -> variables.obj
            from dynamo.variables.special import special_function
            special = special_function(tx, self.value, args, kwargs)
            if special is not None:
                return special
        method = lookup_dunder(tx, self, "__call__")
        if method is None:
            raise Unsupported(UNSUPPORTED_CALL, f"calling {self.describe()}")
        return method.call(tx, args, kwargs)

    def as_constant(self) -> Any:
        if isinstance(self.value, (types.FunctionType, type)):
            return self.value
        raise NotConstant(self.describe())


def instance_getattr(tx, owner: Variable, obj: Any, name: str, source: Optional[Source]):
    """`owner.name` for a pre-existing object `obj` (pending writes first)."""
    return generic_getattr(tx, owner, type(obj), name, tx.side_effects.box_for(obj), obj,
                           source)


@variable
class NewObjectVariable(Variable):
    """An instance of a user class created during the trace; `box.contents` is its `__dict__`."""

    cls: type
    box: Box

    def python_type(self) -> type:
        return self.cls

    def describe(self) -> str:
        return f"a new {self.cls.__name__} object"

    def getattr(self, tx, name: str) -> Variable:
        return generic_getattr(tx, self, self.cls, name, self.box)

    def has_attribute(self, tx, name: str) -> bool:
        return generic_hasattr(self.cls, name, self.box, MISSING)

    def attribute_box(self, tx) -> Box:
        return self.box

    def pending_attributes(self, tx) -> Box:
        return self.box

    def real_object(self) -> Any:
        return MISSING

    def call(self, tx, args, kwargs) -> Variable:
        method = lookup_dunder(tx, self, "__call__")
        if method is None:
            raise Unsupported(UNSUPPORTED_CALL, f"calling {self.describe()}")
        return method.call(tx, args, kwargs)


@variable
class ClassVariable(Variable):
    """A class (user class or builtin type) used as a value."""

    value: type
    is_real: bool = True

    def python_type(self) -> type:
        return type(self.value)

    def as_constant(self) -> Any:
        return self.value

    def describe(self) -> str:
        return f"class {self.value.__qualname__}"

    def getattr(self, tx, name: str) -> Variable:
        attribute = class_lookup(self.value, name)
        source = class_attribute_source(self.value, name) if self.source is None \
            else AttrSource(self.source, name)
        if attribute is MISSING:
            if hasattr(self.value, name):  # metaclass attributes: __name__, __mro__...
                return tx.wrap_result(getattr(self.value, name))
            raise Unsupported(UNSUPPORTED_OBJECT, f"class {self.value.__name__} has no "
                              f"attribute {name!r}")
        if isinstance(attribute, classmethod):
            return BoundMethodVariable(tx.wrap(attribute.__func__, None), self)
        if isinstance(attribute, staticmethod):
            return tx.wrap(attribute.__func__, None)
        return tx.wrap(getattr(self.value, name), source)

    def has_attribute(self, tx, name: str) -> bool:
        return hasattr(self.value, name)

    def call(self, tx, args, kwargs) -> Variable:
        # here, not at the top: variables.builtins imports this module (a cycle)
        from dynamo.variables.builtins import BUILTIN_RULES, PURE, BuiltinVariable
        if self.value in BUILTIN_RULES or self.value in PURE:  # `type(obj)(...)` of a builtin
            return BuiltinVariable(self.value).call(tx, args, kwargs)
        # here, not at the top: variables.construct imports this module (a cycle)
        from dynamo.variables.construct import construct
        tx.pass_direct(self, self.value)  # then to its `__init__` (construct.py)
        return construct(tx, self.value, args, kwargs)


@variable
class SuperVariable(Variable):
    """`super(cls, obj)`: attribute lookup starts after `cls` in `type(obj).__mro__`."""

    cls: Variable
    obj: Variable

    def getattr(self, tx, name: str) -> Variable:
        start = tx.constant(self.cls, "super()'s class")
        obj_type = self.obj.python_type() if not isinstance(self.obj, ClassVariable) \
            else self.obj.value
        mro = obj_type.__mro__
        for klass in mro[mro.index(start) + 1:]:
            if name in klass.__dict__:
                attribute = klass.__dict__[name]
                if isinstance(self.obj, ClassVariable) and isinstance(attribute, classmethod):
                    return BoundMethodVariable(tx.wrap(attribute.__func__, None), self.obj)
                bound = bind_class_attribute(tx, attribute, self.obj, obj_type, name)
                return bound if bound is not None else \
                    tx.wrap(attribute, class_attribute_source(klass, name))
        raise Unsupported(UNSUPPORTED_OBJECT, f"super() has no attribute {name!r}")


def zero_argument_super(tx) -> SuperVariable:
    """`super()` inside a method: the `__class__` cell and the first argument."""
    code = tx.code
    if "__class__" not in tx.cells or code.co_argcount == 0:
        raise Unsupported(UNSUPPORTED_CALL, "super() outside a method")
    first = code.co_varnames[0]
    obj = tx.read_local(first)
    if obj is not None:
        obj = realize(tx, obj)
    if obj is None and first in tx.cells:
        obj = tx.cells[first].contents(tx)
    if obj is None:
        raise Unsupported(UNSUPPORTED_CALL, f"super() with its first argument {first!r} unbound")
    return SuperVariable(tx.cells["__class__"].contents(tx), obj)


def lookup_dunder(tx, value: Variable, name: str) -> Optional[Variable]:
    """`type(value).name` bound to `value` when a Python class defines it: user objects,
    modules, and instances of user subclasses of dict, list and tuple."""
    # here, not at the top: variables.modules imports this module (a cycle)
    from dynamo.variables.modules import ModuleVariable
    if not isinstance(value, (UserObjectVariable, NewObjectVariable, ModuleVariable)) and \
            not is_subclass_instance(value):
        return None
    function = python_override(value.python_type(), name)
    if function is None:
        return None
    guard_class_attribute(tx, value.python_type(), name, function)
    return BoundMethodVariable(tx.wrap(function, None), value)


def load_method(tx, owner: Variable, name: str) -> tuple[Variable, Variable]:
    """LOAD_ATTR with the method bit: (NULL, bound attribute) — calls work the same."""
    return NULL, tx_getattr(tx, owner, name)


def tx_getattr(tx, owner: Variable, name: str) -> Variable:
    """`owner.name`; `__class__` is answered from the type for every kind of value."""
    if name == "__class__":
        return ClassVariable(owner.python_type(),
                             source=None if owner.source is None else TypeSource(owner.source))
    return owner.getattr(tx, name)


def globals_box(tx, f_globals: dict, globals_source: Optional[Source]) -> Box:
    """The box recording stores to a module's globals during the trace."""
    box = tx.side_effects.box_for(f_globals)
    if box is None:
        from guards.sources import ConstantSource
        source = globals_source or ConstantSource("G", f_globals)
        box = tx.side_effects.track(Box("globals", {}, source=source, real=f_globals))
    return box
