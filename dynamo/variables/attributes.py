"""Python's attribute protocol on variables: reads, writes and deletes of `obj.name`.

Input: an owner variable (a pre-existing object, an object created during the trace, an
instance of a dict or list subclass), the attribute name and, for writes, the new value.
Output: the attribute's variable, or a change recorded in the owner's attribute `Box`.

Reads follow CPython's order: data descriptors of the class (properties are inlined; slots and
C getsets of pre-existing objects are read for real), then the instance attributes (the box's
pending writes first, then the real `__dict__`), then class attributes (functions and builtin
methods bind), then a Python `__getattr__`. Writes and deletes honour a Python `__setattr__` /
`__delattr__` of the class by inlining it; `object.__setattr__` and friends reach the raw
store, which only records the change (replayed after the graph on pre-existing objects).
"""
from __future__ import annotations

import functools
import types
from typing import Any, Optional

from dynamo.breaks import UNSUPPORTED_OBJECT, Unsupported
from dynamo.variables.side_effects import Box
from dynamo.variables.base import Variable
from dynamo.variables.constant import ConstantVariable
from guards.sources import AttrSource, ConstantSource, ObjectSource, Source

MISSING = object()
"""Marks an absent class attribute or an owner with no real object behind it."""

_BUILTIN_METHOD_KINDS = ("method_descriptor", "wrapper_descriptor")


def class_lookup(cls: type, name: str) -> Any:
    """`name` in the MRO dicts of `cls` (no descriptors run), or `MISSING`."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return MISSING


def is_data_descriptor(attribute: Any) -> bool:
    kind = type(attribute)
    return hasattr(kind, "__set__") or hasattr(kind, "__delete__")


def python_override(cls: type, name: str) -> Optional[types.FunctionType]:
    """The Python function `cls` (or a Python base) defines for `name`, if any."""
    attribute = class_lookup(cls, name)
    return attribute if isinstance(attribute, types.FunctionType) else None


def bind_class_attribute(tx, attribute: Any, owner: Variable, cls: type,
                         name: str) -> Optional[Variable]:
    """A class attribute read through an instance (functions bind, properties run); None for
    a plain value."""
    # here, not at the top: variables.functions imports this module (a cycle)
    from dynamo.variables.functions import BoundMethodVariable
    # here, not at the top: variables.objects imports this module (a cycle)
    from dynamo.variables.objects import ClassVariable
    if isinstance(attribute, property):
        if attribute.fget is None:
            raise Unsupported(UNSUPPORTED_OBJECT, f"unreadable property {name!r}")
        return tx.wrap(attribute.fget, None).call(tx, [owner], {})
    if isinstance(attribute, staticmethod):
        return tx.wrap(attribute.__func__, None)
    if isinstance(attribute, classmethod):
        return BoundMethodVariable(tx.wrap(attribute.__func__, None), ClassVariable(cls))
    if isinstance(attribute, (types.FunctionType, functools._lru_cache_wrapper)):
        # an lru_cache-wrapped function binds as the function does (transformers sets
        # `logging.Logger.warning_once`); calling it is decided where it is called
        return BoundMethodVariable(tx.wrap(attribute, None), owner)
    kind = type(attribute).__name__
    if kind in _BUILTIN_METHOD_KINDS:
        # here, not at the top: variables.builtin_methods imports this module (a cycle)
        from dynamo.variables.builtin_methods import SlotFunctionVariable
        return BoundMethodVariable(SlotFunctionVariable(attribute), owner)
    if kind == "classmethod_descriptor":
        # here, not at the top: variables.builtin_methods imports this module (a cycle)
        from dynamo.variables.builtin_methods import SlotFunctionVariable
        return BoundMethodVariable(SlotFunctionVariable(attribute), ClassVariable(cls))
    if hasattr(type(attribute), "__get__") and not isinstance(attribute, type):
        if kind == "builtin_function_or_method":
            return None  # builtins stored on a class do not bind
        raise Unsupported(UNSUPPORTED_OBJECT, f"descriptor {name!r} of type {kind}")
    return None


def generic_getattr(tx, owner: Variable, cls: type, name: str, attributes: Optional[Box],
                    real: Any = MISSING, source: Optional[Source] = None,
                    raw: bool = False) -> Variable:
    """`owner.name` by CPython's rules. `attributes` holds pending (or, for new objects, all)
    instance attributes; `real` is the pre-existing object behind `owner`, if any. A Python
    `__getattribute__` of the class is inlined unless `raw` (`object.__getattribute__`)."""
    if not raw:
        hook = python_override(cls, "__getattribute__")
        if hook is not None:
            return _through_getattribute(tx, hook, owner, cls, name)
    attribute = class_lookup(cls, name)
    attribute_source = None if source is None else AttrSource(source, name)
    if isinstance(attribute, types.MemberDescriptorType) and attributes is not None:
        # a `__slots__` slot: written in the trace (the box), else the real one, else unset
        if name in attributes.contents:
            return attributes.contents[name]
        if real is MISSING or name in attributes.deleted:
            # here, not at the top: variables.exceptions imports this module (a cycle)
            from dynamo.variables.exceptions import python_error
            raise python_error(AttributeError, f"'{cls.__name__}' object has no attribute "
                               f"'{name}'")
    if attribute is not MISSING and is_data_descriptor(attribute):
        return _through_data_descriptor(tx, owner, cls, name, attribute, attributes, real,
                                        source)
    if attributes is not None and name in attributes.contents:
        return attributes.contents[name]
    deleted = attributes is not None and name in attributes.deleted
    if real is not MISSING and not deleted:
        instance_dict = getattr(real, "__dict__", None)
        if isinstance(instance_dict, dict) and name in instance_dict:
            return tx.wrap(instance_dict[name], attribute_source)
        if isinstance(instance_dict, dict):
            guard_membership(tx, source, name, present=False)
    if attribute is not MISSING:
        bound = bind_class_attribute(tx, attribute, owner, cls, name)
        if bound is not None:
            guard_class_attribute(tx, cls, name, attribute)
            return bound
        return tx.wrap(attribute, attribute_source or class_attribute_source(cls, name))
    hook = python_override(cls, "__getattr__")
    if hook is not None:
        return tx.wrap(hook, None).call(tx, [owner, ConstantVariable(name)], {})
    # here, not at the top: variables.exceptions imports this module (a cycle)
    from dynamo.variables.exceptions import python_error
    raise python_error(AttributeError, f"'{cls.__name__}' object has no attribute '{name}'")


def _through_data_descriptor(tx, owner: Variable, cls: type, name: str, attribute: Any,
                             attributes: Optional[Box], real: Any,
                             source: Optional[Source]) -> Variable:
    """`owner.name` where the class holds a data descriptor for `name` (a property, a slot,
    `__dict__`, a C getset): it wins over the instance's attributes."""
    if isinstance(attribute, property):
        guard_class_attribute(tx, cls, name, attribute)
        return bind_class_attribute(tx, attribute, owner, cls, name)
    if name == "__dict__" and attributes is not None:
        if real is MISSING:
            # here, not at the top: variables.containers imports this module (a cycle)
            from dynamo.variables.containers import DictVariable
            return DictVariable(attributes)  # a new object's attributes, as a dict
        if attributes.contents or attributes.deleted:
            raise Unsupported(UNSUPPORTED_OBJECT, "reading __dict__ after changing "
                              f"attributes of {owner.describe()}")
    if real is not MISSING:
        return _read_descriptor(tx, owner, cls, name, real, source)  # slots, C getsets
    raise Unsupported(UNSUPPORTED_OBJECT, f"descriptor attribute {name!r} of "
                      f"{owner.describe()}")


