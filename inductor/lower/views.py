"""Lowerings of view ops: each is an index remap (`View`), so views cost nothing until read.

Input: view, reshape, permute, expand, squeeze/unsqueeze, slice, select, transpose,
diagonal, as_strided, split and unbind (and their functional `_copy` forms). Output:
`TensorBox`es whose loaders translate an index of the view into an index of the viewed
value; `as_strided` reads the realized storage through a new layout.
"""
from __future__ import annotations

from typing import Sequence

import sympy
import torch

from inductor.aliasing import memory_root
from inductor.ir.layout import Layout
from inductor.ir.nodes import (Pointwise, ReinterpretView, StorageBox, TensorBox, View,
                               current_graph)
from inductor.ir.symbols import (FloorDiv, ModularIndexing, product, size_hint,
                                 to_expr)
from inductor.lower.registry import register_lowering
from inductor.size_variants import NotSymbolic

aten = torch.ops.aten


def _wrap_dim(dim: int, rank: int) -> int:
    return dim + rank if dim < 0 else dim


def make_view(x: TensorBox, size: Sequence, reindex) -> TensorBox:
    """A view of `x` with `size`; element `index` reads `x[reindex(index)]`."""
    return TensorBox(View(x.data, size, reindex))


@register_lowering(aten.permute, aten.permute_copy)
def permute(x, dims):
    rank = len(x.get_size())
    dims = [_wrap_dim(dim, rank) for dim in dims]
    if dims == list(range(rank)):
        return x
    size = [x.get_size()[dim] for dim in dims]

    def reindex(index):
        source = [None] * rank
        for position, dim in enumerate(dims):
            source[dim] = index[position]
        return source
    return make_view(x, size, reindex)


@register_lowering(aten.transpose, aten.transpose_copy)
def transpose(x, first, second):
    rank = len(x.get_size())
    dims = list(range(rank))
    if rank == 0:
        return x
    first, second = _wrap_dim(first, rank), _wrap_dim(second, rank)
    dims[first], dims[second] = dims[second], dims[first]
    return permute(x, dims)


@register_lowering(aten.t, aten.t_copy)
def t(x):
    return transpose(x, 0, 1) if len(x.get_size()) == 2 else x


@register_lowering(aten.expand, aten.expand_copy)
def expand(x, size, *, implicit=False):
    old = x.get_size()
    new = [to_expr(extent) for extent in size]
    offset = len(new) - len(old)
    new = [old[position - offset] if extent == -1 else extent
           for position, extent in enumerate(new)]
    if offset == 0 and new == old:
        return x

    def reindex(index):
        return [sympy.Integer(0) if old[position] == 1 and new[position + offset] != 1
                else index[position + offset] for position in range(len(old))]
    return make_view(x, new, reindex)


@register_lowering(torch.ops.prims.broadcast_in_dim)
def broadcast_in_dim(x, shape, broadcast_dimensions):
    """`x`'s dimension `p` becomes dimension `broadcast_dimensions[p]` of `shape` (expanded
    where `x` has extent 1); the other dimensions of `shape` are new, broadcast ones."""
    old = x.get_size()
    new = [to_expr(extent) for extent in shape]
    dims = [_wrap_dim(int(dim), len(new)) for dim in broadcast_dimensions]

    def reindex(index):
        return [sympy.Integer(0) if old[position] == 1 and new[dim] != 1 else index[dim]
                for position, dim in enumerate(dims)]
    return make_view(x, new, reindex)


@register_lowering(aten.unsqueeze, aten.unsqueeze_copy)
def unsqueeze(x, dim):
    rank = len(x.get_size())
    dim = _wrap_dim(dim, rank + 1)
    size = list(x.get_size())
    size.insert(dim, sympy.Integer(1))
    return make_view(x, size, lambda index: index[:dim] + index[dim + 1:])


@register_lowering(aten.squeeze, aten.squeeze_copy)
def squeeze(x, dim=None):
    size = x.get_size()
    rank = len(size)
    if dim is None:
        dims = [position for position, extent in enumerate(size) if extent == 1]
    else:
        dims = [_wrap_dim(value, rank) for value in (dim if isinstance(dim, (list, tuple))
                                                     else [dim])]
        dims = [value for value in dims if rank and size[value] == 1]
    if not dims:
        return x
    kept = [position for position in range(rank) if position not in dims]

    def reindex(index):
        source = [sympy.Integer(0)] * rank
        for position, dim_kept in enumerate(kept):
            source[dim_kept] = index[position]
        return source
    return make_view(x, [size[position] for position in kept], reindex)


