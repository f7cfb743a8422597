"""Calling a class during the trace: building new objects.

Namedtuples become tuples of their class; `torch.Size`, `torch.device` and other immutable
types fold; instances of plain Python classes (including dataclasses) become
`NewObjectVariable`s, instances of Python subclasses of dict, OrderedDict and list (such as
HuggingFace's `ModelOutput` dataclasses) become dict and list variables of that class; their
`__init__` is inlined. Classes whose instances framejit cannot model break the graph.
"""
from __future__ import annotations

import collections

from dynamo.breaks import UNSUPPORTED_CALL, Unsupported
from dynamo.variables.side_effects import Box
from dynamo.variables.base import NotConstant, Variable
from dynamo.variables.containers import DictVariable, ListVariable, TupleVariable
from dynamo.variables.exceptions import ExceptionVariable, is_exception_class
from dynamo.variables.objects import NewObjectVariable, class_lookup
from dynamo.variables.constant import is_constant_value
from dynamo.variables.containers import constant_copy
from dynamo.variables.contexts import context_for_class
from dynamo.variables.functions import bind_arguments
from dynamo.variables.modules import NewModuleVariable


def construct(tx, cls: type, args: list, kwargs: dict) -> Variable:
    context = context_for_class(tx, cls, args, kwargs)
    if context is not None:
        return context
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        return _namedtuple(tx, cls, args, kwargs)
    if cls in (collections.OrderedDict, collections.defaultdict):
        return _mapping(tx, cls, args, kwargs)
    if is_exception_class(cls):
        return _exception(tx, cls, args, kwargs)
    folded = _fold(tx, cls, args, kwargs)
    if folded is not None:
        return folded
    import torch
    if issubclass(cls, torch.nn.Module):
        return _stateless_module(tx, cls, args, kwargs)
    if _allocatable(cls):
        instance = allocate(tx, cls)
        init = class_lookup(cls, "__init__")
        if init is not object.__init__:  # a Python __init__, or dict.__init__ and the like
            tx.pass_direct(cls, init)
            tx.constructing(instance, lambda: tx.wrap(init, None).call(tx, [instance, *args],
                                                                        kwargs))
        elif args or kwargs:
            raise Unsupported(UNSUPPORTED_CALL, f"{cls.__name__}() takes no arguments")
        return instance
    raise Unsupported(UNSUPPORTED_CALL, f"creating a {cls.__name__} object")


def _stateless_module(tx, cls: type, args: list, kwargs: dict) -> Variable:
    """`CrossEntropyLoss()`, `nn.GELU(approximate="tanh")` and the like inside the region
    (HuggingFace heads build their loss module on every call): a module class of `torch.nn`
    called with constant arguments and holding no parameters or buffers is built now, once,
    and its `forward` inlined. Where the object leaves the graph (returned, stored), the
    glue builds a fresh one from the same arguments, as each eager call does. Modules with
    state, other classes, or tensor arguments break the graph."""
    import torch
    refusal = f"creating a module ({cls.__name__}) inside a compiled region"
    if not cls.__module__.startswith("torch.nn.modules."):
        raise Unsupported(UNSUPPORTED_CALL, refusal + " (only torch.nn's own stateless "
                          "modules are built during the trace)")
    try:
        constant_args = tuple(argument.as_constant() for argument in args)
        constant_kwargs = {name: value.as_constant() for name, value in kwargs.items()}
    except NotConstant:
        raise Unsupported(UNSUPPORTED_CALL, refusal + " with arguments that are not "
                          "constants") from None
    if any(isinstance(value, torch.Tensor) for value in (*constant_args,
                                                         *constant_kwargs.values())):
        raise Unsupported(UNSUPPORTED_CALL, refusal + " with tensor arguments")
    try:
        module = cls(*constant_args, **constant_kwargs)
    except Exception as error:  # eager raises it when the frame runs as is
        raise Unsupported(UNSUPPORTED_CALL, f"{refusal}: {type(error).__name__}: "
                          f"{error}") from None
    if next(module.parameters(), None) is not None or next(module.buffers(), None) is not None:
        raise Unsupported(UNSUPPORTED_CALL, refusal + " with parameters or buffers")
    return NewModuleVariable(module, arguments=(constant_args, constant_kwargs))