_HEAPTYPE = 1 << 9


def class_attribute_source(cls: type, name: str) -> Optional[Source]:
    """The source of `cls.name` read without one for the class or the instance (a class
    default read through an object the trace made, `type(obj).name`): the class bound into
    the check, so the value read is guarded like any other; None for a library's class."""
    # here, not at the top: variables.guarding imports this module (a cycle)
    from dynamo.variables.guarding import own_source
    root = own_source(cls)
    return None if root is None else AttrSource(root, name)


def guard_class_attribute(tx, cls: type, name: str, attribute: Any) -> None:
    """Guard that `cls.name` is still the function, property or method descriptor the trace
    bound (`mock.patch.object(Class, "method")` or a replaced `forward` after capture). The
    class is bound into the check, so one guard serves every instance; classes that cannot
    change (builtin types) need none. Plain class values are guarded where they are read,
    through the instance."""
    if not cls.__flags__ & _HEAPTYPE:
        return
    source: Source = AttrSource(ObjectSource.of(cls), name)  # held weakly: see guards.held
    if isinstance(attribute, classmethod):
        source, expected = AttrSource(source, "__func__"), attribute.__func__
    elif isinstance(attribute, staticmethod):
        expected = attribute.__func__
    elif isinstance(attribute, (types.FunctionType, property, functools._lru_cache_wrapper)) \
            or type(attribute).__name__ in _BUILTIN_METHOD_KINDS:
        expected = attribute
    else:
        return
    from guards import IdentityGuard
    tx.guards.add(IdentityGuard(source, expected))


