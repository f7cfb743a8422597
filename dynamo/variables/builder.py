"""Real values -> variables, installing the guards that make specialising on them sound.

`wrap(tx, value, source)` is used for everything read from the frame: arguments, globals,
attributes, closure contents, defaults. With a `source` it guards (tensors: full tensor match;
constants: equality; containers: type and length or keys, then their items; objects and
modules: exact type; functions, classes and modules: identity). Without one (values of
library modules, which are trusted not to change) it guards nothing.
`wrap_computed(tx, value)` is for values computed at trace time (folded constants).
"""
from __future__ import annotations

import collections
import enum
import functools
import types
from typing import Any, Optional

import torch

from dynamo import _C
from dynamo.breaks import DISABLED, UNSUPPORTED_OBJECT, Unsupported
from dynamo.trace.side_effects import Box
from dynamo.variables.base import Variable, variable
from dynamo.variables.attributes import class_lookup
from dynamo.variables.builtin_methods import SlotFunctionVariable, is_method_descriptor
from dynamo.variables.builtins import BUILTIN_RULES, PURE, BuiltinVariable
from dynamo.variables.constant import ConstantVariable, is_constant_value
from dynamo.variables.containers import DictVariable, ListVariable, TupleVariable
from dynamo.variables.functions import BoundMethodVariable, PartialVariable, UserFunctionVariable
from dynamo.variables.modules import ModuleVariable, PythonModuleVariable
from dynamo.variables.objects import ClassVariable, UserObjectVariable
from dynamo.resume.nested import resume_calls
from dynamo.variables import resume_state
from dynamo.variables.torch_calls import TorchFunctionVariable, is_torch_function
from guards import (AliasGuard, ConstantGuard, DictKeysGuard, IdentityGuard, LengthGuard,
                    NoneGuard, TensorMatchGuard, TypeGuard)
from guards import is_constant as guards_is_constant
from guards.sources import (AttrSource, ConstantSource, DictItemSource, ItemSource, Source,
                            literal)

_BUILTIN_MODULES = {"builtins", "math", "operator", "_operator", "functools", "_functools",
                    "itertools", "_warnings", "warnings"}


@variable
class DisabledFunctionVariable(Variable):
    """A function wrapped by `dynamo.disable`: calling it breaks the graph."""

    value: Any
    is_real: bool = True  # rebuilt as the wrapper itself when a break keeps it on the stack

    def call(self, tx, args, kwargs) -> Variable:
        name = getattr(self.value, "__qualname__", repr(self.value))
        raise Unsupported(DISABLED, f"{name} is marked dynamo.disable")


def wrap(tx, value: Any, source: Optional[Source]) -> Variable:
    if isinstance(value, torch.Tensor):
        return _wrap_tensor(tx, value, source)
    if value is None:
        _guard(tx, source, lambda: NoneGuard(source, True))
        return ConstantVariable(None, source=source)
    if isinstance(value, types.CodeType):
        _guard(tx, source, lambda: IdentityGuard(source, value))
        return ConstantVariable(value, source=source)
    if is_constant_value(value) and type(value) not in (tuple, torch.Size, range, slice) and \
            (source is None or guards_is_constant(value)):
        _guard(tx, source, lambda: ConstantGuard(source, value))
        return ConstantVariable(value, source=source)
    kind = type(value)
    if kind in (list, tuple, torch.Size) or (isinstance(value, tuple) and hasattr(kind, "_fields")) \
            or (isinstance(value, list) and _modelled_subclass(kind, source)):
        return _wrap_sequence(tx, value, source)
    if kind in _MAPPINGS or _modelled_subclass(kind, source):
        return _wrap_mapping(tx, value, source)
    if kind is set:
        return _wrap_set(tx, value, source)
    if kind in (range, slice, frozenset) or isinstance(value, enum.Enum):
        if source is not None:
            _guard_immutable(tx, value, source)
        return ConstantVariable(value, source=source)
    return _wrap_object(tx, value, source)


