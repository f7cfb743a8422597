"""Tensors built from symbolic numbers (stage: trace; input: a `torch.tensor(data)` /
`torch.as_tensor(data)` call whose data holds ints or floats computed from symbolic sizes,
`torch.tensor([x.size(0)])`, `torch.tensor([pos])`; output: graph nodes that build the same
tensor from the symbols, so one graph serves every size).

`torch.tensor` on fake tensors reads every number as a Python value, which specialises each
symbol (`s0 == 5`: one compile per size). Here each number becomes a 0-dimensional tensor of
the dtype `torch.tensor` would pick (`torch.scalar_tensor(n, dtype=...)`), and nested lists
stack them (`torch.stack`), which is what `torch.tensor` computes. Calls this does not cover
keep the old path (the numbers specialise): `requires_grad=True` (the result is a leaf),
`pin_memory`, ragged or empty lists, complex numbers, anything that is not a number.
"""
from __future__ import annotations

from typing import Any, Optional

import torch

from dynamo.variables.base import NotConstant, Variable
from dynamo.variables.constant import ConstantVariable
from dynamo.variables.containers import ListVariable, TupleVariable
from dynamo.variables.symbolic import SymbolicVariable, is_symbolic

BUILDERS = (torch.tensor, torch.as_tensor)
_NUMBER_TYPES = (bool, int, float)


def tensor_from_symbols(tx, function: Any, args: tuple, kwargs: dict) -> Optional[Variable]:
    """`function(*args, **kwargs)` (one of `BUILDERS`) as graph nodes when its data holds a
    symbolic number; None when it does not, or is a call this module leaves alone."""
    if len(args) != 1 or not _holds_symbol(args[0]):
        return None
    options = _options(kwargs)
    if options is None:
        return None
    shape, kinds = _layout(args[0])
    if shape is None or not kinds <= set(_NUMBER_TYPES):
        return None
    dtype = options.get("dtype") or _inferred_dtype(kinds)
    return _build(tx, args[0], {"dtype": dtype, "device": options.get("device")})


def _holds_symbol(data: Variable) -> bool:
    if isinstance(data, SymbolicVariable):
        return is_symbolic(data.example)
    if isinstance(data, (ListVariable, TupleVariable)):
        return any(_holds_symbol(item) for item in data.items)
    return False


def _options(kwargs: dict) -> Optional[dict]:
    """The constant keyword arguments (dtype, device; requires_grad=False), or None."""
    options = {}
    for key, value in kwargs.items():
        try:
            options[key] = value.as_constant()
        except NotConstant:
            return None
    if options.pop("requires_grad", False) or set(options) - {"dtype", "device"}:
        return None
    return options


def _layout(data: Variable) -> tuple[Optional[tuple], set]:
    """(the nested lists' shape, the Python types of the numbers); shape None when ragged,
    empty or not numbers."""
    if isinstance(data, SymbolicVariable):
        return (), {data.python_type()}
    if isinstance(data, ConstantVariable):
        return ((), {type(data.value)}) if type(data.value) in _NUMBER_TYPES else (None, set())
    if not isinstance(data, (ListVariable, TupleVariable)) or not data.items:
        return None, set()
    parts = [_layout(item) for item in data.items]
    shapes = {shape for shape, _ in parts}
    if len(shapes) != 1 or None in shapes:
        return None, set()
    kinds = set().union(*(found for _, found in parts))
    return (len(parts), *shapes.pop()), kinds


def _inferred_dtype(kinds: set) -> torch.dtype:
    """The dtype `torch.tensor` infers from Python numbers of these types."""
    if float in kinds:
        return torch.get_default_dtype()  # covered by the global-state guard
    if int in kinds:
        return torch.int64
    return torch.bool


def _build(tx, data: Variable, options: dict) -> Variable:
    if isinstance(data, (ListVariable, TupleVariable)):
        items = [_build(tx, item, options) for item in data.items]
        return tx.graph.call("call_function", torch.stack, (items,), {})
    return tx.graph.call("call_function", torch.scalar_tensor, (data,), dict(options))
