"""Which facts a trace reads, and the guard each one gets (stage: trace; input: a fact the
tracer is about to rely on; output: guards added to the trace's `GuardSet`).

`builder.wrap` guards every value read through a source (`guards.install.guards_for`). The
facts here are the ones a value's own guards do not cover, each guarded by the function that
reads it, so that no call site has to remember:

- values reached without a source: a user's function, class or module gets one of its own (an
  `ObjectSource`, held weakly), so that its code, defaults, closure cells and attributes are
  guarded as read; values defined by libraries (torch, the standard library, installed
  packages) are trusted not to change (`dynamo.skips`) and get none;
- library module attributes computed by a descriptor of the module's class
  (`torch.backends.cudnn.enabled`): process state, re-read by the check;
- torch functions folded at trace time (`torch.get_num_threads()`, `torch.initial_seed()`): the
  check calls them again, unless they are pure or constant for the process;
- a builtin the code used (`max`): no global of that name has appeared since;
- tensor facts outside the tensor guard (`x.storage_offset()`, `x.is_leaf`, `x.is_pinned()`, a
  Python attribute set on a tensor);
- identity: which sources the trace treated as one object, and which as distinct
  (`guards.kinds.aliasing`).
"""
from __future__ import annotations

import threading
import types
from typing import Any, Optional

import torch

from guards import AliasGuard, ConstantGuard, ContainsGuard, is_constant
from guards.sources import (AttrSource, CallSource, GlobalsSource, MethodCallSource,
                            ObjectSource, Source)
from dynamo import skips
from dynamo.variables.attributes import MISSING, class_lookup, is_data_descriptor

_HEAPTYPE = 1 << 9


# -- values without a source ------------------------------------------------------------------
def is_trusted(value: Any) -> bool:
    """Whether `value` (a function, class or module) is defined by a library or by framejit,
    whose definitions are not changed while a program runs."""
    if isinstance(value, types.FunctionType):
        code = value.__code__
        if skips.is_own(code) or skips.is_library_file(code.co_filename):
            return True
        # code made by exec (a dataclass's generated __init__): trusted when its module is
        return code.co_filename.startswith("<") and _module_is_library(value)
    if isinstance(value, type):
        return not value.__flags__ & _HEAPTYPE or _module_is_library(value)
    if isinstance(value, types.ModuleType):
        return skips.is_library_module(value)
    return True


def _module_is_library(value: Any) -> bool:
    """Whether `value.__module__` is an imported library module. A module not imported (a
    class or function made by `exec` in a namespace of its own) is the user's: trusting it
    left class attributes read without a source unguarded (fuzzer P11)."""
    import sys
    module = sys.modules.get(getattr(value, "__module__", None) or "")
    return module is not None and skips.is_library_module(module)


def own_source(value: Any) -> Optional[Source]:
    """The source of a user's function, class or module reached without one (through a class,
    a bound method, an import inside the function, a library's object): the object itself,
    bound into the check weakly. None for anything else (trusted or not an object the check
    could rely on)."""
    if isinstance(value, (types.FunctionType, type, types.ModuleType)) and not is_trusted(value):
        return ObjectSource.of(value)
    return None


def is_own_root(source: Optional[Source]) -> bool:
    """Whether `source` is an object bound into the check: guards on it alone hold trivially
    (it is the object seen at capture while it lives); guards on what is read from it do not."""
    return type(source) is ObjectSource


# -- library module attributes and torch functions ------------------------------------------
def module_attribute_source(module: types.ModuleType, name: str,
                            source: Optional[Source]) -> Optional[Source]:
    """The source of `module.name` as the trace reads it: through the module's own source for
    a user module; for a library module none (trusted), except for an attribute a descriptor
    of the module's class computes (`torch.backends.cudnn.enabled`, `mkldnn.enabled`): that
    is process state, which the check reads again."""
    if not skips.is_library_module(module):
        return None if source is None else AttrSource(source, name)
    descriptor = class_lookup(type(module), name)
    if descriptor is not MISSING and is_data_descriptor(descriptor):
        return AttrSource(ObjectSource.of(module, f"module {module.__name__}"), name)
    return None


def _process_constants() -> frozenset:
    """Torch functions whose result cannot change while a process runs (hardware and build)."""
    names = ["cuda.is_available", "cuda.device_count", "cuda.is_bf16_supported",
             "backends.cudnn.is_available", "backends.mkldnn.is_available",
             "backends.mps.is_available", "backends.mps.is_built",
             "backends.openmp.is_available", "cuda.get_device_capability",
             "cuda.get_device_name"]
    found = []
    for name in names:
        value = torch
        for part in name.split("."):
            value = getattr(value, part, None)
        if value is not None:
            found.append(id(value))
    return frozenset(found)


PROCESS_CONSTANTS = _process_constants()


def guard_call_result(tx, function: Any, arguments: tuple, result: Any,
                      keywords: Optional[dict] = None) -> None:
    """A torch function's result folded at trace time (no tensor arguments): the check calls it
    again with the same arguments, unless the result cannot change in this process."""
    keywords = tuple(sorted((keywords or {}).items()))
    if id(function) in PROCESS_CONSTANTS or result is None or not is_constant(result):
        return  # (None: a procedure, not a reader; the check must not call it again)
    if not all(is_constant(value) for value in (*arguments, *(v for _, v in keywords))):
        return  # not repeatable from constants: the value rests on guarded arguments
    try:
        hash((function, arguments, keywords))
    except TypeError:
        return
    tx.guards.add(ConstantGuard(CallSource(function, tuple(arguments), keywords), result))


