"""Real values -> variables, installing the guards that make relying on them sound.

`wrap(tx, value, source)` is used for everything read from the frame: arguments, globals,
attributes, closure contents, defaults. With a `source` it installs what the guard table gives
for the value (`guards.install.guards_for`: tensors, a full tensor match; constants, equality;
containers, type and length or keys, then their items as they are wrapped; functions, classes
and modules, identity, and a user function's code and defaults; objects and `nn.Module`s,
exact type) and records the object's identity (`guarding.note_object`). A user's function,
class or module reached without a source gets one of its own (`guarding.own_source`); values
of libraries (torch, the standard library, installed packages) are trusted not to change and
are guarded by nothing. `wrap_computed(tx, value)` is for values computed at trace time.
"""
from __future__ import annotations

import collections
import contextlib
import enum
import functools
import threading
import types
from typing import Any, Optional

import torch

from dynamo import _C
from dynamo.breaks import DISABLED, UNSUPPORTED_OBJECT, Unsupported
from dynamo.variables.side_effects import Box
from dynamo.variables.base import Variable, variable
from dynamo.variables.attributes import class_lookup
from dynamo.variables.builtin_methods import SlotFunctionVariable, is_method_descriptor
from dynamo.variables.builtins import BUILTIN_RULES, PURE, BuiltinVariable
from dynamo.variables.constant import ConstantVariable, is_constant_value
from dynamo.variables.containers import DictVariable, ListVariable, TupleVariable
from dynamo.variables.functions import BoundMethodVariable, PartialVariable, UserFunctionVariable
from dynamo.variables.modules import ModuleVariable, PythonModuleVariable
from dynamo.variables.objects import ClassVariable, UserObjectVariable
from dynamo.variables.profiling import RecordFunctionClass, is_record_function
from dynamo.variables import registry
from dynamo.variables.contexts import RestoreGradMode, exit_nothing, wrap_exit
from dynamo.variables.torch_calls import TorchFunctionVariable, is_torch_function
from dynamo.variables import guarding
from guards import AliasGuard, IdentityGuard, TypeGuard, UnguardableValue
from guards import is_constant as guards_is_constant
from guards.install import guards_for
from guards.kinds.tensors import TensorMatchGuard
from guards.sources import (AttrSource, ConstantSource, DictItemSource, ItemSource, Source,
                            literal)
from dynamo.variables.attributes import python_override
from dynamo.variables.construct import _builtin_base
from dynamo.variables.containers import SetVariable, constant_key
from dynamo.variables.contexts import real_context
from dynamo.variables.iterators import SequenceIterator

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
    if source is None:
        source = guarding.own_source(value)
    if isinstance(value, torch.Tensor):
        return _wrap_tensor(tx, value, source)
    if value is None or isinstance(value, types.CodeType):
        _install(tx, value, source)
        return ConstantVariable(value, source=source)
    if type(value) is int and registry.is_frame_source(source) and \
            tx.graph.policy.number(value, source):
        tx.guards.add(TypeGuard(source, int))  # its value: the trace's shape guard
        return tx.graph.add_number_input(value, source)
    if is_constant_value(value) and type(value) not in (tuple, torch.Size, range, slice) and \
            (source is None or guards_is_constant(value)):
        _install(tx, value, source)
        return ConstantVariable(value, source=source)
    kind = type(value)
    if kind in (list, tuple, torch.Size) or \
            (isinstance(value, tuple) and hasattr(kind, "_fields")) or \
            (isinstance(value, list) and _modelled_subclass(kind, source)):
        return _wrap_sequence(tx, value, source)
    if kind in _MAPPINGS or _modelled_subclass(kind, source):
        return _wrap_mapping(tx, value, source)
    if kind is set:
        return _wrap_set(tx, value, source)
    if kind in (range, slice, frozenset) or isinstance(value, enum.Enum):
        _install(tx, value, source)
        return ConstantVariable(value, source=source)
    return _wrap_object(tx, value, source)