_CONTAINER_BASES = (dict, collections.OrderedDict, list)


def _allocatable(cls: type) -> bool:
    """Instances framejit can create: plain `__dict__` objects and instances of Python
    subclasses of dict, OrderedDict and list, when no Python class overrides `__new__`."""
    base = _builtin_base(cls)
    if base is not object and base not in _CONTAINER_BASES:
        return False
    return class_lookup(cls, "__new__") is class_lookup(base, "__new__")


def _builtin_base(cls: type) -> type:
    """The first class of the MRO implemented in C (object, dict, OrderedDict, list...)."""
    for klass in cls.__mro__:
        if not klass.__flags__ & _HEAPTYPE:
            return klass
    return object


_HEAPTYPE = 1 << 9


def allocate(tx, cls: type) -> Variable:
    """A fresh instance of `cls` whose `__init__` has not run (`object.__new__(cls)`)."""
    base = _builtin_base(cls)
    attributes = Box("object", {}, python_type=cls)
    if base in (dict, collections.OrderedDict):
        if cls in (dict, collections.OrderedDict):
            return DictVariable.new({}, python_class=cls)
        return DictVariable(Box("dict", {}), cls, attributes=attributes)
    if base is list:
        if cls is list:
            return ListVariable.new([])
        return ListVariable(Box("list", []), cls, attributes=attributes)
    if base is object and _allocatable(cls):
        return NewObjectVariable(cls, attributes)
    raise Unsupported(UNSUPPORTED_CALL, f"creating a {cls.__name__} object")


def _exception(tx, cls: type, args: list, kwargs: dict) -> Variable:
    if class_lookup(cls, "__new__") is not class_lookup(_builtin_base(cls), "__new__"):
        raise Unsupported(UNSUPPORTED_CALL, f"creating a {cls.__name__} (custom __new__)")
    instance = ExceptionVariable.new(cls, tuple(args))
    init = class_lookup(cls, "__init__")
    if init is not BaseException.__init__ and init is not class_lookup(_builtin_base(cls),
                                                                       "__init__"):
        tx.pass_direct(cls, init)
        tx.constructing(instance, lambda: tx.wrap(init, None).call(tx, [instance, *args],
                                                                    kwargs))
    elif kwargs:
        raise Unsupported(UNSUPPORTED_CALL, f"{cls.__name__}() takes no keyword arguments")
    return instance


def _namedtuple(tx, cls, args, kwargs) -> Variable:
    code = cls.__new__.__code__
    defaults = [tx.wrap_result(value) for value in (cls.__new__.__defaults__ or ())]
    bound = bind_arguments(code, cls.__name__, [None, *args], kwargs, tuple(defaults), {})
    return TupleVariable(tuple(bound[field] for field in cls._fields), cls)


def _mapping(tx, cls, args, kwargs) -> Variable:
    # here, not at the top: variables.builder imports this module (a cycle)
    from dynamo.variables.builder import new_dict_from
    if cls is collections.defaultdict:
        factory = args[0] if args else None
        initial = new_dict_from(tx, args[1]).items if len(args) > 1 else {}
        return DictVariable.new({**initial, **kwargs}, python_class=cls, default_factory=factory)
    initial = new_dict_from(tx, args[0]).items if args else {}
    return DictVariable.new({**initial, **kwargs}, python_class=cls)


_FOLDABLE_MODULES = ("torch", "builtins", "enum", "math", "fractions", "decimal", "numbers")


def _fold(tx, cls, args, kwargs):
    """Immutable library types (torch.Size, torch.device, torch.finfo...) on constants."""
    module = (getattr(cls, "__module__", "") or "").split(".")[0]
    if module not in _FOLDABLE_MODULES and not issubclass(cls, (int, float, str)):
        import enum
        if not issubclass(cls, enum.Enum):
            return None
    try:
        values = [constant_copy(arg) for arg in args]
        keywords = {key: constant_copy(value) for key, value in kwargs.items()}
    except NotConstant:
        return None
    try:
        result = cls(*values, **keywords)
    except Exception as error:
        raise Unsupported(UNSUPPORTED_CALL, f"{cls.__name__}() raised {type(error).__name__}: "
                          f"{error}") from None
    if is_constant_value(result):
        return tx.wrap_result(result)
    return None
