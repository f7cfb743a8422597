"""Guard installation (stage: guard; input: a value seen while tracing and the source it was read
from; output: the guards that make specialising on that whole value sound).

`install_for(value, source)` is the policy a tracer uses when it treats a frame input as known:

| value | guards |
|---|---|
| tensor (any subclass, `nn.Parameter`) | tensor match |
| `None` | None-ness |
| constant (int, float, bool, str, bytes, complex, dtype, device, tuple of constants) | constant |
| list, tuple, `torch.Size` | exact type, length, then each item |
| dict, OrderedDict with literal keys | exact type, keys in order, then each value |
| `nn.Module` | exact type, training flag, own hooks unchanged, then each parameter and buffer
  (tensor match through `ParamSource` / `BufferSource`) and each child (`SubmoduleSource`) |
| bound method | exact type, identity of the function, then the bound object |
| function, class, imported module, enum member, frozenset | identity |
| other object with a `__dict__` | exact type and a snapshot of its instance attributes |

A container met again inside itself is guarded by identity. Mutable values with no `__dict__` and
no rule (a `set`, a `bytearray`, a NumPy array) raise `UnguardableValue`.
"""
from __future__ import annotations

import collections
import enum
import types
from typing import Any

import torch

from guards.kinds.base import Guard
from guards.kinds.constants import ConstantGuard, is_constant
from guards.kinds.objects import ModuleTrainingGuard, ObjectSnapshot, ObjectSnapshotGuard
from guards.kinds.tensors import TensorMatchGuard
from guards.kinds.values import DictKeysGuard, IdentityGuard, LengthGuard, NoneGuard, TypeGuard
from guards.sources import (AttrSource, BufferSource, DictItemSource, ItemSource, ParamSource,
                            Source, SubmoduleSource, literal)

_IDENTITY_TYPES = (types.FunctionType, types.BuiltinFunctionType, types.ModuleType, type,
                   enum.Enum, frozenset, types.MethodWrapperType, types.WrapperDescriptorType,
                   types.MethodDescriptorType)
_SEQUENCE_TYPES = (list, tuple, torch.Size)
_MAPPING_TYPES = (dict, collections.OrderedDict)


class UnguardableValue(TypeError):
    """A value has no guard policy: it is mutable and its state is not in a `__dict__`.

    Cause: `install_for` was asked to specialise on a value such as a `set`, a `bytearray` or a
    NumPy array, whose contents can change without any guardable attribute changing.
    Fix: treat the value as a graph input or read it through guarded parts (its length, items).
    """


def install_for(value: Any, source: Source) -> list[Guard]:
    """The guards a tracer installs when it specialises on `value` read from `source`."""
    guards: list[Guard] = []
    _install(value, source, guards, active=set())
    return guards


def _install(value: Any, source: Source, guards: list[Guard], active: set[int]) -> None:
    if isinstance(value, torch.Tensor):
        guards.append(TensorMatchGuard.of(source, value))
    elif value is None:
        guards.append(NoneGuard(source, True))
    elif is_constant(value):
        guards.append(ConstantGuard(source, value))
    elif id(value) in active:
        guards.append(IdentityGuard(source, value))
    elif isinstance(value, _IDENTITY_TYPES):
        guards.append(IdentityGuard(source, value))
    else:
        active.add(id(value))
        try:
            _install_structured(value, source, guards, active)
        finally:
            active.discard(id(value))


def _install_structured(value: Any, source: Source, guards: list[Guard], active: set[int]) -> None:
    kind = type(value)
    if isinstance(value, torch.nn.Module):
        _install_module(value, source, guards, active)
    elif kind in _SEQUENCE_TYPES:
        guards += [TypeGuard(source, kind), LengthGuard(source, len(value))]
        for index, item in enumerate(value):
            _install(item, ItemSource(source, index), guards, active)
    elif kind in _MAPPING_TYPES and all(literal(key) is not None for key in value):
        guards += [TypeGuard(source, kind), DictKeysGuard(source, tuple(value))]
        for key, item in value.items():
            _install(item, DictItemSource(source, key), guards, active)
    elif kind is types.MethodType:
        guards += [TypeGuard(source, kind), IdentityGuard(AttrSource(source, "__func__"),
                                                          value.__func__)]
        _install(value.__self__, AttrSource(source, "__self__"), guards, active)
    elif hasattr(value, "__dict__") and isinstance(vars(value), dict):
        guards += [TypeGuard(source, kind),
                   ObjectSnapshotGuard(source, ObjectSnapshot.of_object(value))]
    else:
        raise UnguardableValue(f"{source.name()}: cannot guard a {kind.__name__} value "
                               "(mutable, with no instance attributes to snapshot)")


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