def _install(tx, value: Any, source: Optional[Source], free=None) -> None:
    """The guards the table gives for relying on `value` read from `source` (none without a
    source; none on an object bound into the check itself, which is that object). `free`:
    a tensor's (size dims, stride dims) traced symbolically, which its match leaves free
    (the trace's shape guard checks them)."""
    if source is None:
        return
    try:
        guards = guards_for(value, source, trusted=guarding.is_trusted(value))
    except UnguardableValue as error:
        raise Unsupported(UNSUPPORTED_OBJECT, str(error)) from None
    if free is not None and (free[0] or free[1]):
        guards = [guard.relaxed(*free) if isinstance(guard, TensorMatchGuard) else guard
                  for guard in guards]
    if guarding.is_own_root(source):
        guards = [guard for guard in guards if guard.source != source]
    tx.guards.extend(guards)


def _wrap_set(tx, value: set, source: Optional[Source]) -> Variable:
    """A set of constants: guarded on its type and items (in iteration order)."""
    box = tx.side_effects.box_for(value)
    if box is not None:
        _alias(tx, source, box.source)
        return SetVariable(box, source=source)
    if not all(guards_is_constant(item) for item in value):
        raise Unsupported(UNSUPPORTED_OBJECT, "a set of values that cannot be guarded")
    _install(tx, value, source)
    items = {item: ConstantVariable(item) for item in value}
    box = Box("set", items, source=_box_source(value, source), real=value)
    guarding.note_object(tx, value, source, relevant=True)
    return SetVariable(tx.side_effects.track(box), source=source)


_MAPPINGS = (dict, collections.OrderedDict, collections.defaultdict, types.MappingProxyType)


def _alias(tx, source: Optional[Source], first: Optional[Source]) -> None:
    """A value the trace already holds (one box, one placeholder) read again through `source`:
    the two sources must keep naming one object."""
    if source is not None and first is not None and not guarding.is_own_root(source):
        first = tx.guards.identities.alias(source, first)  # None: implied by earlier aliases
        if first is not None:
            tx.guards.add(AliasGuard(source, first))


def _wrap_tensor(tx, value: torch.Tensor, source: Optional[Source]) -> Variable:
    if source is None:
        raise Unsupported(UNSUPPORTED_OBJECT, "a tensor held by a library module (no way to "
                          "fetch it again at run time)")
    if type(value) not in (torch.Tensor, torch.nn.Parameter, torch.nn.Buffer) and \
            not isinstance(value, torch.nn.Parameter):
        raise Unsupported(UNSUPPORTED_OBJECT, f"tensor subclass {type(value).__name__}")
    result = tx.graph.add_input(value, source)
    _install(tx, value, source, free=tx.graph.shapes.free_entries(result.example))
    if result.source != source:  # one placeholder for two sources (tied weights, f(a, a))
        _alias(tx, source, result.source)
        return result
    guarding.note_object(tx, value, source)
    tx.guards.identities.note_tensor(value, source, _mutated(tx.graph, result.example))
    return result


def _mutated(graph, example: torch.Tensor):
    """Whether the graph wrote to the fake input `example`, asked after the trace (an
    inference tensor's writes are counted by the graph's `write_counts`)."""
    start = graph.write_counts.version(example)
    return lambda: graph.write_counts.version(example) != start


def _modelled_subclass(kind: type, source: Optional[Source]) -> bool:
    """Python subclasses of dict, OrderedDict and list are modelled as containers, unless a
    guard would have to read items through a Python `__getitem__`/`__iter__`/`keys`."""
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


_WRAPPING = threading.local()   # ids of the containers being wrapped, per thread


@contextlib.contextmanager
def _entered(value):
    """Refuse a container met again while its own items are wrapped (`lst.append(lst)`):
    wrapping it recursed without end (an internal RecursionError, the frame run eagerly)."""
    active = _WRAPPING.__dict__.setdefault("ids", set())
    if id(value) in active:
        raise Unsupported(UNSUPPORTED_OBJECT, f"a {type(value).__name__} that contains itself")
    active.add(id(value))
    try:
        yield
    finally:
        active.discard(id(value))


def _wrap_sequence(tx, value, source: Optional[Source]) -> Variable:
    with _entered(value):
        return _wrap_sequence_items(tx, value, source)


