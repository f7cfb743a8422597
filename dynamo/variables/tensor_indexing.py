"""Indexing a tensor at positions computed from sizes (`cache[:, pos] = k`, `x[:, n - 1]`).

Input: a tensor variable and a basic index (slices, ints, `None`, `...`) holding symbolic ints
(`SymbolicVariable`s: `pos = prefix.size(0)`). Output: the graph nodes of the same view, or
None where this does not apply (the caller records `operator.getitem` as usual).

torch's tuple indexing reads each int of the index with `__index__`, which fixes a symbolic
int to its traced value (a guard `s0 == 5`: one entry per size, the decode loop of a static KV
cache recompiling every step). `Tensor.select` takes a SymInt and only guards the bound
(`s0 < 16`). So the index is applied in two steps: the index with every symbolic int replaced
by a full slice (which keeps that dimension), then `select` at each such dimension, last first;
the same view as eager's `x[index]`. An index out of range at the traced value takes the usual
path, which raises eager's error.
"""
from __future__ import annotations

import operator
from typing import Optional

import torch

from dynamo.variables.base import Variable
from dynamo.variables.constant import ConstantVariable
from dynamo.variables.containers import SliceVariable, TupleVariable
from dynamo.variables.symbolic import SymbolicVariable
from dynamo.variables.tensor import TensorVariable


def symbolic_view(tx, container: TensorVariable, index: Variable) -> Optional[Variable]:
    """`container[index]` through `select` for the symbolic ints of `index` (see above)."""
    items = list(index.items) if isinstance(index, TupleVariable) and \
        index.python_type() is tuple else [index]
    if not any(_symbolic_int(item) for item in items) or not all(map(_basic, items)):
        return None
    positions = _selected_dimensions(items, container.example.dim())
    if positions is None:
        return None
    sizes = container.example.shape
    for item, (input_dim, _) in zip([item for item in items if _symbolic_int(item)], positions):
        if not _in_range(item.example, sizes[input_dim]):
            return None
    full = ConstantVariable(slice(None))
    stripped = TupleVariable(tuple(full if _symbolic_int(item) else item for item in items))
    view = tx.graph.call("call_function", operator.getitem, (container, stripped), {})
    selected = [item for item in items if _symbolic_int(item)]
    for item, (_, output_dim) in reversed(list(zip(selected, positions))):
        view = tx.graph.call("call_method", "select", (view, ConstantVariable(output_dim), item),
                             {})
    return view


def _symbolic_int(item: Variable) -> bool:
    return isinstance(item, SymbolicVariable) and isinstance(item.example, torch.SymInt)


def _basic(item: Variable) -> bool:
    """An index item of basic indexing: a slice, an int, None or `...` (bools and tensors
    index otherwise)."""
    if _symbolic_int(item) or isinstance(item, SliceVariable):
        return True
    if not isinstance(item, ConstantVariable):
        return False
    value = item.value
    return value is None or value is Ellipsis or isinstance(value, slice) or \
        (isinstance(value, int) and not isinstance(value, bool))


def _selected_dimensions(items: list, rank: int) -> Optional[list]:
    """Per symbolic int of the index, (its dimension of the input, its dimension in the view
    indexed with that int replaced by a full slice); None for an index too long."""
    consuming = sum(1 for item in items if not _is_constant(item, None, Ellipsis))
    if consuming > rank or sum(1 for item in items if _is_constant(item, Ellipsis)) > 1:
        return None
    positions, input_dim, output_dim = [], 0, 0
    for item in items:
        if _is_constant(item, None):
            output_dim += 1
        elif _is_constant(item, Ellipsis):
            input_dim += rank - consuming
            output_dim += rank - consuming
        elif _symbolic_int(item):
            positions.append((input_dim, output_dim))
            input_dim, output_dim = input_dim + 1, output_dim + 1
        elif isinstance(item, ConstantVariable) and isinstance(item.value, int):
            input_dim += 1                     # a plain int removes its dimension
        else:
            input_dim, output_dim = input_dim + 1, output_dim + 1   # a slice keeps it
    return positions


def _is_constant(item: Variable, *values) -> bool:
    return isinstance(item, ConstantVariable) and any(item.value is value for value in values)


def _in_range(position: torch.SymInt, size) -> bool:
    """Whether the traced value of `position` indexes a dimension of `size` (read without a
    guard: the hints)."""
    value = position.node.hint
    extent = size.node.hint if isinstance(size, torch.SymInt) else size
    if value is None or extent is None:
        return False
    return -int(extent) <= int(value) < int(extent)