# -- builtins -------------------------------------------------------------------------------
def guard_builtin_lookup(tx, name: str) -> None:
    """The code read builtin `name` because its module has no global of that name: guard that
    none has appeared since (a global `max` defined later shadows the builtin)."""
    if skips.is_library_globals(tx.f_globals):
        return
    if tx.f_globals is tx.state.root_globals:
        source: Optional[Source] = GlobalsSource()
    else:
        source = tx.globals_source
    if source is not None:
        tx.guards.add(ContainsGuard(source, name, False))


# -- identity -------------------------------------------------------------------------------
_current = threading.local()  # .facts: the IdentityFacts of the trace in progress on this thread


def note_object(tx, value: Any, source: Optional[Source], relevant=False,
                merged: bool = True) -> None:
    """`value` was reached through `source`; if it was reached before through another one and
    the trace treats the two as one (`merged`), guard that they stay one object."""
    _current.facts = tx.guards.identities
    if source is None or is_own_root(source):
        return
    first = tx.guards.identities.note(value, source, relevant, merged)
    if first is not None:
        tx.guards.add(AliasGuard(source, first))


def identity_used(tx, *values) -> None:
    """The trace relied on the identity of these variables (`is`, `id()`, `==` of objects
    without `__eq__`): guard that the objects behind them stay as distinct, or as shared, as
    they were."""
    for value in values:
        _mark(tx.guards.identities, value)


def identity_by_source(tx, left, right) -> Optional[bool]:
    """`left is right` for values read through sources that the trace does not model as
    objects (tuples: one variable per read), answered from the objects behind the sources
    and guarded; None when either was not noted."""
    if left.source is None or right.source is None:
        return None
    facts = tx.guards.identities
    first, second = facts.object_at(left.source), facts.object_at(right.source)
    if first is None or second is None:
        return None
    facts.mark_source(left.source)
    facts.mark_source(right.source)
    return first is second


def mark_identity(value) -> None:
    """`identity_used` where no tracer is at hand (an object used as a dict key): marks it in
    the facts of the trace in progress on this thread."""
    facts = getattr(_current, "facts", None)
    if facts is not None:
        _mark(facts, value)


def _mark(facts, value) -> None:
    box = getattr(value, "box", None)
    real = getattr(box, "real", None) if box is not None else None
    if real is not None:
        facts.mark(real)
    elif value.source is not None and (getattr(value, "is_real", False) or
                                       hasattr(value, "node")):
        facts.mark_source(value.source)


def guard_identity(tx, value) -> None:
    """The trace folded something only this very object gives (`id(obj)`): guard that the
    source still names it."""
    from guards import IdentityGuard
    real = getattr(value, "value", None) if getattr(value, "is_real", False) else None
    if real is None:
        box = getattr(value, "box", None)
        real = getattr(box, "real", None)
    if real is None and hasattr(value, "node"):
        real = input_tensor(tx, value)
    if real is not None and value.source is not None and not is_own_root(value.source):
        tx.guards.add(IdentityGuard(value.source, real))


# -- tensors -------------------------------------------------------------------------------
def input_tensor(tx, tensor) -> Optional[torch.Tensor]:
    """The real tensor behind a graph input's variable, or None for a computed tensor."""
    if tensor.source is None or tensor.node.op != "placeholder":
        return None
    graph = tx.graph
    for source, value in zip(graph.input_sources, graph.example_inputs):
        if source == tensor.source:
            return value
    return None


def tensor_fact(tx, tensor, method: str) -> Any:
    """`tensor.<method>()` for a fact of the storage (`storage_offset`, `is_pinned`): from the
    real input, guarded, for a graph input; for a computed tensor from its fake example, with
    the same fact guarded on every input sharing its storage (a view's offset is its base's
    plus the view's)."""
    real = input_tensor(tx, tensor)
    if real is not None:
        value = getattr(real, method)()
        tx.guards.add(ConstantGuard(MethodCallSource(tensor.source, method), value))
        return value
    storage = _fake_storage(tensor.example)
    graph = tx.graph
    for node in graph.graph.nodes:
        if node.op != "placeholder":
            continue
        example = node.meta.get("example_value")
        source = node.meta.get("source")
        if source is None or example is None or _fake_storage(example) != storage:
            continue
        real = next((value for known, value in zip(graph.input_sources, graph.example_inputs)
                     if known == source), None)
        if real is not None:
            tx.guards.add(ConstantGuard(MethodCallSource(source, method), getattr(real, method)()))
    return getattr(tensor.example, method)()


def _fake_storage(example) -> Optional[int]:
    try:
        return example.untyped_storage()._cdata
    except Exception:  # noqa: BLE001  (a tensor without storage)
        return None


def tensor_is_leaf(tx, tensor) -> bool:
    """`tensor.is_leaf`: the fake example agrees with the input; for an input that requires
    grad, whether it is a leaf is guarded (a tensor that does not require grad is one)."""
    real = input_tensor(tx, tensor)
    if real is not None and real.requires_grad:
        tx.guards.add(ConstantGuard(AttrSource(tensor.source, "is_leaf"), real.is_leaf))
        return real.is_leaf
    return tensor.example.is_leaf


def tensor_instance_attribute(tx, tensor, name: str):
    """A Python attribute set on an input tensor (`x.tag = 5`): `(present, value)`, with its
    presence guarded (and its value, through its source, by the caller's `wrap`). Computed
    tensors have none."""
    real = input_tensor(tx, tensor)
    if real is None:
        return False, None
    namespace = getattr(real, "__dict__", None) or {}
    present = name in namespace
    tx.guards.add(ContainsGuard(AttrSource(tensor.source, "__dict__"), name, present))
    return present, namespace.get(name)
