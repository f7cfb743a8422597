"""Stage "lower" (first step): a sum of a dense tensor and a scatter-add into zeros becomes a
scatter-add into that tensor.

Input: a decomposed, functional ATen-level FX graph (`decompose.py`). Output: the same graph,
edited in place, where `add(a, index_put(zeros, indices, values, accumulate=True))` (either
operand order) is `index_put(a, indices, values, accumulate=True)`.

Why: a tied embedding's gradient. The embedding's backward scatters its gradient into a
vocabulary x width buffer of zeros, which autograd then adds to the output layer's dense
gradient (a matrix product). GPT-2 small's buffer is 50257 x 768 floats: a fresh allocation
(page faults on every step), a fill, and a full-size read of both operands and write of the
sum, for a scatter that touches a few hundred rows. Scattering into the product's buffer
instead reads and writes only those rows (`schedule/in_place.py` gives the scatter the
product's memory when it dies there).

Same values up to the order of a floating-point sum: eager adds the summed duplicate rows to
the dense gradient, this adds each row in turn (tests compare within tolerances).

Left alone: sums with broadcasting, type promotion or `alpha`, zeros of another shape or
dtype, scatters or zeros with other users, and scatters that replace (`accumulate=False`).
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.fx

from inductor.ir.symbols import to_expr

aten = torch.ops.aten

SCATTER_ADDS = (aten.index_put.default, aten._unsafe_index_put.default)
ZERO_FILLS = (aten.full.default, aten.zeros.default)


def accumulate_into_sums(gm: torch.fx.GraphModule) -> int:
    """Rewrite every `add(a, index_put(zeros, ..., accumulate=True))` of `gm` (see the module
    docstring); returns how many were rewritten (the graph is recompiled when any was)."""
    rewritten = 0
    for node in list(gm.graph.nodes):
        match = _match(node)
        if match is None:
            continue
        dense, scatter, zeros = match
        with gm.graph.inserting_before(node):
            replacement = gm.graph.call_function(
                scatter.target, (dense, scatter.args[1], scatter.args[2], True))
        replacement.meta.update(node.meta)
        node.replace_all_uses_with(replacement)
        for dead in (node, scatter, zeros):
            gm.graph.erase_node(dead)
        rewritten += 1
    if rewritten:
        gm.recompile()
    return rewritten


def _match(node: torch.fx.Node) -> Optional[tuple]:
    """(dense operand, scatter, zeros) where `node` is such a sum, else None."""
    if node.op != "call_function" or node.target is not aten.add.Tensor or \
            len(node.args) != 2 or node.kwargs.get("alpha", 1) != 1:
        return None
    for dense, scatter in (node.args, reversed(node.args)):
        zeros = _scatter_add_into_zeros(scatter)
        if zeros is not None and isinstance(dense, torch.fx.Node) and \
                _same_tensor_type(dense, node) and _same_tensor_type(scatter, node):
            return dense, scatter, zeros
    return None


def _scatter_add_into_zeros(node) -> Optional[torch.fx.Node]:
    """The zeros `node` accumulates into, where `node` is an accumulating scatter whose only
    user is the sum and whose zeros have no other user."""
    if not isinstance(node, torch.fx.Node) or node.op != "call_function" or \
            node.target not in SCATTER_ADDS or len(node.users) != 1 or node.kwargs:
        return None
    accumulate = node.args[3] if len(node.args) > 3 else False
    zeros = node.args[0]
    if accumulate is not True or not isinstance(zeros, torch.fx.Node) or \
            zeros.op != "call_function" or zeros.target not in ZERO_FILLS or \
            len(zeros.users) != 1:
        return None
    if zeros.target is aten.full.default and not _is_zero(zeros.args[1]):
        return None
    return zeros if _same_tensor_type(zeros, node) else None


def _is_zero(value) -> bool:
    return isinstance(value, (int, float, bool)) and not isinstance(value, torch.SymInt) and \
        value == 0


def _same_tensor_type(first: torch.fx.Node, second: torch.fx.Node) -> bool:
    """Whether both nodes' values are tensors of one dtype, device and size (sizes compared
    as expressions: no guard on symbolic sizes)."""
    one, other = first.meta.get("val"), second.meta.get("val")
    if not isinstance(one, torch.Tensor) or not isinstance(other, torch.Tensor):
        return False
    if one.dtype != other.dtype or one.device != other.device or one.dim() != other.dim():
        return False
    return all(to_expr(left) == to_expr(right) for left, right in zip(one.shape, other.shape))
