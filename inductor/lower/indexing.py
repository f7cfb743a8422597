"""Lowerings that move data by index: `cat`, `constant_pad_nd`, `arange`, and the indirect
reads `index` (advanced indexing, `embedding` after decomposition), `gather`.

Input: ATen ops with lowered operands (and `slice_scatter` and `diagonal_scatter`, the
inverses of views that functionalization writes through). Output: `Pointwise` bodies.
Positions outside an operand become masked loads (`ops.masked`); indices read from memory
become index symbols (`ops.indirect_indexing`, negative values wrapped, out-of-range values
reported as errors).
"""
from __future__ import annotations

import math

import sympy
import torch

from inductor.ir.nodes import Pointwise, TensorBox
from inductor.ir.ops import ops
from inductor.ir.symbols import FloorDiv, size_hint, to_expr
from inductor.lower.elementwise import (body_cost, broadcast_loader, broadcast_shapes,
                                        opmath_dtype, realize_if_broadcast, result_type)
from inductor.lower.registry import register_lowering
from inductor.lower.views import symbolic_slice_bounds
from inductor.size_variants import NotSymbolic

aten = torch.ops.aten

# A computed source that a gather reads at least this many times its own size is realized
# first on CPUs when its body loads more than one value: inlined, every gathered read repeats
# each of those loads at a scattered address. LRASPP's final upsample (1x21x28x28 ->
# 224x224) gathered the sum of two convolutions: 8 scattered loads per output element
# where 4 suffice (docs/performance-notes.md, LRASPP).
GATHERED_SOURCE_RATIO = 8


def _wrap(dim: int, rank: int) -> int:
    return dim + rank if dim < 0 else dim


def _converted(loader, source: torch.dtype, target: torch.dtype):
    if opmath_dtype(source) == opmath_dtype(target) and source == target:
        return loader
    return lambda index: ops.to_dtype(loader(index), target)


# Inline, every element of a `cat` tests its position against each input's range, and its
# readers recompute that chain: with DenseNet's 25-input concatenations the compiled model ran
# 1.3x slower than eager. Beyond this many inputs the copy is eager's `cat` (a library call).
CAT_INLINE_INPUTS = 4


@register_lowering(aten.cat, aten.concat)
def cat(tensors, dim=0):
    dtype = result_type(*tensors)
    kept = [tensor for tensor in tensors if not (len(tensor.get_size()) == 1 and
                                                 tensor.get_size()[0] == 0)]
    if not kept:   # only legacy empty 1-D pieces: an empty result of the promoted dtype
        return TensorBox.create(Pointwise(tensors[0].get_device(), dtype,
                                          lambda index: ops.constant(0, dtype), [0]))
    tensors = kept
    if len(tensors) == 1:   # the skipped pieces still take part in the type promotion
        from inductor.lower.math import to_copy
        return to_copy(tensors[0], dtype)
    if len(tensors) > CAT_INLINE_INPUTS:
        raise NotImplementedError("many inputs: eager's cat")
    rank = len(tensors[0].get_size())
    dim = _wrap(dim, rank)
    size = list(tensors[0].get_size())
    starts, position = [], sympy.Integer(0)
    for tensor in tensors:
        starts.append(position)
        position = position + tensor.get_size()[dim]
    size[dim] = position
    loaders = [_converted(tensor.make_loader(), tensor.get_dtype(), dtype) for tensor in tensors]
    ends = starts[1:] + [position]

    def inner_fn(index):
        where_along = index[dim]
        result = None
        for loader, start, end in reversed(list(zip(loaders, starts, ends))):
            shifted = list(index)
            shifted[dim] = where_along - start
            inside = _in_range(where_along, start, end)
            value = ops.masked(inside, lambda loader=loader, shifted=shifted: loader(shifted),
                               0)
            result = value if result is None else ops.where(inside, value, result)
        return result
    return TensorBox.create(Pointwise(tensors[0].get_device(), dtype, inner_fn, size))


def _in_range(position, start, end):
    """A bool value: start <= position < end (checks that are always true are skipped);
    the bounds may be size expressions (`cat` along a symbolic axis)."""
    index = ops.index_expr(position, torch.int64)
    checks = []
    if start != 0:
        checks.append(ops.ge(index, _int_value(start)))
    checks.append(ops.lt(index, _int_value(end)))
    result = checks[0]
    for check in checks[1:]:
        result = ops.logical_and(result, check)
    return result


def _int_value(value):
    """An int64 value of a bound: a constant, or a size expression read at run time."""
    if isinstance(value, sympy.Expr) and not value.is_number:
        return ops.index_expr(value, torch.int64)
    return ops.constant(int(value), torch.int64)