def guard_membership(tx, source: Optional[Source], name, present: bool) -> None:
    """Guard that the instance dict of the object at `source` has (or lacks) `name`: a read
    that went past the instance dict to the class (a method, a class default, a missing
    attribute) gives another answer once an instance attribute shadows it (`obj.method =
    replacement`)."""
    if source is not None:
        from guards import ObjectSnapshot, ObjectSnapshotGuard
        tx.guards.add(ObjectSnapshotGuard(source, ObjectSnapshot.membership(name, present)))


def _read_descriptor(tx, owner: Variable, cls: type, name: str, real: Any,
                     source: Optional[Source]) -> Variable:
    """A slot or C getset of a pre-existing object, read for real. An unset slot raises
    AttributeError in the trace (code such as pathlib's catches it), guarded to stay unset
    (with a Python `__getattr__`, which CPython would run next, the graph breaks)."""
    try:
        value = getattr(real, name)
    except AttributeError:
        if python_override(cls, "__getattr__") is not None:
            raise Unsupported(UNSUPPORTED_OBJECT, f"unset slot {name!r} of "
                              f"{owner.describe()} with a __getattr__") from None
        if source is not None:
            from guards import HasAttrGuard
            tx.guards.add(HasAttrGuard(source, name, False))
        # here, not at the top: variables.exceptions imports this module (a cycle)
        from dynamo.variables.exceptions import python_error
        raise python_error(AttributeError, f"'{cls.__name__}' object has no attribute "
                           f"'{name}'") from None
    return tx.wrap(value, None if source is None else AttrSource(source, name))


def _through_getattribute(tx, hook, owner: Variable, cls: type, name: str) -> Variable:
    # here, not at the top: variables.exceptions imports this module (a cycle)
    from dynamo.variables.exceptions import RaisedInTrace
    try:
        return tx.wrap(hook, None).call(tx, [owner, ConstantVariable(name)], {})
    except RaisedInTrace as raised:
        fallback = python_override(cls, "__getattr__")
        if fallback is None or not issubclass(raised.exception.python_type(), AttributeError):
            raise
        return tx.wrap(fallback, None).call(tx, [owner, ConstantVariable(name)], {})


def raw_getattr(tx, owner: Variable, name: str) -> Variable:
    """`object.__getattribute__(owner, name)`: the protocol without the class's
    `__getattribute__` override (and without `__getattr__`)."""
    pending = getattr(owner, "pending_attributes", None)
    if pending is None:
        return owner.getattr(tx, name)
    return generic_getattr(tx, owner, _class_of(owner), name, pending(tx), real_object(owner),
                           owner.source, raw=True)


def generic_hasattr(cls: type, name: str, attributes: Optional[Box], real: Any,
                    tx=None, source: Optional[Source] = None) -> bool:
    """`hasattr(obj, name)`; for a pre-existing object with a source, guarded (through `tx`)
    so that the answer holds on later calls."""
    if attributes is not None and name in attributes.contents:
        return True
    if attributes is not None and name in attributes.deleted:
        return class_lookup(cls, name) is not MISSING
    if real is not MISSING:
        present = hasattr(real, name)
        if tx is not None and source is not None:
            _guard_hasattr(tx, cls, name, real, source, present)
        return present
    return class_lookup(cls, name) is not MISSING or \
        python_override(cls, "__getattr__") is not None


def _guard_hasattr(tx, cls: type, name: str, real: Any, source: Source, present: bool) -> None:
    """What `hasattr(real, name) is present` rests on: the instance dict's membership where
    the class lets the dict decide (native checks; for modules, the registries too), else the
    `hasattr` call itself."""
    attribute = class_lookup(cls, name)
    instance_dict = getattr(real, "__dict__", None)
    plain = python_override(cls, "__getattribute__") is None and \
        (attribute is MISSING or not is_data_descriptor(attribute))
    if plain and isinstance(instance_dict, dict):
        if name in instance_dict:
            guard_membership(tx, source, name, present=True)
            return
        if attribute is not MISSING:
            return  # a class attribute: present whatever the instance dict holds
        fallback = python_override(cls, "__getattr__")
        if fallback is None:
            guard_membership(tx, source, name, present=False)
            return
        if fallback is _MODULE_GETATTR:
            # nn.Module.__getattr__ reads the three registries: guard each one's membership
            registries = [registry for registry in _MODULE_REGISTRIES
                          if isinstance(instance_dict.get(registry), dict)]
            if len(registries) == len(_MODULE_REGISTRIES):
                paths = [(name,)] + [(registry, name) for registry in registries]
                held = [path for path in paths if _holds(instance_dict, path)]
                if present and held:
                    guard_membership(tx, source, held[0], present=True)
                    for path in paths[:paths.index(held[0])]:
                        guard_membership(tx, source, path, present=False)
                    return
                if not present:
                    for path in paths:
                        guard_membership(tx, source, path, present=False)
                    return
    elif plain and attribute is not MISSING:
        return
    from guards import HasAttrGuard
    tx.guards.add(HasAttrGuard(source, name, present))