def _wrap_sequence_items(tx, value, source: Optional[Source]) -> Variable:
    kind = type(value)
    is_list = isinstance(value, list)
    if is_list:
        box = tx.side_effects.box_for(value)
        if box is not None:
            _alias(tx, source, box.source)
            return ListVariable(box, kind, source=source)
    _install(tx, value, source)
    items = [wrap(tx, item, None if source is None else ItemSource(source, index))
             for index, item in enumerate(list.__iter__(value) if is_list else value)]
    if is_list:
        box = Box("list", items, source=_box_source(value, source), real=value)
        guarding.note_object(tx, value, source, relevant=True)
        return ListVariable(tx.side_effects.track(box), kind, source=source)
    guarding.note_object(tx, value, source, merged=False)  # one variable per read
    return TupleVariable(tuple(items), kind, source=source)


def _wrap_mapping(tx, value: dict, source: Optional[Source]) -> Variable:
    with _entered(value):
        return _wrap_mapping_items(tx, value, source)


def _wrap_mapping_items(tx, value: dict, source: Optional[Source]) -> Variable:
    box = tx.side_effects.box_for(value)
    kind = type(value)
    factory = None
    if isinstance(value, collections.defaultdict):
        factory = wrap(tx, value.default_factory,
                       None if source is None else AttrSource(source, "default_factory"))
    if box is not None:
        _alias(tx, source, box.source)
        return DictVariable(box, kind, factory, source=source)
    _install(tx, value, source)
    pairs = value.items() if isinstance(value, types.MappingProxyType) else dict.items(value)
    items = {real_key(tx, key): wrap(tx, item, None if source is None else
                                     DictItemSource(source, key))
             for key, item in pairs}
    box = Box("dict", items, source=_box_source(value, source), real=value)
    tx.side_effects.track(box)
    guarding.note_object(tx, value, source, relevant=True)
    return DictVariable(box, kind, factory, source=source)


def _wrap_object(tx, value: Any, source: Optional[Source]) -> Variable:
    special = _wrap_framejit_value(tx, value, source)
    if special is not None:
        return special
    if isinstance(value, torch.nn.Module):
        _install(tx, value, source)
        guarding.note_object(tx, value, source)
        return ModuleVariable(value, source=source)
    context = real_context(value)
    if context is not None:
        _install(tx, value, source)
        return context
    if isinstance(value, types.ModuleType):
        _install(tx, value, source)
        return PythonModuleVariable(value, source=source)
    if isinstance(value, torch.jit.ScriptFunction):
        return _wrap_script_function(tx, value, source)
    if is_torch_function(value):
        _install(tx, value, source)
        return TorchFunctionVariable(value, source=source)
    if isinstance(value, types.FunctionType):
        _install(tx, value, source)
        return UserFunctionVariable(value, source=source)
    if _is_builtin(value) or is_method_descriptor(value):
        _install(tx, value, source)
        return BuiltinVariable(value) if _is_builtin(value) else SlotFunctionVariable(value)
    if _is_bound_builtin_method(value):
        _install(tx, value, source)
        owner_source = None if source is None else AttrSource(source, "__self__")
        function = class_lookup(type(value.__self__), value.__name__)
        return BoundMethodVariable(SlotFunctionVariable(function),
                                   wrap(tx, value.__self__, owner_source))
    if is_record_function(value):   # a profiling range: no graph node (variables.profiling)
        _install(tx, value, source)
        return RecordFunctionClass(value, source=source)
    if isinstance(value, type):
        _install(tx, value, source)
        return ClassVariable(value, source=source)
    if isinstance(value, types.MethodType):
        _install(tx, value, source)
        return BoundMethodVariable(wrap(tx, value.__func__, _part(source, "__func__")),
                                   wrap(tx, value.__self__, _part(source, "__self__")))
    if isinstance(value, functools.partial):
        return _wrap_partial(tx, value, source)
    _install(tx, value, source)
    guarding.note_object(tx, value, source, relevant=True)
    return UserObjectVariable(value, source=source)


