"""Stage "decompose" (memory facts over symbolic sizes): whether a graph's writes overlap.

Input: example values (fake tensors) whose sizes, strides or offset are SymInts of one
ShapeEnv (a graph traced once for every size), and the FX nodes making them. Output: the
answers `aliasing.py` gives for static tensors (elements sharing a memory location, two views
partly overlapping), decided for every size the graph serves without adding a guard
(`statically_known_true`): an `int()` of a size would specialise the graph to one size. Where
an answer is not known for every size it is the cautious one ("may overlap"), and the graph
is compiled per size instead.
"""
from __future__ import annotations

import operator

import torch
import torch.fx
from torch.fx.experimental.symbolic_shapes import statically_known_true

aten = torch.ops.aten

# View ops whose elements are distinct elements of their argument's (a subset, indexed anew):
# such a view overlaps in memory only where its argument does.
ELEMENT_SUBSETS = frozenset((
    aten.slice.Tensor, aten.select.int, aten.narrow.default, aten.permute.default,
    aten.transpose.int, aten.t.default, aten.unsqueeze.default, aten.squeeze.default,
    aten.squeeze.dim, aten.squeeze.dims, aten.alias.default, aten.view.default,
    aten._unsafe_view.default, aten.diagonal.default, aten.split.Tensor,
    aten.split_with_sizes.default, aten.unbind.int, aten.detach.default))


def is_symbolic(value: torch.Tensor) -> bool:
    """Whether a tensor's sizes, strides or offset are SymInts."""
    return any(isinstance(number, torch.SymInt) for number in
               (*value.shape, *value.stride(), value.storage_offset()))


def known(condition) -> bool:
    """Whether a condition over sizes holds for every size the graph serves (False where
    not known; adds no guard)."""
    return bool(statically_known_true(condition))


def _hint(number) -> int:
    """A size's example value, for ordering only (adds no guard)."""
    if isinstance(number, torch.SymInt):
        node = number.node
        return int(node.hint if node.hint is not None else node.shape_env.size_hint(node.expr))
    return int(number)


def may_overlap_symbolic(value: torch.Tensor) -> bool:
    """Whether two elements may share a memory location (True where unsure): ordered by the
    strides' example values, each dimension must be known to step past everything the
    smaller ones span, for every size (any order where that holds proves them apart)."""
    dims = sorted(((stride, size) for size, stride in zip(value.shape, value.stride())
                   if not known(size <= 1)), key=lambda dim: _hint(dim[0]))
    span = 0
    for stride, size in dims:
        if not known(stride > span):
            return True
        span = span + (size - 1) * stride
    return False


def partly_overlap_symbolic(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two views of one memory may meet without being the same elements in the
    same layout: False only where they are known to be those, or known apart in memory."""
    if a.dtype != b.dtype:
        return True
    geometry_a = (*a.shape, *a.stride(), a.storage_offset())
    geometry_b = (*b.shape, *b.stride(), b.storage_offset())
    if a.dim() == b.dim() and all(known(x == y) for x, y in zip(geometry_a, geometry_b)):
        return False
    if any(not known(stride >= 0) for stride in (*a.stride(), *b.stride())):
        return True
    if apart_by_residue(a, b):
        return False

    def end(value):     # one past the last element's offset
        return value.storage_offset() + 1 + sum(
            (size - 1) * stride for size, stride in zip(value.shape, value.stride()))
    return not (known(end(a) <= b.storage_offset()) or known(end(b) <= a.storage_offset()))


def apart_by_residue(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether two views of one memory are known to share no element, for every size: every
    stride of both is a multiple of the smallest one, `m`, and their offsets differ by less
    than `m`, so each view's elements lie at its own offset modulo `m` (`x[:, 0] += x[:, 1]`
    of an (s0, s1) `x`; dynamo's front end proves the same before it lets the write in)."""
    strides = [stride for value in (a, b) for size, stride in zip(value.shape, value.stride())
               if not known(size <= 1) and not known(stride == 0)]
    gap = a.storage_offset() - b.storage_offset()
    if not strides:
        return known(gap != 0)
    modulus = min(strides, key=_hint)
    return all(known(stride % modulus == 0) for stride in strides) and (
        (known(gap > 0) and known(gap < modulus)) or (known(gap < 0) and known(-gap < modulus)))


def overlaps_as_argument(node: torch.fx.Node, source, writes: bool) -> bool:
    """Whether `node`'s value overlaps in memory exactly where `source`, the argument it
    aliases (`aliasing.aliased_argument`), does: a view picking distinct elements of it, or
    an in-place op (`writes`) leaving its geometry as it was (`add_`; not `as_strided_`)."""
    if source is None:
        return False
    if node.target is operator.getitem:
        node = node.args[0]
    if node.target in ELEMENT_SUBSETS:
        return True
    value, before = node.meta.get("val"), source.meta.get("val")
    if not writes or not isinstance(value, torch.Tensor) or \
            not isinstance(before, torch.Tensor) or value.dim() != before.dim():
        return False
    return all(known(x == y) for x, y in zip(
        (*value.shape, *value.stride(), value.storage_offset()),
        (*before.shape, *before.stride(), before.storage_offset())))
