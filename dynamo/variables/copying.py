"""`copy.copy` and `copy.deepcopy` on variables, instead of tracing the `copy` module.

Input: the variable passed to a copy function. Output: a variable for the copy.

- Constants are their own copies; containers and objects created during the trace are copied
  structurally (deep copies recursively; a tensor inside a deep copy becomes a `clone` node).
- A pre-existing object (a configuration object read from a module, say) is copied for real at
  trace time, with a guard that the original's attributes are unchanged when the compiled code
  runs (an `ObjectSnapshotGuard`); the copy is a new object of the trace, built afresh where it
  escapes. Objects holding tensors, or objects with pending changes, are not folded.
"""
from __future__ import annotations

import copy
from typing import Any, Optional

import torch

from dynamo.breaks import UNSUPPORTED_CALL, Unsupported
from dynamo.variables.side_effects import Box
from dynamo.variables.base import Variable
from dynamo.variables.containers import (DictVariable, ListVariable, SetVariable, TupleVariable,
                                         is_subclass_instance)
from dynamo.variables.objects import NewObjectVariable, UserObjectVariable
from dynamo.variables.tensor import TensorVariable

COPY_FUNCTIONS = (copy.copy, copy.deepcopy)


def copy_call(tx, function, args: list, kwargs: dict) -> Optional[Variable]:
    """`copy.copy(value)` / `copy.deepcopy(value)`, or None to trace the call instead."""
    if len(args) != 1 or kwargs:
        return None
    deep = function is copy.deepcopy
    return _copy(tx, args[0], deep, {})


def _copy(tx, value: Variable, deep: bool, memo: dict) -> Optional[Variable]:
    if id(value) in memo:
        return memo[id(value)]
    if value.is_constant():
        return value
    if isinstance(value, TensorVariable):
        return _copy_tensor(tx, value) if deep else value
    item = (lambda inner: _copy(tx, inner, deep, memo)) if deep else (lambda inner: inner)
    if isinstance(value, TupleVariable):
        items = [item(element) for element in value.items]
        return None if None in items else TupleVariable(tuple(items), value.python_class)
    if isinstance(value, (ListVariable, DictVariable, SetVariable)):
        return _copy_container(tx, value, item, memo)
    if isinstance(value, NewObjectVariable):
        result = NewObjectVariable(value.cls, Box("object", {}, python_type=value.cls))
        memo[id(value)] = result
        for name, attribute in value.box.contents.items():
            copied = item(attribute)
            if copied is None:
                return None
            result.box.contents[name] = copied
        return result
    if isinstance(value, UserObjectVariable):
        return _copy_real(tx, value, deep)
    return None


def _copy_tensor(tx, value) -> Variable:
    if value.example.requires_grad:
        raise Unsupported(UNSUPPORTED_CALL, "deepcopy of a tensor that requires grad")
    return tx.graph.call("call_method", "clone", (value,), {})


def _copy_container(tx, value, item, memo: dict) -> Optional[Variable]:
    if is_subclass_instance(value):
        return None
    box = Box(value.box.kind, type(value.items)())
    if isinstance(value, ListVariable):
        result = ListVariable(box)
    elif isinstance(value, DictVariable):
        result = DictVariable(box, value.python_class, value.default_factory)
    else:
        result = type(value)(box, value.python_class)
    memo[id(value)] = result
    entries = value.items.items() if isinstance(value.items, dict) else enumerate(value.items)
    for key, element in entries:
        copied = item(element)
        if copied is None:
            return None
        if isinstance(value, ListVariable):
            box.contents.append(copied)
        else:
            box.contents[key] = copied
    return result


def _copy_real(tx, value, deep: bool) -> Optional[Variable]:
    """A pre-existing object copied for real; guarded on its attributes staying the same."""
    real = value.value
    if tx.side_effects.box_for(real) is not None or not _plain_state(real):
        return None
    if value.source is not None:
        from guards import ObjectSnapshotGuard
        tx.guards.add(ObjectSnapshotGuard.of(value.source, real, attributes=list(vars(real)),
                                             key_sets=[()]))
    copied = copy.deepcopy(real) if deep else copy.copy(real)
    if type(copied) is not type(real) or not _plain_state(copied):
        return None
    contents = {name: tx.wrap(attribute, None) for name, attribute in vars(copied).items()}
    return NewObjectVariable(type(copied), Box("object", contents, python_type=type(copied)))


def _plain_state(real: Any) -> bool:
    """An object whose whole state is a `__dict__` without tensors."""
    state = getattr(real, "__dict__", None)
    if not isinstance(state, dict) or hasattr(type(real), "__slots__"):
        return False
    leaves = torch.utils._pytree.tree_leaves(list(state.values()))
    return not any(isinstance(leaf, torch.Tensor) for leaf in leaves)
