"""Variables -> FX node arguments and fake example arguments, for recording a graph call.

Input: (nested) variables passed to a tensor operation. Output: the same structure with tensors
replaced by their FX nodes, and by their fake example values.
"""
from __future__ import annotations

from typing import Any

from dynamo.breaks import UNSUPPORTED_OBJECT, Unsupported
from dynamo.variables.base import NotConstant, Variable
from dynamo.variables.containers import DictVariable, ListVariable, SliceVariable, TupleVariable
from dynamo.variables.opaque import OpaqueNodeVariable
from dynamo.variables.symbolic import SymbolicVariable
from dynamo.variables.tensor import TensorVariable


def lower(value: Any) -> tuple[Any, Any]:

    if isinstance(value, TensorVariable):
        return value.node, value.example
    if isinstance(value, OpaqueNodeVariable):
        return value.node, value.value
    if isinstance(value, SymbolicVariable):
        return value.node, value.example
    if isinstance(value, (tuple, list)):
        pairs = [lower(item) for item in value]
        kind = type(value)
        return kind(p[0] for p in pairs), kind(p[1] for p in pairs)
    if isinstance(value, dict):
        pairs = {key: lower(item) for key, item in value.items()}
        return ({k: p[0] for k, p in pairs.items()}, {k: p[1] for k, p in pairs.items()})
    if isinstance(value, TupleVariable):
        return lower(tuple(value.items))
    if isinstance(value, ListVariable):
        return lower(list(value.items))
    if isinstance(value, DictVariable):
        return lower(dict(value.items))
    if isinstance(value, SliceVariable):
        parts = [lower(part) for part in value.parts]
        return slice(*(p[0] for p in parts)), slice(*(p[1] for p in parts))
    if isinstance(value, Variable):
        try:
            constant = value.as_constant()
        except NotConstant:
            raise Unsupported(UNSUPPORTED_OBJECT,
                              f"{value.describe()} passed to a tensor operation") from None
        return constant, constant
    return value, value
