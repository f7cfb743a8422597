"""What the partitioner may recompute, and what saving a value costs.

Input: nodes of a joint ATen graph (with fake-tensor `meta["val"]`). Output: per node, whether
the backward may recompute it and how many bytes saving it for the backward keeps alive.

Recomputable: pointwise ops (the `pointwise` tag), views, cheap data movement and factories,
reductions whose output is not much smaller than their input, and sizes (`SymInt` values of
graphs with symbolic sizes: read off a tensor, or arithmetic on sizes); saving a size costs a
word. Never recomputed: random ops (the `nondeterministic_seeded` tag: recomputing would draw a
different mask), matmuls, convolutions, attention, and every operator this module does not know
(safe by default). Costs use the traced example's sizes (`symbols.hint`), adding no guard.
"""
from __future__ import annotations

import dataclasses
import operator

import torch
import torch.fx

from inductor.autograd.symbols import hint

aten = torch.ops.aten
prims = torch.ops.prims

# Cheap ops that are neither tagged pointwise nor views.
_CHEAP = {
    aten._to_copy.default, aten.clone.default, aten.full.default, aten.full_like.default,
    aten.zeros.default, aten.zeros_like.default, aten.ones.default, aten.ones_like.default,
    aten.empty.memory_format, aten.empty_like.default, aten.empty_permuted.default,
    aten.empty_strided.default, aten.scalar_tensor.default, aten.arange.default,
    aten.arange.start, aten.arange.start_step, aten.lift_fresh_copy.default,
    aten._unsafe_view.default, aten.cat.default, aten.copy.default, aten.fill.Scalar,
    aten.where.self, aten.masked_fill.Scalar, aten.masked_fill.Tensor, aten.constant_pad_nd.default,
    aten.slice_scatter.default, aten.select_scatter.default, aten.index_select.default,
    aten.gather.default, aten.embedding.default,
    prims.convert_element_type.default, prims.broadcast_in_dim.default, prims.iota.default,
}


@dataclasses.dataclass
class PartitionPolicy:
    """Knobs of the partitioner. `reduction_ratio`: a reduction is recomputed only if its input
    is at most this many times bigger than its output. `recompute`: False saves every value
    the backward needs (no recomputation; for comparisons)."""

    reduction_ratio: float = 4.0
    recompute: bool = True


policy = PartitionPolicy()


def value_of(node: torch.fx.Node):
    """The fake value recorded for `node` while tracing (None when absent)."""
    return node.meta.get("val")


def is_tensor_node(node: torch.fx.Node) -> bool:
    """Whether `node` produces one tensor (tuples and scalars cannot be saved as such)."""
    return isinstance(value_of(node), torch.Tensor)


def is_random(node: torch.fx.Node) -> bool:
    """Random ops draw from the generator: computing them twice gives different values."""
    target = node.target
    return (node.op == "call_function" and isinstance(target, torch._ops.OpOverload)
            and torch.Tag.nondeterministic_seeded in target.tags)


def is_symbol_node(node: torch.fx.Node) -> bool:
    """Whether `node` produces a size (a SymInt: `sym_size`, arithmetic on sizes)."""
    return isinstance(value_of(node), torch.SymInt)


def _size_in_bytes(value) -> int:
    if not isinstance(value, torch.Tensor):
        return 0
    return hint(value.numel()) * value.element_size()


def storage_bytes(value: torch.Tensor) -> int:
    """The bytes of `value`'s storage (for symbolic sizes, at the traced example's sizes:
    a cost, never a guard)."""
    return hint(value.untyped_storage().nbytes())


def may_recompute(node: torch.fx.Node, settings: PartitionPolicy = policy) -> bool:
    """Whether the backward may compute `node` again instead of loading a saved copy."""
    if not settings.recompute or node.op != "call_function":
        return False
    target = node.target
    if is_symbol_node(node):   # a size: read off a tensor or computed from sizes
        return all(is_symbol_node(argument) or is_tensor_node(argument)
                   for argument in node.all_input_nodes)
    if target is operator.getitem:
        return may_recompute(node.args[0], settings) if isinstance(node.args[0],
                                                                   torch.fx.Node) else True
    if not isinstance(target, torch._ops.OpOverload) or is_random(node):
        return False
    tags = target.tags
    if torch.Tag.pointwise in tags or target.is_view or target in _CHEAP:
        return True
    if torch.Tag.reduction in tags:
        inputs = sum(_size_in_bytes(value_of(argument)) for argument in node.args
                     if isinstance(argument, torch.fx.Node))
        outputs = value_of(node)
        output_bytes = sum(_size_in_bytes(v) for v in outputs) if isinstance(
            outputs, (tuple, list)) else _size_in_bytes(outputs)
        return inputs <= settings.reduction_ratio * max(output_bytes, 1)
    return False


def storage_key(value: torch.Tensor) -> int:
    """Identity of the storage behind a (fake) tensor: views share their base's."""
    return value.untyped_storage()._cdata


def save_cost(node: torch.fx.Node, primal_storages: set[int], mutated_storages: set[int],
              unwatched_storages: frozenset = frozenset()) -> int:
    """Bytes that saving `node` for the backward keeps alive, plus small tie-breakers: a
    primal costs 1 (it is alive anyway), a view of a primal 2, a fresh value its storage's
    size + 2 and a view of a fresh value + 3, so equal byte counts prefer bases and inputs.
    Inputs the graph mutates are practically never saved: the update made after the forward
    would invalidate the saved copy (`MUTATED_COST`). Nor are inputs eager's autograd does not
    save (`unwatched_storages`; a ReLU saves its result, not its input): the caller may change
    them in place before `backward()`, which eager allows (`UNWATCHED_COST`)."""
    value = value_of(node)
    storage = storage_key(value)
    if storage in mutated_storages:
        return MUTATED_COST
    if storage in unwatched_storages:
        return UNWATCHED_COST
    target = node.target
    is_view = isinstance(target, torch._ops.OpOverload) and target.is_view
    if storage in primal_storages:
        return 2 if is_view or node.op != "placeholder" else 1
    return storage_bytes(value) + (3 if is_view else 2)


def symbol_cost() -> int:
    """Saving a size (a Python int at run time) costs a word: less than any tensor, so the
    backward takes sizes, not the tensors they were read from, where those are not saved."""
    return 8


INFINITE = 1 << 62
MUTATED_COST = 1 << 50
UNWATCHED_COST = 1 << 40
