"""Guard installation (stage: guard; input: a value seen while tracing and the source it was read
from; output: the guards that make relying on that value sound).

One table, two depths:

- `guards_for(value, source)`: what relying on *this* value needs, not on what it contains. The
  tracer (`dynamo/variables/builder.py`) calls it for every value it reads from the frame,
  then reads the parts it uses through their own sources, each guarded the same way when read:
  the live policy.
- `install_for(value, source)`: the whole value, recursively (every item, every parameter,
  every attribute), for specialising on a value without tracing into it.

| value | `guards_for` | `install_for` adds |
|---|---|---|
| tensor (any subclass, `nn.Parameter`) | tensor match | |
| `None` | None-ness | |
| constant (number, str, bytes, dtype, device, tuple of constants) | constant | |
| list, tuple, `torch.Size`, namedtuple, list subclass | exact type, length | each item |
| dict, OrderedDict, defaultdict, mappingproxy, dict subclass | exact type, keys | each value |
| set, frozenset of constants | exact type, items in order | |
| range, slice | exact type, `start`/`stop`/`step` | |
| enum member, code object, imported module, class, builtin | identity | |
| Python function | identity; a user's: `__code__`, shape of the defaults | |
| bound method | exact type, `__func__` as a function | `__self__` |
| builtin method bound to an object (`d.get`) | exact type, `__name__` | `__self__` |
| `functools.partial` | exact type, `len(args)`, keys of `keywords` | `func`, each argument |
| `nn.Module` | exact type | training, own hooks, each parameter, buffer and child |
| other object with a `__dict__` | exact type | a snapshot of its instance attributes |

Dict keys must be literals (numbers, strings, None); a container subclass that reads its items
through Python methods (`__getitem__`, `__iter__`, `keys`, `__len__`) gets only its type. A
user function's defaults are guarded by value as the tracer reads them; a module's missing
bias or `None` buffer by None-ness.
A container met again inside itself is guarded by identity. Values with no rule (a set of
objects, a `bytearray`, a NumPy array) raise `UnguardableValue`.
"""
from __future__ import annotations

import collections
import enum
import functools
import types
from typing import Any, Optional

import torch

from guards.kinds.base import Guard
from guards.kinds.constants import ConstantGuard, is_constant
from guards.kinds.objects import ModuleTrainingGuard, ObjectSnapshot, ObjectSnapshotGuard
from guards.kinds.tensors import TensorMatchGuard
from guards.kinds.values import DictKeysGuard, IdentityGuard, LengthGuard, NoneGuard, TypeGuard
from guards.sources import (AttrSource, BufferSource, DictItemSource, ItemSource, ParamSource,
                            Source, SubmoduleSource, literal)

_IDENTITY_TYPES = (types.FunctionType, types.BuiltinFunctionType, types.ModuleType, type,
                   enum.Enum, types.MethodWrapperType, types.WrapperDescriptorType,
                   types.MethodDescriptorType, types.CodeType)
_MAPPING_TYPES = (dict, collections.OrderedDict, collections.defaultdict,
                  types.MappingProxyType)
_HEAPTYPE = 1 << 9


class UnguardableValue(TypeError):
    """A value has no guard policy: its state cannot be read back by any guard kind.

    Cause: a tracer or `install_for` was asked to rely on a value such as a set of objects, a
    `bytearray` or a NumPy array, whose contents can change without any guardable attribute
    changing.
    Fix: treat the value as a graph input or read it through guarded parts (its length, items).
    """


def guards_for(value: Any, source: Source, trusted: bool = False) -> list[Guard]:
    """The guards for relying on `value` itself, read from `source` (see the module docstring).

    `trusted`: the value is defined by a library (torch, the standard library, an installed
    package), whose functions are not replaced at run time: a function's code and defaults are
    then not guarded.
    """
    if isinstance(value, torch.Tensor):
        return [TensorMatchGuard.of(source, value)]
    if value is None:
        return [NoneGuard(source, True)]
    kind = type(value)
    if kind is not tuple and is_constant(value):
        return [ConstantGuard(source, value)]
    if _reads_through_python(kind):
        return [TypeGuard(source, kind)]  # its items are read through its own methods
    if isinstance(value, (list, tuple)):
        return [TypeGuard(source, kind), LengthGuard(source, len(value))]
    keyed = _keyed_guards(value, source, kind)
    if keyed is not None:
        return keyed
    if kind in (range, slice):
        return [TypeGuard(source, kind)] + [_part(value, source, part)
                                            for part in ("start", "stop", "step")]
    if isinstance(value, types.FunctionType):
        return [IdentityGuard(source, value)] + ([] if trusted else function_guards(value, source))
    if isinstance(value, _IDENTITY_TYPES) and not _is_bound_builtin(value):
        return [IdentityGuard(source, value)]
    if kind is types.MethodType:
        function_source = AttrSource(source, "__func__")
        return [TypeGuard(source, kind)] + guards_for(value.__func__, function_source, trusted)
    if _is_bound_builtin(value):
        return [TypeGuard(source, kind), ConstantGuard(AttrSource(source, "__name__"),
                                                       value.__name__)]
    if isinstance(value, functools.partial):
        return [TypeGuard(source, kind), LengthGuard(AttrSource(source, "args"), len(value.args)),
                DictKeysGuard(AttrSource(source, "keywords"), tuple(value.keywords))]
    return [TypeGuard(source, kind)]