def _wrap_set(tx, value: set, source: Optional[Source]) -> Variable:
    """A set of constants: guarded on its type and items (in iteration order)."""
    from dynamo.variables.containers import SetVariable
    box = tx.side_effects.box_for(value)
    if box is not None:
        return SetVariable(box, source=source)
    if not all(guards_is_constant(item) for item in value):
        raise Unsupported(UNSUPPORTED_OBJECT, "a set of values that cannot be guarded")
    _guard(tx, source, lambda: TypeGuard(source, set))
    _guard(tx, source, lambda: DictKeysGuard(source, tuple(value)))
    items = {item: ConstantVariable(item) for item in value}
    box = Box("set", items, source=_box_source(value, source), real=value)
    return SetVariable(tx.side_effects.track(box), source=source)


def _guard_immutable(tx, value: Any, source: Source) -> None:
    """Guards for immutable values the constant guard does not take: enum members by
    identity, ranges and slices by their parts, frozensets by type and items."""
    if isinstance(value, enum.Enum):
        tx.guards.add(IdentityGuard(source, value))
        return
    tx.guards.add(TypeGuard(source, type(value)))
    if isinstance(value, frozenset):
        if not all(guards_is_constant(item) for item in value):
            raise Unsupported(UNSUPPORTED_OBJECT, "a frozenset of values that cannot be guarded")
        tx.guards.add(DictKeysGuard(source, tuple(value)))
        return
    for part in ("start", "stop", "step"):
        attribute = getattr(value, part)
        if not guards_is_constant(attribute):
            raise Unsupported(UNSUPPORTED_OBJECT, f"a {type(value).__name__} whose {part} "
                              "cannot be guarded")
        tx.guards.add(ConstantGuard(AttrSource(source, part), attribute))


_MAPPINGS = (dict, collections.OrderedDict, collections.defaultdict, types.MappingProxyType)


def _guard(tx, source: Optional[Source], make) -> None:
    if source is not None:
        tx.guards.add(make())


def _wrap_tensor(tx, value: torch.Tensor, source: Optional[Source]) -> Variable:
    if source is None:
        raise Unsupported(UNSUPPORTED_OBJECT, "a tensor held by a library module (no way to "
                          "fetch it again at run time)")
    if type(value) not in (torch.Tensor, torch.nn.Parameter, torch.nn.Buffer) and \
            not isinstance(value, torch.nn.Parameter):
        raise Unsupported(UNSUPPORTED_OBJECT, f"tensor subclass {type(value).__name__}")
    tx.guards.add(TensorMatchGuard.of(source, value))
    return tx.graph.add_input(value, source)


def _modelled_subclass(kind: type, source: Optional[Source]) -> bool:
    """Python subclasses of dict, OrderedDict and list are modelled as containers, unless a
    guard would have to read items through a Python `__getitem__`/`__iter__`/`keys`."""
    from dynamo.variables.attributes import python_override
    from dynamo.variables.construct import _builtin_base
    if _builtin_base(kind) not in (dict, collections.OrderedDict, list) or kind.__flags__ & \
            _HEAPTYPE == 0:
        return False
    return source is None or not any(python_override(kind, name) for name in
                                     ("__getitem__", "__iter__", "keys", "__len__"))


_HEAPTYPE = 1 << 9


def _box_source(value: Any, source: Optional[Source]) -> Source:
    """Where the glue reaches a pre-existing container to replay changes to it: its source,
    or (held by a library module, so unguarded) the object itself bound as a constant."""
    return source if source is not None else \
        ConstantSource(f"{type(value).__name__}_object", value)


def _wrap_sequence(tx, value, source: Optional[Source]) -> Variable:
    kind = type(value)
    _guard(tx, source, lambda: TypeGuard(source, kind))
    _guard(tx, source, lambda: LengthGuard(source, len(value)))
    is_list = isinstance(value, list)
    if is_list:
        box = tx.side_effects.box_for(value)
        if box is not None:
            return ListVariable(box, kind, source=source)
    items = [wrap(tx, item, None if source is None else ItemSource(source, index))
             for index, item in enumerate(list.__iter__(value) if is_list else value)]
    if is_list:
        box = Box("list", items, source=_box_source(value, source), real=value)
        return ListVariable(tx.side_effects.track(box), kind, source=source)
    return TupleVariable(tuple(items), kind, source=source)