def _wrap_script_function(tx, value, source: Optional[Source]) -> Variable:
    """A `torch.jit.script`ed function is traced as the Python function it was made from
    (`torch.jit.script` keeps it as `_torchdynamo_inline`). Recorded as a node, FX's
    generated code named it `torch.jit.ScriptFunction(...)`, the class, which cannot be
    called (transformers 5.17's DeBERTa-v2 under the eager backend and `explain()`)."""
    original = getattr(value, "_torchdynamo_inline", None)
    if not isinstance(original, types.FunctionType):
        raise Unsupported(UNSUPPORTED_OBJECT, f"the TorchScript function {value.name!r} "
                          "(its Python source is not known)")
    _install(tx, value, source)
    return wrap(tx, original, _part(source, "_torchdynamo_inline"))


def _part(source: Optional[Source], name: str) -> Optional[Source]:
    return None if source is None else AttrSource(source, name)


def _wrap_framejit_value(tx, value: Any, source: Optional[Source]) -> Optional[Variable]:
    """framejit's own objects a rewritten frame holds (resume helpers, jit wrappers)."""
    special = registry.own_value(value)
    if special is not None:
        return special
    if isinstance(value, RestoreGradMode) or value is exit_nothing:
        return wrap_exit(tx, value, source)
    if isinstance(value, _C.ScopedCall):
        if value.callback is None or value.callback is _C.DISABLE:  # dynamo.disable(fn)
            if source is not None:
                tx.guards.add(IdentityGuard(source, value))
            return DisabledFunctionVariable(value, source=source)
        return wrap(tx, value.fn, _part(source, "fn"))
    return None


def _wrap_partial(tx, value: functools.partial, source: Optional[Source]) -> Variable:
    """`functools.partial(func, *args, **keywords)`: with a source, each part is read through
    it and guarded as read (`p.keywords['a'] = 5` after capture recompiles)."""
    _install(tx, value, source)
    if source is None:
        return PartialVariable(wrap(tx, value.func, None),
                               tuple(wrap_computed(tx, arg) for arg in value.args),
                               {key: wrap_computed(tx, item) for key, item in
                                value.keywords.items()})
    args, keywords = AttrSource(source, "args"), AttrSource(source, "keywords")
    return PartialVariable(wrap(tx, value.func, AttrSource(source, "func")),
                           tuple(wrap(tx, arg, ItemSource(args, index))
                                 for index, arg in enumerate(value.args)),
                           {key: wrap(tx, item, DictItemSource(keywords, key))
                            for key, item in value.keywords.items()})


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
        return SetVariable.new([wrap_computed(tx, item) for item in value])
    if hasattr(value, "__next__") and not isinstance(value, types.GeneratorType):
        return SequenceIterator.over([wrap_computed(tx, item) for item in value])
    return wrap(tx, value, None)


def real_key(tx, key: Any) -> Any:
    """The key a real dict's `key` has in a dict variable: the same as a lookup with that
    key's variable computes (`containers.constant_key`), so that a class, function or module
    key of a library's dict is found (`_VALIDATORS.get(types.UnionType)` returned None)."""
    if literal(key) is not None:
        return key
    return constant_key(wrap(tx, key, None))


def _has_keys_method(value: Variable) -> bool:
    try:
        kind = value.python_type()
    except Unsupported:
        return False
    return kind not in (list, tuple) and hasattr(kind, "keys")


def new_dict_from(tx, value: Variable) -> DictVariable:
    """A fresh dict variable from a mapping or an iterable of pairs (for `dict(x)`, `**x`):
    as CPython, anything with a `keys` method is a mapping, read as `x[key]` for each key (a
    user `MutableMapping` was iterated as if it held pairs)."""
    if isinstance(value, DictVariable):
        return DictVariable.new(value.items)
    items = {}
    if _has_keys_method(value):
        for key in tx.iterate(value.call_method(tx, "keys", [], {})):
            items[constant_key(key)] = value.call_method(tx, "__getitem__", [key], {})
        return DictVariable.new(items)
    for pair in tx.iterate(value):
        key, item = tx.iterate(pair)
        items[constant_key(key)] = item
    return DictVariable.new(items)