def _keyed_guards(value: Any, source: Source, kind: type) -> Optional[list[Guard]]:
    """The guards for a mapping (its type and keys) or a set (its type and items); None for
    any other value."""
    if isinstance(value, _MAPPING_TYPES):
        keys = tuple(value.keys() if kind is types.MappingProxyType else dict.keys(value))
        if not all(literal(key) is not None for key in keys):
            raise UnguardableValue(f"{source.name()}: a dict with keys other than numbers, "
                                   "strings and None")
        return [TypeGuard(source, kind), DictKeysGuard(source, keys)]
    if kind in (set, frozenset):
        if not all(is_constant(item) for item in value):
            raise UnguardableValue(f"{source.name()}: cannot guard a {kind.__name__} of values "
                                   "that are not constants")
        return [TypeGuard(source, kind), DictKeysGuard(source, tuple(value))]
    return None


_ITEM_METHODS = ("__getitem__", "__iter__", "keys", "__len__")


def _reads_through_python(kind: type) -> bool:
    """A subclass of a builtin container that overrides how its items are read in Python:
    a guard reading its length or keys would run that code, so only its type is guarded."""
    if kind in (list, tuple, dict) or not issubclass(kind, (list, tuple, dict)):
        return False
    return any(isinstance(klass.__dict__.get(name), types.FunctionType)
               for klass in kind.__mro__ for name in _ITEM_METHODS)


def function_guards(function: types.FunctionType, source: Source) -> list[Guard]:
    """What calling a Python function relies on beyond its identity: its code (replaceable
    through `__code__`) and the shape of its defaults (their values are guarded as read)."""
    found: list[Guard] = [IdentityGuard(AttrSource(source, "__code__"), function.__code__)]
    defaults, kwdefaults = function.__defaults__, function.__kwdefaults__
    defaults_source = AttrSource(source, "__defaults__")
    found += [NoneGuard(defaults_source, True)] if defaults is None else \
        [TypeGuard(defaults_source, tuple), LengthGuard(defaults_source, len(defaults))]
    kwdefaults_source = AttrSource(source, "__kwdefaults__")
    found += [NoneGuard(kwdefaults_source, True)] if kwdefaults is None else \
        [TypeGuard(kwdefaults_source, dict), DictKeysGuard(kwdefaults_source, tuple(kwdefaults))]
    return found


def _part(value: Any, source: Source, part: str) -> Guard:
    attribute = getattr(value, part)
    if not is_constant(attribute):
        raise UnguardableValue(f"{source.name()}: a {type(value).__name__} whose {part} cannot "
                               "be guarded")
    return ConstantGuard(AttrSource(source, part), attribute)


def _is_bound_builtin(value: Any) -> bool:
    """`some_dict.get`: a builtin method bound to an object (a new object on every access, so
    never guarded by identity)."""
    if type(value) not in (types.BuiltinMethodType, types.MethodWrapperType):
        return False
    owner = getattr(value, "__self__", None)
    return owner is not None and not isinstance(owner, (type, types.ModuleType))


def install_for(value: Any, source: Source) -> list[Guard]:
    """The guards a tracer installs when it specialises on the whole of `value`."""
    guards: list[Guard] = []
    _install(value, source, guards, active=set())
    return guards


def _install(value: Any, source: Source, guards: list[Guard], active: set[int]) -> None:
    if id(value) in active:
        guards.append(IdentityGuard(source, value))
        return
    active.add(id(value))
    try:
        _install_structured(value, source, guards, active)
    finally:
        active.discard(id(value))


def _install_structured(value: Any, source: Source, guards: list[Guard], active: set[int]) -> None:
    if isinstance(value, torch.nn.Module):
        _install_module(value, source, guards, active)
        return
    if type(value) is tuple and is_constant(value):  # one constant here
        guards.append(ConstantGuard(source, value))
        return
    kind = type(value)
    shallow = guards_for(value, source)
    if shallow == [TypeGuard(source, kind)] and not isinstance(value, torch.Tensor):
        if not (hasattr(value, "__dict__") and isinstance(vars(value), dict)):
            raise UnguardableValue(f"{source.name()}: cannot guard a {kind.__name__} value "
                                   "(mutable, with no instance attributes to snapshot)")
        shallow.append(ObjectSnapshotGuard(source, ObjectSnapshot.of_object(value)))
    guards += shallow
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _install(item, ItemSource(source, index), guards, active)
    elif isinstance(value, dict):
        for key, item in value.items():
            _install(item, DictItemSource(source, key), guards, active)
    elif kind is types.MethodType or _is_bound_builtin(value):
        _install(value.__self__, AttrSource(source, "__self__"), guards, active)
    elif isinstance(value, functools.partial):
        _install(value.func, AttrSource(source, "func"), guards, active)
        for index, item in enumerate(value.args):
            _install(item, ItemSource(AttrSource(source, "args"), index), guards, active)
        for key, item in value.keywords.items():
            _install(item, DictItemSource(AttrSource(source, "keywords"), key), guards, active)


def _install_module(module: torch.nn.Module, source: Source, guards: list[Guard],
                    active: set[int]) -> None:
    guards += [TypeGuard(source, type(module)), ModuleTrainingGuard(source, module.training)]
    hooks = ObjectSnapshot.of_module_hooks(module)
    if hooks.entries:
        guards.append(ObjectSnapshotGuard(source, hooks))
    members = ((ParamSource, module._parameters), (BufferSource, module._buffers),
               (SubmoduleSource, module._modules))
    for source_kind, registry in members:
        for name, member in registry.items():
            member_source = source_kind(source, name)
            if member is None:
                guards.append(NoneGuard(member_source, True))
            else:
                _install(member, member_source, guards, active)