def _clamp_slice(start, end, extent: int):
    start = 0 if start is None else start
    end = extent if end is None else end
    start = start + extent if start < 0 else start
    end = end + extent if end < 0 else end
    return max(0, min(start, extent)), max(0, min(end, extent))


def _decided(relation, guessed: list) -> bool:
    """The truth of a comparison of sizes: sympy's where it holds for every size, else the
    example sizes' (`size_hint`), noted in `guessed`."""
    relation = sympy.sympify(relation)
    if relation in (sympy.true, sympy.false):
        return bool(relation)
    guessed.append(relation)
    return bool(relation.func(size_hint(relation.lhs), size_hint(relation.rhs)))


def symbolic_slice_bounds(extent, start, end, step, recorded=None) -> tuple:
    """(start, length) of `slice(start, end, step)` over a symbolic extent (or with symbolic
    bounds), clamped as torch's slice meta kernel clamps: each comparison it makes
    (`start < 0`, `end > extent`, ...) decided as it decided it while tracing this op, by
    the example sizes where sympy cannot tell (the front end guards such a comparison, or
    knew it for every size). `recorded`: the length the meta kernel gave (the traced
    result's extent along the dim, or a `slice_scatter` source's), which must be ours;
    without it a bound decided by the example sizes raises `NotSymbolic`."""
    if not isinstance(step, int) or step < 1:
        raise NotSymbolic("a slice with a symbolic step")
    extent = to_expr(extent)
    start = sympy.Integer(0) if start is None else to_expr(start)
    unbounded = end is None or (to_expr(end).is_Integer and int(end) >= 2 ** 62)
    end = extent if unbounded else to_expr(end)
    guessed: list = []
    if _decided(start < 0, guessed):
        start = start + extent
    if not unbounded and _decided(end < 0, guessed):
        end = end + extent
    if _decided(start < 0, guessed):
        start = sympy.Integer(0)
    elif _decided(start > extent, guessed):
        start = extent
    if not unbounded and _decided(end < start, guessed):
        end = start
    elif not unbounded and _decided(end > extent, guessed):
        end = extent
    length = FloorDiv(end - start + step - 1, step) if step > 1 else end - start
    if recorded is not None and sympy.expand(length - to_expr(recorded)) != 0:
        raise NotSymbolic(f"a slice traced with length {recorded}, {length} by its bounds")
    if recorded is None and guessed:
        raise NotSymbolic(f"a slice whose bounds are clamped by a comparison of sizes "
                          f"({guessed[0]}) outside the op that made it")
    return start, length


_SLICES = (aten.slice.Tensor, aten.slice_copy.Tensor)
_SPLITS = (aten.split.Tensor, aten.split_copy.Tensor)
_DIAGONALS = (aten.diagonal.default, aten.diagonal_copy.default)


def _recorded(targets: tuple):
    """The example value torch's meta kernel gave the node being lowered, where it is one
    of `targets` (a lowering may be called by another's), else None. Its sizes hold for
    every size the graph serves: the front end guards what the meta kernel decided."""
    node = getattr(current_graph(), "current", None)
    if node is None or node.op != "call_function" or node.target not in targets:
        return None
    return node.meta.get("val")


def _recorded_extent(targets: tuple, dim: int):
    """The extent along `dim` of the recorded tensor (`_recorded`), or None."""
    example = _recorded(targets)
    if not isinstance(example, torch.Tensor) or example.dim() <= dim:
        return None
    return example.shape[dim]


def narrow(x, dim: int, start, length) -> TensorBox:
    """`x[..., start:start + length, ...]` along `dim`, the bounds known in range (the
    pieces of a split)."""
    size = list(x.get_size())
    start, length = to_expr(start), to_expr(length)
    if start == 0 and sympy.expand(length - to_expr(size[dim])) == 0:
        return x
    size[dim] = length

    def reindex(index):
        source = list(index)
        source[dim] = start + index[dim]
        return source
    return make_view(x, size, reindex)