def _wrap_mapping(tx, value: dict, source: Optional[Source]) -> Variable:
    box = tx.side_effects.box_for(value)
    kind = type(value)
    factory = None
    if isinstance(value, collections.defaultdict):
        factory = wrap(tx, value.default_factory,
                       None if source is None else AttrSource(source, "default_factory"))
    if box is not None:
        return DictVariable(box, kind, factory, source=source)
    keys = value.keys() if isinstance(value, types.MappingProxyType) else dict.keys(value)
    if source is not None and not all(literal(key) is not None for key in keys):
        raise Unsupported(UNSUPPORTED_OBJECT, f"a dict with keys other than numbers, strings "
                          f"and None ({source.name()})")
    _guard(tx, source, lambda: TypeGuard(source, kind))
    _guard(tx, source, lambda: DictKeysGuard(source, tuple(value)))
    pairs = value.items() if isinstance(value, types.MappingProxyType) else dict.items(value)
    items = {real_key(tx, key): wrap(tx, item, None if source is None else
                                     DictItemSource(source, key))
             for key, item in pairs}
    box = Box("dict", items, source=_box_source(value, source), real=value)
    tx.side_effects.track(box)
    return DictVariable(box, kind, factory, source=source)


def _wrap_object(tx, value: Any, source: Optional[Source]) -> Variable:
    if type(value) is types.BuiltinFunctionType and value in resume_state.HELPERS:
        return resume_state.FrameStateHelper(resume_state.HELPERS[value])
    if value is resume_calls:
        return resume_state.ResumeCallsVariable()
    if isinstance(value, resume_state.RestoreGradMode) or value is resume_state.exit_nothing:
        return resume_state.wrap_exit(tx, value, source)
    if isinstance(value, _C.ScopedCall):
        if value.callback is None:
            _guard(tx, source, lambda: IdentityGuard(source, value))
            return DisabledFunctionVariable(value, source=source)
        return wrap(tx, value.fn, None if source is None else AttrSource(source, "fn"))
    if isinstance(value, torch.nn.Module):
        _guard(tx, source, lambda: TypeGuard(source, type(value)))
        return ModuleVariable(value, source=source)
    from dynamo.variables.contexts import real_context
    context = real_context(value)
    if context is not None:
        _guard(tx, source, lambda: TypeGuard(source, type(value)))
        return context
    identity = lambda: IdentityGuard(source, value)  # noqa: E731
    if isinstance(value, types.ModuleType):
        _guard(tx, source, identity)
        return PythonModuleVariable(value, source=source)
    if is_torch_function(value):
        _guard(tx, source, identity)
        return TorchFunctionVariable(value, source=source)
    if isinstance(value, types.FunctionType):
        _guard(tx, source, identity)
        return UserFunctionVariable(value, source=source)
    if _is_builtin(value):
        return BuiltinVariable(value)
    if is_method_descriptor(value):
        return SlotFunctionVariable(value)
    if _is_bound_builtin_method(value):
        owner_source = None if source is None else AttrSource(source, "__self__")
        function = class_lookup(type(value.__self__), value.__name__)
        return BoundMethodVariable(SlotFunctionVariable(function),
                                   wrap(tx, value.__self__, owner_source))
    if isinstance(value, type):
        _guard(tx, source, identity)
        return ClassVariable(value, source=source)
    if isinstance(value, types.MethodType):
        owner_source = None if source is None else AttrSource(source, "__self__")
        return BoundMethodVariable(wrap(tx, value.__func__, None), wrap(tx, value.__self__,
                                                                          owner_source))
    if isinstance(value, functools.partial):
        part = None if source is None else AttrSource(source, "func")
        return PartialVariable(wrap(tx, value.func, part),
                               tuple(wrap_computed(tx, arg) for arg in value.args),
                               {key: wrap_computed(tx, item) for key, item in
                                value.keywords.items()})
    _guard(tx, source, lambda: TypeGuard(source, type(value)))
    if source is not None:
        _note_alias(tx, value, source)
    return UserObjectVariable(value, source=source)


