"""Lowerings of 2-D pooling: `max_pool2d_with_indices` and `avg_pool2d`.

Input: the ATen ops with kernel size, stride, padding, dilation, ceil mode. Output:
`Pointwise` bodies over the output positions that combine the (small, unrolled) window with
masked loads; padding reads as -inf for max and is counted or not for average as eager does
(max pooling in C++ kernels reads clamped positions instead, see `_clamp_fits`).
The indices output of max pooling is a separate body, so it costs nothing when unused.
"""
from __future__ import annotations

import torch

from inductor.config import config
from inductor.ir.nodes import Pointwise, TensorBox
from inductor.ir.ops import ops
from inductor.lower.elementwise import opmath_dtype
from inductor.ir.symbols import to_expr
from inductor.lower.registry import register_lowering

aten = torch.ops.aten


def _pair(value, default=None):
    if value is None or (isinstance(value, (list, tuple)) and len(value) == 0):
        value = default
    if isinstance(value, int):
        return [value, value]
    return list(value) if len(value) == 2 else [value[0], value[0]]


def _output_extent(size, kernel, stride, padding, dilation, ceil_mode) -> int:
    span = size + 2 * padding - dilation * (kernel - 1) - 1
    extent = (span + (stride - 1 if ceil_mode else 0)) // stride + 1
    if ceil_mode and (extent - 1) * stride >= size + padding:
        extent -= 1
    return extent


def _materialized(x: TensorBox) -> TensorBox:
    """A pooling window reads each input element several times: a computed input (a
    convolution's BatchNorm and ReLU) is realized once rather than recomputed per read."""
    storage = x.storage()
    if storage is not None and not storage.is_realized():
        storage.realize()
    return x


def _extent(size):
    """An int where static, else the symbolic size's expression."""
    size = to_expr(size)
    return int(size) if size.is_Integer else size


def _geometry(x, kernel_size, stride, padding, dilation, ceil_mode):
    kernel = _pair(kernel_size)
    stride = _pair(stride, kernel)
    padding = _pair(padding, [0, 0])
    dilation = _pair(dilation, [1, 1])
    # leading dims (batch, channels) may be symbolic; the window geometry needs ints
    size = [_extent(extent) for extent in x.get_size()[:-2]] + \
        [int(extent) for extent in x.get_size()[-2:]]
    height, width = size[-2], size[-1]
    out = [_output_extent(extent, kernel[axis], stride[axis], padding[axis], dilation[axis],
                          ceil_mode) for axis, extent in enumerate((height, width))]
    return size, kernel, stride, padding, dilation, out


def _window(index, kernel, stride, padding, dilation, size, ceil_mode):
    """Yield (row, column, bounds checks) for each window position of output `index`; the
    checks are needed only where padding or ceil mode lets a window leave the input."""
    height, width = size[-2], size[-1]
    for row_offset in range(kernel[0]):
        row = index[-2] * stride[0] - padding[0] + row_offset * dilation[0]
        for column_offset in range(kernel[1]):
            column = index[-1] * stride[1] - padding[1] + column_offset * dilation[1]
            checks = []
            if padding[0] or ceil_mode:
                checks.append((row, height))
            if padding[1] or ceil_mode:
                checks.append((column, width))
            yield row, column, checks


def _inside(checks):
    mask = None
    for position, extent in checks:
        value = ops.index_expr(position, torch.int64)
        inside = ops.logical_and(ops.ge(value, ops.constant(0, torch.int64)),
                                 ops.lt(value, ops.constant(extent, torch.int64)))
        mask = inside if mask is None else ops.logical_and(mask, inside)
    return mask


def _clamp_fits(x, dilation) -> bool:
    """Whether max pooling reads window positions clamped into the input instead of masked
    (C++ kernels, dilation 1). Every window holds a position inside the input (padding is at
    most half the window; ceil mode drops windows starting past the input), and with
    dilation 1 the nearest inside position is in the window, so the maximum is the same. A
    mask that does not vary along the vectorised loop (the channels of NHWC activations)
    kept GCC from vectorising the loop: resnet18's pooling at batch 8 ran 13-14 ms."""
    return dilation == [1, 1] and x.get_device().type == "cpu" and config.cpu_backend == "cpp"