@register_lowering(aten.slice, aten.slice_copy)
def slice_(x, dim=0, start=None, end=None, step=1):
    size = list(x.get_size())
    dim = _wrap_dim(dim, len(size))
    bounds = (size[dim], 0 if start is None else start, 0 if end is None else end)
    if not all(to_expr(value).is_Integer for value in bounds):
        start, length = symbolic_slice_bounds(size[dim], start, end, step,
                                              _recorded_extent(_SLICES, dim))
        if step == 1:
            return narrow(x, dim, start, length)
        size[dim] = length

        def symbolic_reindex(index):
            source = list(index)
            source[dim] = start + index[dim] * step
            return source
        return make_view(x, size, symbolic_reindex)
    extent = int(size[dim])
    start, end = _clamp_slice(start, end, extent)
    length = max(0, (end - start + step - 1) // step)
    if start == 0 and length == extent and step == 1:
        return x
    size[dim] = sympy.Integer(length)

    def reindex(index):
        source = list(index)
        source[dim] = start + index[dim] * step
        return source
    return make_view(x, size, reindex)


@register_lowering(aten.select, aten.select_copy)
def select(x, dim, index):
    size = list(x.get_size())
    dim = _wrap_dim(dim, len(size))
    position = to_expr(index)
    if _decided(position < 0, []):   # torch's meta kernel wrapped it so (guarded)
        position = position + to_expr(size[dim])
    del size[dim]
    return make_view(x, size, lambda idx: idx[:dim] + [position] + idx[dim:])


@register_lowering(aten.split_with_sizes, aten.split_with_sizes_copy)
def split_with_sizes(x, sizes, dim=0):
    dim = _wrap_dim(dim, len(x.get_size()))
    if not all(to_expr(value).is_Integer for value in (*sizes, x.get_size()[dim])):
        # torch's meta kernel checked that the sizes add up to the extent (guarded)
        results, start = [], sympy.Integer(0)
        for length in sizes:
            results.append(narrow(x, dim, start, length))
            start = start + to_expr(length)
        return results
    results, start = [], 0
    for length in sizes:
        results.append(slice_(x, dim, start, start + length))
        start += length
    return results


@register_lowering(aten.split, aten.split_copy)
def split(x, split_size, dim=0):
    dim = _wrap_dim(dim, len(x.get_size()))
    if isinstance(split_size, (list, tuple)):
        return split_with_sizes(x, split_size, dim)
    extent = to_expr(x.get_size()[dim])
    if not (extent.is_Integer and to_expr(split_size).is_Integer):
        # as many pieces as the meta kernel made (their count is fixed in the graph), each
        # as long as it made it
        pieces = _recorded(_SPLITS)
        if not isinstance(pieces, (list, tuple)):
            raise NotSymbolic("a split over symbolic sizes outside the op that made it")
        return split_with_sizes(x, [piece.shape[dim] for piece in pieces], dim)
    extent, split_size = int(extent), int(split_size)
    sizes = [min(split_size, extent - start) for start in range(0, extent, split_size)]
    return split_with_sizes(x, sizes or [0], dim)


@register_lowering(aten.unbind, aten.unbind_copy)
def unbind(x, dim=0):
    dim = _wrap_dim(dim, len(x.get_size()))
    extent = to_expr(x.get_size()[dim])
    if not extent.is_Integer:
        raise NotSymbolic("unbind along a symbolic dim (its count of results is one size)")
    return [select(x, dim, position) for position in range(int(extent))]


def _infer_size(size: Sequence, numel) -> list:
    size = [to_expr(extent) for extent in size]
    if any(extent == -1 for extent in size):
        known = product(extent for extent in size if extent != -1)
        size = [FloorDiv(numel, known) if extent == -1 else extent for extent in size]
    return size


def _reshape_blocks(old: list, new: list) -> list:
    """Pair runs of `old` and `new` dimensions with equal products (size-1 dims alone)."""
    blocks, old_position, new_position = [], 0, 0
    while old_position < len(old) or new_position < len(new):
        if old_position < len(old) and old[old_position] == 1:
            blocks.append(([old_position], []))
            old_position += 1
            continue
        if new_position < len(new) and new[new_position] == 1:
            blocks.append(([], [new_position]))
            new_position += 1
            continue
        if not all(extent.is_Integer for extent in old[old_position:] + new[new_position:]):
            old_block, new_block = _symbolic_blocks(old, new, old_position, new_position)
            blocks.append((old_block, new_block))
            old_position += len(old_block)
            new_position += len(new_block)
            continue
        old_block, new_block = [old_position], [new_position]
        old_product, new_product = int(old[old_position]), int(new[new_position])
        old_position, new_position = old_position + 1, new_position + 1
        while old_product != new_product:
            if old_product < new_product:
                old_block.append(old_position)
                old_product *= int(old[old_position])
                old_position += 1
            else:
                new_block.append(new_position)
                new_product *= int(new[new_position])
                new_position += 1
        blocks.append((old_block, new_block))
    return blocks


def _symbolic_blocks(old: list, new: list, old_position: int, new_position: int) -> tuple:
    """The shortest leading runs of the remaining `old` and `new` dimensions whose products
    are the same expression (equal for every size: `(s0, s1, 997) -> (s0*s1, 997)` pairs
    `s0, s1` with `s0*s1`, so the merge is read as the view it is, with no division by
    997*s1), else the remaining dimensions as one block (its row-major linear index is right
    for every size)."""
    for length in range(2, len(old) - old_position + len(new) - new_position + 1):
        for old_length in range(1, length):
            old_end, new_end = old_position + old_length, new_position + length - old_length
            if old_end > len(old) or new_end > len(new):
                continue
            if sympy.expand(product(old[old_position:old_end])
                            - product(new[new_position:new_end])) == 0:
                return (list(range(old_position, old_end)), list(range(new_position, new_end)))
    return (list(range(old_position, len(old))), list(range(new_position, len(new))))


def reshape_indexer(old: Sequence, new: Sequence):
    """Map an index of `new` to an index of `old` (same element count, row-major order),
    matching blocks of dimensions with equal products so that division and modulo appear
    only where dimensions are really split or merged."""
    old, new = [to_expr(value) for value in old], [to_expr(value) for value in new]
    if any(extent == 0 for extent in old):
        return lambda index: [sympy.Integer(0)] * len(old)
    blocks = _reshape_blocks(old, new)

    def reindex(index):
        source = [sympy.Integer(0)] * len(old)
        for old_block, new_block in blocks:
            linear, stride = sympy.Integer(0), sympy.Integer(1)
            for position in reversed(new_block):
                linear = linear + index[position] * stride
                stride = stride * new[position]
            stride = sympy.Integer(1)
            for position in reversed(old_block):
                source[position] = FloorDiv(linear, stride) if position == old_block[0] \
                    else ModularIndexing(linear, stride, old[position])
                stride = stride * old[position]
        return source
    return reindex


@register_lowering(aten.view, aten.reshape, aten._unsafe_view, aten.view_copy,
                   aten._reshape_alias, aten.alias_copy)
def view(x, size=None, *_ignored):
    if size is None:
        return x
    if isinstance(size, torch.dtype):   # view.dtype: the same bits read as another type
        if size == x.get_dtype():
            return x
        raise NotImplementedError("view(dtype) runs through the eager kernel")
    old = x.get_size()
    new = _infer_size(size, product(old))
    if len(old) == len(new) and all(a == b for a, b in zip(old, new)):
        return x
    return make_view(x, new, reshape_indexer(old, new))


def diagonal_geometry(size: Sequence, offset: int, dim1: int, dim2: int):
    """(result size, kept dims, first row, first column) of `diagonal(offset, dim1, dim2)`:
    the kept dims in order, then the diagonal, whose element k sits at
    (row + k, column + k) of dims (dim1, dim2)."""
    rank = len(size)
    dim1, dim2 = _wrap_dim(dim1, rank), _wrap_dim(dim2, rank)
    row, column = max(-offset, 0), max(offset, 0)
    length = _diagonal_length(to_expr(size[dim1]) - row, to_expr(size[dim2]) - column)
    kept = [dim for dim in range(rank) if dim not in (dim1, dim2)]
    return [size[dim] for dim in kept] + [length], kept, (dim1, dim2), (row, column)


def _diagonal_length(rows, columns):
    """max(0, min(rows, columns)): an int, or a size expression where sympy can tell which
    is smaller for every size (a square matrix's `s0`, `s0 - 1` off the diagonal), else the
    length torch's meta kernel gave the diagonal being lowered (`Min(s0, s1)` of distinct
    symbolic sizes raises `NotSymbolic`)."""
    if rows.is_Integer and columns.is_Integer:
        return sympy.Integer(max(0, min(int(rows), int(columns))))
    length = sympy.Max(0, sympy.Min(rows, columns))
    recorded = _recorded(_DIAGONALS)
    if length.has(sympy.Min, sympy.Max) and isinstance(recorded, torch.Tensor):
        try:
            length = to_expr(recorded.shape[-1])
        except NotImplementedError:
            pass
    if length.has(sympy.Min, sympy.Max):
        raise NotSymbolic(f"a diagonal of length {length} (the smaller of symbolic sizes)")
    return length


@register_lowering(aten.diagonal, aten.diagonal_copy)
def diagonal(x, offset=0, dim1=0, dim2=1):
    """A view: element (..., k) reads (..., row + k, ..., column + k, ...)."""
    size, kept, (dim1, dim2), (row, column) = diagonal_geometry(x.get_size(), offset, dim1,
                                                                dim2)

    def reindex(index):
        source = [None] * (len(kept) + 2)
        for dim, value in zip(kept, index[:-1]):
            source[dim] = value
        source[dim1], source[dim2] = row + index[-1], column + index[-1]
        return source
    return make_view(x, size, reindex)


@register_lowering(aten.flip)
def flip(x, dims):
    """Not a view in ATen (it copies), but an index remap all the same."""
    size = x.get_size()
    dims = {_wrap_dim(dim, len(size)) for dim in dims}

    def reindex(index):
        return [size[dim] - 1 - index[dim] if dim in dims else index[dim]
                for dim in range(len(size))]
    return make_view(x, size, reindex)


@register_lowering(aten.as_strided, aten.as_strided_copy)
def as_strided(x, size, stride, storage_offset=None):
    """A new layout over the memory `x` views in eager: that of the node owning it (back
    through view ops). An input's own buffer, or the owner's value in a buffer with eager's
    strides; not the storage under our index remaps (`flip`, `permute_copy` are copies in
    eager: `flip(a).unfold(1, 2, 1)` read `a` itself). The offset counts from the start of
    the owner's storage."""
    graph = current_graph()
    node = graph.current.args[0] if graph.current is not None else None
    example = node.meta.get("val") if isinstance(node, torch.fx.Node) else None
    owner = memory_root(node)[0] if example is not None else None
    owned = owner.meta.get("val") if owner is not None else None
    if not isinstance(owned, torch.Tensor) or owner not in graph.env:
        buffer = x.storage().realize() if x.storage() is not None else x.realize()
        buffer.layout.freeze()
        offset = buffer.layout.offset if storage_offset is None else storage_offset
    else:
        buffer = _owned_buffer(graph.env[owner], owner.op in ("placeholder", "get_attr"),
                               list(owned.stride()))
        absolute = example.storage_offset() if storage_offset is None else storage_offset
        offset = buffer.layout.offset + absolute - owned.storage_offset()
    layout = Layout(buffer.get_device(), buffer.get_dtype(), size, stride, offset)
    return TensorBox(ReinterpretView(buffer, layout))


def _owned_buffer(value: TensorBox, is_input: bool, stride: list):
    """The buffer holding `value` laid out as eager lays it out (`stride`)."""
    storage = value.data if isinstance(value.data, StorageBox) else None
    if is_input or (storage is not None and storage.is_realized()):
        buffer = value.storage().realize()
        buffer.layout.decide(stride)
        buffer.layout.freeze()
        if is_input or _same_strides(buffer.layout, stride):
            return buffer
    elif storage is not None:
        storage.preferred_stride = stride
        buffer = storage.realize()
        buffer.layout.decide(stride)
        buffer.layout.freeze()
        return buffer
    copy = TensorBox.create(Pointwise(value.get_device(), value.get_dtype(),
                                      value.make_loader(), value.get_size()),
                            preferred_stride=stride)
    buffer = copy.realize()
    buffer.layout.decide(stride)
    buffer.layout.freeze()
    return buffer


def _same_strides(layout: Layout, stride: list) -> bool:
    return layout.offset == 0 and all(
        extent == 1 or int(actual) == int(wanted)
        for extent, actual, wanted in zip(layout.size, layout.stride, stride))