def _note_alias(tx, value: Any, source: Source) -> None:
    """Record the first source of a plain object; when another source reaches the same object,
    guard that they name one object, so that the guard set reads its attributes through the
    first only (HF models reach one configuration through every layer: 70 reads of attributes
    through transformers' Python `__getattribute__` per check of T5-small)."""
    seen = tx.state.object_sources.setdefault(id(value), (value, source))
    if seen[0] is value and seen[1] != source:
        tx.guards.add(AliasGuard(source, seen[1]))


def _is_bound_builtin_method(value: Any) -> bool:
    """`some_dict.get`: a builtin method bound to an instance of a modelled type."""
    if type(value).__name__ not in ("builtin_function_or_method", "method-wrapper"):
        return False
    owner = getattr(value, "__self__", None)
    if owner is None or isinstance(owner, (type, types.ModuleType)):
        return False
    return is_method_descriptor(class_lookup(type(owner), getattr(value, "__name__", "")))


_builtin_ids: list = [0, frozenset()]  # (size of the registries, ids of their functions)


def _is_builtin(value: Any) -> bool:
    size = len(BUILTIN_RULES) + len(PURE)
    if _builtin_ids[0] != size:  # rules registered since
        _builtin_ids[:] = [size, frozenset(id(function) for function in (*BUILTIN_RULES, *PURE))]
    if id(value) in _builtin_ids[1]:  # by identity: `in` on a dict would run the value's __eq__
        return True
    module = getattr(value, "__module__", None)
    return isinstance(value, (types.BuiltinFunctionType, type)) and module in _BUILTIN_MODULES


def wrap_computed(tx, value: Any) -> Variable:
    """A variable for a value computed at trace time (no source, no guards)."""
    if is_constant_value(value):
        return ConstantVariable(value)
    kind = type(value)
    if kind is list:
        return ListVariable.new([wrap_computed(tx, item) for item in value])
    if kind is tuple or (isinstance(value, tuple) and hasattr(kind, "_fields")):
        return TupleVariable(tuple(wrap_computed(tx, item) for item in value), kind)
    if kind in (dict, collections.OrderedDict):
        return DictVariable.new({real_key(tx, key): wrap_computed(tx, item)
                                 for key, item in value.items()},
                                python_class=kind)
    if kind in (set, frozenset):
        from dynamo.variables.containers import SetVariable
        return SetVariable.new([wrap_computed(tx, item) for item in value])
    if hasattr(value, "__next__") and not isinstance(value, types.GeneratorType):
        from dynamo.variables.iterators import SequenceIterator
        return SequenceIterator.over([wrap_computed(tx, item) for item in value])
    return wrap(tx, value, None)


def real_key(tx, key: Any) -> Any:
    """The key a real dict's `key` has in a dict variable: the same as a lookup with that
    key's variable computes (`containers.constant_key`), so that a class, function or module
    key of a library's dict is found (`_VALIDATORS.get(types.UnionType)` returned None)."""
    if literal(key) is not None:
        return key
    from dynamo.variables.containers import constant_key
    return constant_key(wrap(tx, key, None))


def new_dict_from(tx, value: Variable) -> DictVariable:
    """A fresh dict variable from a mapping or an iterable of pairs (for `dict(x)`, `**x`)."""
    if isinstance(value, DictVariable):
        return DictVariable.new(value.items)
    from dynamo.variables.containers import constant_key
    items = {}
    for pair in tx.iterate(value):
        key, item = tx.iterate(pair)
        items[constant_key(key)] = item
    return DictVariable.new(items)