def _clamped(position, extent):
    """`position` moved into [0, extent), as an index symbol."""
    value = ops.index_expr(position, torch.int64)
    value = ops.maximum(value, ops.constant(0, torch.int64))
    value = ops.minimum(value, ops.constant(extent - 1, torch.int64))
    return ops.indirect_indexing(value, extent, check=False)   # in range by construction


@register_lowering(aten.max_pool2d_with_indices)
def max_pool2d_with_indices(x, kernel_size, stride=None, padding=0, dilation=1,
                            ceil_mode=False):
    size, kernel, stride, padding, dilation, out = _geometry(x, kernel_size, stride, padding,
                                                             dilation, ceil_mode)
    x = _materialized(x)
    loader = x.make_loader()
    dtype = x.get_dtype()
    out_size = size[:-2] + out
    width = size[-1]
    clamp = _clamp_fits(x, dilation)

    def windows(index):
        for row, column, checks in _window(index, kernel, stride, padding, dilation, size,
                                           ceil_mode):
            source = list(index[:-2]) + [row, column]
            mask = _inside(checks) if checks else None
            if mask is None:
                value = loader(source)
            else:
                value = ops.masked(mask, lambda source=source: loader(source), float("-inf"))
            yield value, row * width + column

    def values(index):
        best = None
        taps = clamped_windows(index) if clamp else windows(index)
        for value, _position in taps:
            best = value if best is None else ops.maximum(best, value)
        return best

    def clamped_windows(index):
        for row, column, checks in _window(index, kernel, stride, padding, dilation, size,
                                           ceil_mode):
            inside = [_clamped(position, extent) for position, extent in checks]
            if len(checks) == 2:
                row, column = inside
            elif checks:
                row, column = (inside[0], column) if padding[0] or ceil_mode else \
                    (row, inside[0])
            yield loader(list(index[:-2]) + [row, column]), None

    def indices(index):
        best = best_index = None
        for value, position in windows(index):
            here = ops.index_expr(position, torch.int64)
            if best is None:
                best, best_index = value, here
                continue
            takes = ops.logical_or(ops.gt(value, best), ops.logical_and(
                ops.isnan(value), ops.logical_not(ops.isnan(best))))
            best = ops.where(takes, value, best)
            best_index = ops.where(takes, here, best_index)
        return best_index
    device = x.get_device()
    return (TensorBox.create(Pointwise(device, dtype, values, out_size)),
            TensorBox.create(Pointwise(device, torch.int64, indices, out_size)))


@register_lowering(aten.avg_pool2d)
def avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    size, kernel, stride, padding, dilation, out = _geometry(x, kernel_size, stride, padding,
                                                             1, ceil_mode)
    x = _materialized(x)
    loader = x.make_loader()
    dtype = x.get_dtype()
    compute = opmath_dtype(dtype)
    height, width = size[-2], size[-1]

    def inner_fn(index):
        total = None
        for row, column, checks in _window(index, kernel, stride, padding, dilation, size,
                                           ceil_mode):
            source = list(index[:-2]) + [row, column]
            mask = _inside(checks) if checks else None
            value = loader(source) if mask is None else \
                ops.masked(mask, lambda source=source: loader(source), 0.0)
            value = ops.to_dtype(value, compute) if compute != dtype else value
            total = value if total is None else ops.add(total, value)
        divisor = ops.to_dtype(_divisor(index, kernel, stride, padding, height, width,
                                        count_include_pad, divisor_override), compute)
        return ops.to_dtype(ops.truediv(total, divisor), dtype)
    return TensorBox.create(Pointwise(x.get_device(), dtype, inner_fn, size[:-2] + out))


def _divisor(index, kernel, stride, padding, height, width, count_include_pad,
             divisor_override):
    """The averaging divisor of output `index`, as eager computes it."""
    if divisor_override:
        return ops.constant(int(divisor_override), torch.int64)
    extents = []
    for axis, extent in ((0, height), (1, width)):
        start = ops.index_expr(index[axis - 2] * stride[axis] - padding[axis], torch.int64)
        end = ops.minimum(ops.add(start, ops.constant(kernel[axis], torch.int64)),
                          ops.constant(extent + padding[axis], torch.int64))
        if not count_include_pad:
            start = ops.maximum(start, ops.constant(0, torch.int64))
            end = ops.minimum(end, ops.constant(extent, torch.int64))
        extents.append(ops.sub(end, start))
    return ops.mul(extents[0], extents[1])