@register_lowering(aten.constant_pad_nd)
def constant_pad_nd(x, pad, value=0):
    size = list(x.get_size())
    rank = len(size)
    pairs = [(pad[2 * k], pad[2 * k + 1]) for k in range(len(pad) // 2)]
    new_size = list(size)
    shifts = {}
    padded = set()      # dims with positions outside `x` (amounts may be size expressions)
    for k, (before, after) in enumerate(pairs):
        dim = rank - 1 - k
        new_size[dim] = size[dim] + before + after
        shifts[dim] = before
        if _may_be_positive(before) or _may_be_positive(after):
            padded.add(dim)
    loader = x.make_loader()
    dtype = x.get_dtype()

    def inner_fn(index):
        source = list(index)
        mask = None
        for dim, before in shifts.items():
            source[dim] = index[dim] - before
            check = _in_range(index[dim], before, before + size[dim]) if dim in padded else None
            if check is not None:
                mask = check if mask is None else ops.logical_and(mask, check)
        if mask is None:
            return loader(source)
        loaded = ops.masked(mask, lambda: loader(source), value)
        return ops.where(mask, loaded, ops.constant(value, dtype))
    return TensorBox.create(Pointwise(x.get_device(), dtype, inner_fn, new_size))


def _may_be_positive(amount) -> bool:
    """Whether a pad amount may add positions: a number > 0, or a size expression not known
    to be <= 0 (a pad to a multiple of 8 by `(8 - s % 8) % 8`: masked, always correct)."""
    if isinstance(amount, sympy.Expr) and not amount.is_number:
        return amount.is_nonpositive is not True
    return amount > 0


@register_lowering(aten.arange)
def arange(start, end=None, step=1, *, dtype=None, device=None, **_ignored):
    if end is None:
        start, end = 0, start
    symbolic = any(_is_symbol_expression(value) for value in (start, end, step))
    integral = all(isinstance(value, int) or _is_symbol_expression(value)
                   for value in (start, end, step))
    if dtype is None:
        dtype = torch.int64 if integral else torch.get_default_dtype()
    if symbolic:    # sizes: `arange(n)`, `arange(past, past + length)` (ints, n >= 0)
        if not integral or _is_symbol_expression(step) or step <= 0:
            raise NotSymbolic("arange over size expressions with a float or symbolic or "
                              "negative step")
        # the front end traced torch's own length check (its guards hold for every size)
        length = end - start if step == 1 else FloorDiv(end - start + step - 1, step)
    else:
        # eager: ceil((end - start) / step) elements in double, then for an integer dtype
        # the start and step truncated to it (arange(0.1, 8.0001, 1, dtype=int64) is 0..7)
        length = max(0, -(-(end - start) // step) if integral else
                     math.ceil((end - start) / step))
    if not dtype.is_floating_point and not symbolic:
        start, step = int(start), int(step)
    device = device or torch.device("cpu")

    def inner_fn(index):
        if dtype.is_floating_point:
            position = ops.index_expr(index[0], torch.float64)
            first = ops.index_expr(start, torch.float64) if _is_symbol_expression(start) \
                else ops.constant(float(start), torch.float64)
            value = ops.add(first, ops.mul(position, ops.constant(float(step), torch.float64)))
            return ops.to_dtype(value, dtype)
        return ops.index_expr(start + index[0] * step, dtype)
    return TensorBox.create(Pointwise(device, dtype, inner_fn, [length]))


def _is_symbol_expression(value) -> bool:
    return isinstance(value, sympy.Expr) and not value.is_number


def advanced_indexing(x, indices, what: str):
    """The geometry of `x[indices]` (tensor indices, `None` for whole dimensions) as numpy
    defines it: the iteration size, and a map from a position in it to coordinates of `x`
    (indirect where indexed). Adjacent indexed dimensions keep their place; otherwise their
    broadcast shape leads. Shared by `index` (reads) and `index_put` (writes)."""
    if any(value is not None and value.get_dtype() in (torch.bool, torch.uint8)
           for value in indices):
        raise NotImplementedError(f"boolean mask {what} has a data-dependent shape")
    size = x.get_size()
    indexed = [dim for dim, value in enumerate(indices) if value is not None]
    tensors = [indices[dim] for dim in indexed]
    broadcast = broadcast_shapes(*(tensor.get_size() for tensor in tensors))
    adjacent = indexed == list(range(indexed[0], indexed[-1] + 1))
    kept = [dim for dim in range(len(size)) if dim not in indexed]
    before = [dim for dim in kept if dim < indexed[0]] if adjacent else []
    after = [dim for dim in kept if not adjacent or dim > indexed[-1]]
    iteration = [size[dim] for dim in before] + broadcast + [size[dim] for dim in after]
    for tensor in tensors:
        # An index read for every position of the other dimensions (T5's position bucket,
        # a logarithm per (query, key) pair, gathered for each head) is computed once.
        realize_if_broadcast(tensor, iteration)
    loaders = [broadcast_loader(tensor.make_loader(), tensor.get_size(), broadcast)
               for tensor in tensors]

    def coordinates(position):
        head = position[:len(before)]
        middle = position[len(before):len(before) + len(broadcast)]
        tail = position[len(before) + len(broadcast):]
        target = [None] * len(size)
        for dim, coordinate in zip(before, head):
            target[dim] = coordinate
        for dim, coordinate in zip(after, tail):
            target[dim] = coordinate
        for dim, loader in zip(indexed, loaders):
            target[dim] = ops.indirect_indexing(loader(middle), size[dim])
        return target
    return iteration, coordinates


@register_lowering(aten.index, aten._unsafe_index)
def index(x, indices):
    out_size, coordinates = advanced_indexing(x, indices, "indexing")
    _realize_gathered_source(x, out_size)
    source_loader = x.make_loader()

    def inner_fn(position):
        return source_loader(coordinates(position))
    return TensorBox.create(Pointwise(x.get_device(), x.get_dtype(), inner_fn, out_size))


def _realize_gathered_source(x, out_size) -> None:
    storage = x.storage()
    if storage is None or storage.is_realized() or not isinstance(storage.data, Pointwise):
        return
    if x.get_device().type == "cuda":
        return
    source = math.prod(size_hint(extent) for extent in x.get_size())
    target = math.prod(size_hint(extent) for extent in out_size)
    loads, _operations = body_cost(storage.data)
    if loads > 1 and target >= GATHERED_SOURCE_RATIO * max(source, 1):
        storage.realize()


@register_lowering(aten.gather)
def gather(x, dim, index_tensor, sparse_grad=False):
    size = x.get_size()
    dim = _wrap(dim, max(len(size), 1))
    index_loader = index_tensor.make_loader()
    source_loader = x.make_loader()

    def inner_fn(position):
        source = list(position)
        if size:
            source[dim] = ops.indirect_indexing(index_loader(position), size[dim])
        return source_loader(source)
    return TensorBox.create(Pointwise(x.get_device(), x.get_dtype(), inner_fn,
                                      index_tensor.get_size()))


@register_lowering(aten.slice_scatter)
def slice_scatter(x, source, dim=0, start=None, end=None, step=1):
    """`x` with `source` written over `x[..., start:end:step, ...]` (a where, not a copy)."""
    size = x.get_size()
    dim = _wrap(dim, len(size))
    if not all(to_expr(value).is_Integer for value in
               (size[dim], 0 if start is None else start, 0 if end is None else end)):
        # the source is as long as the slice torch's meta kernel made
        start, length = symbolic_slice_bounds(size[dim], start, end, step,
                                              source.get_size()[dim])
        end = start + length * step
    else:
        extent = int(size[dim])
        start = 0 if start is None else (start + extent if start < 0 else start)
        end = extent if end is None else (end + extent if end < 0 else end)
        start, end = max(0, min(start, extent)), max(0, min(end, extent))
    dtype = x.get_dtype()
    base_loader = x.make_loader()
    source_loader = _converted(source.make_loader(), source.get_dtype(), dtype)

    def inner_fn(index):
        position = index[dim]
        inside = _in_range(position, start, end)
        if step != 1:
            offset = ops.index_expr(position - start, torch.int64)
            on_step = ops.eq(ops.remainder(offset, ops.constant(step, torch.int64)),
                             ops.constant(0, torch.int64))
            inside = ops.logical_and(inside, on_step)
        shifted = list(index)
        shifted[dim] = FloorDiv(position - start, step) if step != 1 else position - start
        written = ops.masked(inside, lambda: source_loader(shifted), 0)
        return ops.where(inside, written, base_loader(index))
    return TensorBox.create(Pointwise(x.get_device(), dtype, inner_fn, size))


@register_lowering(aten.diagonal_scatter)
def diagonal_scatter(x, source, offset=0, dim1=0, dim2=1):
    """`x` with `source` written over `x.diagonal(offset, dim1, dim2)` (a where)."""
    from inductor.lower.views import diagonal_geometry

    size = x.get_size()
    _size, kept, (dim1, dim2), (row, column) = diagonal_geometry(size, offset, dim1, dim2)
    dtype = x.get_dtype()
    base_loader = x.make_loader()
    source_loader = _converted(source.make_loader(), source.get_dtype(), dtype)

    def inner_fn(index):
        step = ops.index_expr(index[dim2] - index[dim1], torch.int64)
        inside = ops.eq(step, ops.constant(column - row, torch.int64))
        position = [index[dim] for dim in kept] + [index[dim1] - row]
        written = ops.masked(inside, lambda: source_loader(position), 0)
        return ops.where(inside, written, base_loader(index))
    return TensorBox.create(Pointwise(x.get_device(), dtype, inner_fn, size))
