"""User objects and classes, and Python's attribute protocol on them.

A pre-existing object (`UserObjectVariable`) is read attribute by attribute, each read guarded
through its source; writes go to its `Box` and are replayed after the graph. Objects created
during the trace (`NewObjectVariable`) live only in their box and are rebuilt where they escape.
Attribute lookup follows Python: data descriptors of the class (properties are inlined), then
the instance dict, then class attributes (functions bind), then `__getattr__`.
"""
from __future__ import annotations

import inspect
import types
from typing import Any, Optional

from dynamo.breaks import UNSUPPORTED_CALL, UNSUPPORTED_OBJECT, Unsupported
from dynamo.trace.side_effects import Box
from dynamo.variables.base import NULL, NotConstant, Variable, variable
from dynamo.variables.constant import ConstantVariable
from guards.sources import AttrSource, Source

_MISSING = object()


def class_lookup(cls: type, name: str) -> Any:
    """`name` in the MRO dicts of `cls` (no descriptors run), or `_MISSING`."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return _MISSING


def _is_data_descriptor(attribute: Any) -> bool:
    kind = type(attribute)
    return hasattr(kind, "__set__") or hasattr(kind, "__delete__")


def bind_class_attribute(tx, attribute: Any, owner: Variable, cls: type, name: str) -> Variable:
    """A class attribute read through an instance (functions bind, properties run)."""
    from dynamo.variables.functions import BoundMethodVariable
    if isinstance(attribute, property):
        if attribute.fget is None:
            raise Unsupported(UNSUPPORTED_OBJECT, f"unreadable property {name!r}")
        return tx.wrap(attribute.fget, None).call(tx, [owner], {})
    if isinstance(attribute, staticmethod):
        return tx.wrap(attribute.__func__, None)
    if isinstance(attribute, classmethod):
        return BoundMethodVariable(tx.wrap(attribute.__func__, None), ClassVariable(cls))
    if isinstance(attribute, types.FunctionType):
        return BoundMethodVariable(tx.wrap(attribute, None), owner)
    if hasattr(type(attribute), "__get__") and not isinstance(attribute, type):
        kind = type(attribute).__name__
        if kind in ("method_descriptor", "wrapper_descriptor", "builtin_function_or_method"):
            from dynamo.variables.functions import PartialVariable
            return PartialVariable(tx.wrap(attribute, None), (owner,), {})
        raise Unsupported(UNSUPPORTED_OBJECT, f"descriptor {name!r} of type {kind}")
    return None


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
        box = tx.side_effects.box_for(self.value)
        if box is not None and name in box.contents:
            return box.contents[name]
        if box is not None and name in box.deleted:
            raise Unsupported(UNSUPPORTED_OBJECT, f"attribute {name!r} was deleted")
        return instance_getattr(tx, self, self.value, name, self.source)

    def has_attribute(self, tx, name: str) -> bool:
        box = tx.side_effects.box_for(self.value)
        if box is not None and name in box.contents:
            return True
        return hasattr(self.value, name)

    def call(self, tx, args, kwargs) -> Variable:
        method = lookup_dunder(tx, self, "__call__")
        if method is None:
            raise Unsupported(UNSUPPORTED_CALL, f"calling {self.describe()}")
        return method.call(tx, args, kwargs)

    def as_constant(self) -> Any:
        if isinstance(self.value, (types.FunctionType, type)):
            return self.value
        raise NotConstant(self.describe())


def instance_getattr(tx, owner: Variable, obj: Any, name: str, source: Optional[Source]):
    cls = type(obj)
    attribute = class_lookup(cls, name)
    attribute_source = None if source is None else AttrSource(source, name)
    if attribute is not _MISSING and _is_data_descriptor(attribute):
        if isinstance(attribute, property):
            return bind_class_attribute(tx, attribute, owner, cls, name)
        return tx.wrap(getattr(obj, name), attribute_source)  # slots and C getsets
    instance_dict = getattr(obj, "__dict__", None)
    if isinstance(instance_dict, dict) and name in instance_dict:
        return tx.wrap(instance_dict[name], attribute_source)
    if attribute is not _MISSING:
        bound = bind_class_attribute(tx, attribute, owner, cls, name)
        if bound is not None:
            return bound
        return tx.wrap(attribute, attribute_source)
    getattr_hook = class_lookup(cls, "__getattr__")
    if isinstance(getattr_hook, types.FunctionType):
        return tx.wrap(getattr_hook, None).call(tx, [owner, ConstantVariable(name)], {})
    raise Unsupported(UNSUPPORTED_OBJECT, f"{type(obj).__name__} object has no attribute "
                      f"{name!r} (AttributeError)")


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
        attribute = class_lookup(self.cls, name)
        if attribute is not _MISSING and _is_data_descriptor(attribute):
            return bind_class_attribute(tx, attribute, self, self.cls, name)
        if name in self.box.contents:
            return self.box.contents[name]
        if name == "__class__":
            return ClassVariable(self.cls)
        if attribute is not _MISSING:
            bound = bind_class_attribute(tx, attribute, self, self.cls, name)
            return bound if bound is not None else tx.wrap(attribute, None)
        getattr_hook = class_lookup(self.cls, "__getattr__")
        if isinstance(getattr_hook, types.FunctionType):
            return tx.wrap(getattr_hook, None).call(tx, [self, ConstantVariable(name)], {})
        raise Unsupported(UNSUPPORTED_OBJECT, f"{self.cls.__name__} object has no attribute "
                          f"{name!r} (AttributeError)")

    def has_attribute(self, tx, name: str) -> bool:
        return name in self.box.contents or class_lookup(self.cls, name) is not _MISSING

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
        source = None if self.source is None else AttrSource(self.source, name)
        if attribute is _MISSING:
            if hasattr(self.value, name):  # metaclass attributes: __name__, __mro__...
                return tx.wrap_result(getattr(self.value, name))
            raise Unsupported(UNSUPPORTED_OBJECT, f"class {self.value.__name__} has no "
                              f"attribute {name!r}")
        if isinstance(attribute, classmethod):
            from dynamo.variables.functions import BoundMethodVariable
            return BoundMethodVariable(tx.wrap(attribute.__func__, None), self)
        if isinstance(attribute, staticmethod):
            return tx.wrap(attribute.__func__, None)
        return tx.wrap(getattr(self.value, name), source)

    def has_attribute(self, tx, name: str) -> bool:
        return hasattr(self.value, name)

    def call(self, tx, args, kwargs) -> Variable:
        from dynamo.variables.construct import construct
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
                    from dynamo.variables.functions import BoundMethodVariable
                    return BoundMethodVariable(tx.wrap(attribute.__func__, None), self.obj)
                bound = bind_class_attribute(tx, attribute, self.obj, obj_type, name)
                return bound if bound is not None else tx.wrap(attribute, None)
        raise Unsupported(UNSUPPORTED_OBJECT, f"super() has no attribute {name!r}")


def zero_argument_super(tx) -> SuperVariable:
    """`super()` inside a method: the `__class__` cell and the first argument."""
    code = tx.code
    if "__class__" not in tx.cells or code.co_argcount == 0:
        raise Unsupported(UNSUPPORTED_CALL, "super() outside a method")
    first = code.co_varnames[0]
    obj = tx.locals.get(first)
    if obj is None and first in tx.cells:
        obj = tx.cells[first].contents(tx)
    return SuperVariable(tx.cells["__class__"].contents(tx), obj)


def lookup_dunder(tx, value: Variable, name: str) -> Optional[Variable]:
    """`type(value).name` bound to `value`, for user objects and modules."""
    from dynamo.variables.modules import ModuleVariable
    if not isinstance(value, (UserObjectVariable, NewObjectVariable, ModuleVariable)):
        return None
    cls = value.python_type()
    attribute = class_lookup(cls, name)
    if isinstance(attribute, types.FunctionType):
        from dynamo.variables.functions import BoundMethodVariable
        return BoundMethodVariable(tx.wrap(attribute, None), value)
    return None


def load_method(tx, owner: Variable, name: str) -> tuple[Variable, Variable]:
    """LOAD_ATTR with the method bit: (NULL, bound attribute) — calls work the same."""
    return NULL, owner.getattr(tx, name)


def _object_box(tx, owner: Variable) -> Box:
    box = tx.side_effects.box_for(owner.value)
    if box is None:
        box = tx.side_effects.track(Box("object", {}, source=owner.source, real=owner.value))
    return box


def store_attribute(tx, owner: Variable, name: str, value: Variable) -> None:
    """`owner.name = value`."""
    from dynamo.variables.modules import ModuleVariable
    cls = owner.python_type()
    attribute = class_lookup(cls, name)
    if isinstance(attribute, property):
        if attribute.fset is None:
            raise Unsupported(UNSUPPORTED_OBJECT, f"can't set property {name!r}")
        tx.wrap(attribute.fset, None).call(tx, [owner, value], {})
        return
    if attribute is not _MISSING and _is_data_descriptor(attribute):
        raise Unsupported(UNSUPPORTED_OBJECT, f"setting descriptor attribute {name!r}")
    if isinstance(owner, NewObjectVariable):
        owner.box.contents[name] = value
        return
    if isinstance(owner, ModuleVariable):
        owner.check_plain_attribute(tx, name, value)
    if isinstance(owner, (UserObjectVariable, ModuleVariable)) and owner.source is not None:
        box = _object_box(tx, owner)
        box.contents[name] = value
        box.deleted.discard(name)
        box.touch()
        return
    raise Unsupported(UNSUPPORTED_OBJECT, f"setting attribute {name!r} on {owner.describe()}")


def delete_attribute(tx, owner: Variable, name: str) -> None:
    if isinstance(owner, NewObjectVariable) and name in owner.box.contents:
        del owner.box.contents[name]
        return
    if isinstance(owner, UserObjectVariable) and owner.source is not None:
        box = _object_box(tx, owner)
        box.contents.pop(name, None)
        box.deleted.add(name)
        box.touch()
        return
    raise Unsupported(UNSUPPORTED_OBJECT, f"deleting attribute {name!r} of {owner.describe()}")


def globals_box(tx, f_globals: dict, globals_source: Optional[Source]) -> Box:
    """The box recording stores to a module's globals during the trace."""
    box = tx.side_effects.box_for(f_globals)
    if box is None:
        from guards.sources import ConstantSource
        source = globals_source or ConstantSource("G", f_globals)
        box = tx.side_effects.track(Box("globals", {}, source=source, real=f_globals))
    return box


def signature_of(function) -> Optional[inspect.Signature]:
    try:
        return inspect.signature(function)
    except (TypeError, ValueError):
        return None