def _holds(namespace: dict, path: tuple) -> bool:
    for part in path[:-1]:
        namespace = namespace[part]
    return path[-1] in namespace


def _module_getattr() -> Any:
    import torch
    return torch.nn.Module.__dict__["__getattr__"]


_MODULE_GETATTR = _module_getattr()
_MODULE_REGISTRIES = ("_parameters", "_buffers", "_modules")


def preexisting_box(tx, real: Any, source: Optional[Source], facet: str = "") -> Box:
    """The attribute box of a pre-existing object, made on first write. Objects reached
    without a source (held by library modules) are bound into the glue as constants."""
    box = tx.side_effects.box_for(real, facet)
    if box is None:
        if source is None:
            source = ConstantSource(f"{type(real).__name__}_object", real)
        box = tx.side_effects.track(Box("object", {}, source=source, real=real), facet)
        # once written, the object must stay distinct from the others the trace reached
        tx.guards.identities.mark(real, lambda box=box: box.mutated)
    return box


def store_attribute(tx, owner: Variable, name: str, value: Variable) -> None:
    """`owner.name = value`, through a Python `__setattr__` of the class when there is one."""
    # here, not at the top: variables.modules imports this module (a cycle)
    from dynamo.variables.modules import ModuleVariable
    if not isinstance(owner, ModuleVariable):
        hook = python_override(_class_of(owner), "__setattr__")
        if hook is not None:
            tx.wrap(hook, None).call(tx, [owner, ConstantVariable(name), value], {})
            return
    raw_store_attribute(tx, owner, name, value)


def raw_store_attribute(tx, owner: Variable, name: str, value: Variable) -> None:
    """`object.__setattr__(owner, name, value)`: descriptors, else the instance attributes."""
    # here, not at the top: variables.modules imports this module (a cycle)
    from dynamo.variables.modules import ModuleVariable
    cls = _class_of(owner)
    attribute = class_lookup(cls, name)
    if isinstance(attribute, property):
        if attribute.fset is None:
            raise Unsupported(UNSUPPORTED_OBJECT, f"can't set property {name!r}")
        tx.wrap(attribute.fset, None).call(tx, [owner, value], {})
        return
    if attribute is not MISSING and is_data_descriptor(attribute) and \
            not isinstance(attribute, types.MemberDescriptorType):  # slots are stored below
        raise Unsupported(UNSUPPORTED_OBJECT, f"setting descriptor attribute {name!r}")
    if isinstance(owner, ModuleVariable) and not owner.check_plain_attribute(tx, name, value):
        return  # the member already is this value
    box = attribute_box(tx, owner)
    if box is None:
        raise Unsupported(UNSUPPORTED_OBJECT, f"setting attribute {name!r} on "
                          f"{owner.describe()}")
    box.contents[name] = value
    box.deleted.discard(name)
    box.touch()


def delete_attribute(tx, owner: Variable, name: str) -> None:
    """`del owner.name`, through a Python `__delattr__` of the class when there is one."""
    hook = python_override(_class_of(owner), "__delattr__")
    if hook is not None:
        tx.wrap(hook, None).call(tx, [owner, ConstantVariable(name)], {})
        return
    raw_delete_attribute(tx, owner, name)


def raw_delete_attribute(tx, owner: Variable, name: str) -> None:
    box = attribute_box(tx, owner)
    real = real_object(owner)
    present = name in box.contents if box is not None else False
    if real is not MISSING and box is not None and name not in box.deleted:
        present = present or name in getattr(real, "__dict__", {})
    if box is None or not present:
        raise Unsupported(UNSUPPORTED_OBJECT, f"deleting attribute {name!r} of "
                          f"{owner.describe()} (AttributeError)")
    box.contents.pop(name, None)
    if box.preexisting:
        box.deleted.add(name)
    box.touch()


def attribute_box(tx, owner: Variable) -> Optional[Box]:
    """The box holding `owner`'s instance attributes (made on demand for pre-existing
    objects), or None when `owner` has no instance attributes."""
    own = getattr(owner, "attribute_box", None)
    if own is not None:
        return own(tx)
    return None


def real_object(owner: Variable) -> Any:
    """The pre-existing object behind `owner`, or MISSING."""
    real = getattr(owner, "real_object", None)
    return real() if real is not None else MISSING


def _class_of(owner: Variable) -> type:
    # here, not at the top: variables.objects imports this module (a cycle)
    from dynamo.variables.objects import ClassVariable
    if isinstance(owner, ClassVariable):
        return type(owner.value)
    return owner.python_type()
