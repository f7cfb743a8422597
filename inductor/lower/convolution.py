"""Stage "lower": 2-D convolutions that need no convolution library, for the Triton backend,
and the layout of the backward's library call in channels-last CPU graphs.

Input: an `aten.convolution` node's lowered arguments. Output: the same value built from
cheaper pieces, or None where the convolution stays a library call (`extern.convolution`):
- a 1x1 convolution with unit strides and no padding is a matrix product (`mm` or `bmm`
  of the weight against the input's channels), its bias a pointwise add that fuses into
  the next kernel;
- a depthwise convolution (one input channel per group) is a pointwise body summing its
  taps in float32, which BatchNorm and the activation after it fuse into.

Why: on a GPU a cuDNN convolution costs about 30-40 us of host time per call on the H100
machine (its plan lookup), against 8-10 us for a matrix product and 5 for a generated
kernel launch, and small-batch CNN inference is host-bound. ATen's NCHW depthwise kernel
is also slow on the device (MobileNetV3-L at batch 16: 0.29 of 1.0 ms). torch.compile calls
the convolution library for both.

Input: an `aten.convolution_backward` node's lowered arguments in a CPU graph kept
channels-last (`graph.prefers_channels_last`: a training backward graph). Output: the library
call reading the output's gradient and the forward's input channels-last, as the forward's
convolution read its input (oneDNN's NCHW backward of a 16-channel 3x3 convolution on 32x32
images took 2.5 ms where NHWC took 1.3, 1 thread); the weight as it is (its layout made no
difference, measured), the gradients in the layouts the library returns.
"""
from __future__ import annotations

from typing import Optional

import sympy
import torch

from inductor.config import config
from inductor.ir.ops import ops
from inductor.ir.nodes import Pointwise, TensorBox, current_graph
from inductor.ir.symbols import FloorDiv, to_expr
from inductor.lower.extern import (_contiguous_strides, _elements, make_extern, realize_input,
                                   require_channels_last, require_strides)
from inductor.lower.graph import convolution_prefers_channels_last
from inductor.lower.registry import register_lowering

aten = torch.ops.aten


def lower_without_library(x, weight, bias, stride, padding, dilation, transposed,
                          output_padding, groups) -> Optional[TensorBox]:
    """The convolution as a product or a generated body (see the module docstring), or
    None."""
    if not config.convolutions_without_library or transposed or \
            not config.uses_triton(x.get_device()) or len(x.get_size()) != 4 or \
            len(weight.get_size()) != 4:
        return None
    sizes = [int(extent) for extent in x.get_size()]
    kernel = [int(extent) for extent in weight.get_size()]
    if 0 in sizes or 0 in kernel:
        return None
    # (channels-last graphs keep cuDNN for these: the product reads channels-by-pixels)
    if groups == 1 and kernel[2:] == [1, 1] and list(stride) == [1, 1] and \
            list(padding) == [0, 0] and _same_precision(x.get_dtype(), x.get_device()) and \
            not getattr(current_graph(), "channels_last", False):
        return _as_product(x, weight, bias, sizes, kernel)
    if groups == sizes[1] and kernel[1] == 1 and kernel[0] % groups == 0:
        return _depthwise(x, weight, bias, sizes, kernel, list(stride), list(padding),
                          list(dilation))
    return None


def _same_precision(dtype: torch.dtype, device: torch.device) -> bool:
    """Whether a matrix product computes a float32 convolution as precisely as eager does:
    cuDNN may use TF32 (`torch.backends.cudnn.allow_tf32`, on by default) where cuBLAS does
    not (`torch.backends.cuda.matmul.allow_tf32`, off), so float32 keeps the library call
    unless both settings agree. Half-precision inputs accumulate in float32 in both."""
    if dtype != torch.float32 or device.type != "cuda":
        return True
    return torch.backends.cudnn.allow_tf32 == torch.backends.cuda.matmul.allow_tf32


def _as_product(x, weight, bias, sizes: list, kernel: list) -> TensorBox:
    """out[n, o, h, w] = sum_c weight[o, c] * x[n, c, h, w]: one `mm` when the batch or the
    image is a single element, else a `bmm` with the weight broadcast over the batch."""
    from inductor.lower.extern import make_extern
    from inductor.lower.views import expand, permute, unsqueeze, view
    batch, channels, height, width = sizes
    outputs = kernel[0]
    pixels = height * width
    graph = current_graph()
    device, dtype = x.get_device(), x.get_dtype()
    matrix = view(weight, [outputs, channels])
    if pixels == 1:
        arguments = (view(x, [batch, channels]), permute(matrix, [1, 0]))
        shape, operator = [batch, outputs], aten.mm.default
    elif batch == 1:
        arguments = (matrix, view(x, [channels, pixels]))
        shape, operator = [outputs, pixels], aten.mm.default
    else:
        arguments = (expand(unsqueeze(matrix, 0), [batch, outputs, channels]),
                     view(x, [batch, channels, pixels]))
        shape, operator = [batch, outputs, pixels], aten.bmm.default
    example = torch.empty(shape, dtype=dtype, device="meta")
    graph.count_library_call("aten.mm" if operator is aten.mm.default else "aten.bmm")
    product = make_extern(operator, arguments, {}, example, "library", device=device)
    result = view(product, [batch, outputs, height, width])
    if bias is None:
        return result
    from inductor.lower.math import add
    return add(result, view(bias, [1, outputs, 1, 1]))


def _depthwise(x, weight, bias, sizes: list, kernel: list, stride: list, padding: list,
               dilation: list) -> TensorBox:
    """Each output element sums its taps (masked at the borders) in float32, plus the bias,
    then rounds once to the input's dtype, as a library kernel accumulating in float
    would."""
    batch, channels, height, width = sizes
    outputs, _one, kernel_height, kernel_width = kernel
    extents = [height, width]
    taps = [kernel_height, kernel_width]
    output_extents = [
        (extents[axis] + 2 * padding[axis] - dilation[axis] * (taps[axis] - 1) - 1)
        // stride[axis] + 1 for axis in range(2)]
    if min(output_extents) <= 0:
        return None
    multiplier = outputs // channels
    dtype = x.get_dtype()
    for value in (x, weight):
        # every element is read by several taps: a computed input (the BatchNorm and
        # activation after the previous convolution) is realized once, not recomputed per tap
        storage = value.storage()
        if storage is not None and not storage.is_realized():
            storage.realize()
    load_input, load_weight = x.make_loader(), weight.make_loader()
    load_bias = bias.make_loader() if bias is not None else None

    def tap_position(axis: int, position, tap: int):
        """The input coordinate of a tap, and its in-bounds check (None: always inside)."""
        offset = tap * dilation[axis] - padding[axis]
        coordinate = position * stride[axis] + offset
        checks = []
        if offset < 0:
            checks.append(ops.ge(ops.index_expr(coordinate, torch.int64),
                                 ops.constant(0, torch.int64)))
        if (output_extents[axis] - 1) * stride[axis] + offset >= extents[axis]:
            checks.append(ops.lt(ops.index_expr(coordinate, torch.int64),
                                 ops.constant(extents[axis], torch.int64)))
        return coordinate, checks

    def inner_fn(index):
        image, channel, row, column = index
        source_channel = channel if multiplier == 1 else FloorDiv(channel, multiplier)
        total = ops.constant(0.0, torch.float32) if load_bias is None else \
            ops.to_dtype(load_bias([channel]), torch.float32)
        for tap_row in range(kernel_height):
            source_row, row_checks = tap_position(0, row, tap_row)
            for tap_column in range(kernel_width):
                source_column, column_checks = tap_position(1, column, tap_column)
                source = [image, source_channel, source_row, source_column]
                checks = row_checks + column_checks
                value = _masked_load(load_input, source, checks)
                tap = load_weight([channel, sympy.Integer(0), sympy.Integer(tap_row),
                                   sympy.Integer(tap_column)])
                total = ops.add(total, ops.mul(ops.to_dtype(value, torch.float32),
                                               ops.to_dtype(tap, torch.float32)))
        return ops.to_dtype(total, dtype)
    result = TensorBox.create(Pointwise(x.get_device(), dtype, inner_fn,
                                        [sympy.Integer(batch), sympy.Integer(outputs),
                                         sympy.Integer(output_extents[0]),
                                         sympy.Integer(output_extents[1])]))
    if kernel_height * kernel_width > MAX_FUSED_TAPS:
        result.realize()
    return result


MAX_FUSED_TAPS = 25
"""Depthwise convolutions with more taps than this (ConvNeXt's 7x7) are realized where they
are lowered: stored once in the convolution's own loop order (threads along the image rows),
never computed inside a consumer's loops. A pointwise consumer with the same loops still
shares the kernel. Fused into the LayerNorm over channels after ConvNeXt's convolution, the
taps were loaded in the reduction's order, channel after channel, a whole image apart: on
the H200 (bf16, batch 16) a 96-channel 56x56 block took 0.48 ms of device time, 0.23 ms
realized, and convnext_tiny 3.33 -> 2.59 ms per call (3.20 -> 2.43 ms of device time;
benchmarks/experiments/diag_depthwise.py). 3x3 and 5x5 bodies keep fusing with what follows
(MobileNet, EfficientNet: not measured to differ)."""


def _masked_load(load, source: list, checks: list):
    if not checks:
        return load(source)
    mask = checks[0]
    for check in checks[1:]:
        mask = ops.logical_and(mask, check)
    return ops.masked(mask, lambda: load(source), 0)


@register_lowering(aten.convolution_backward)
def convolution_backward(grad_output, x, weight, bias_sizes, stride, padding, dilation,
                         transposed, output_padding, groups, output_mask):
    """In a channels-last CPU graph, the library call with the output's gradient and the
    input laid out as the forward's convolution read them: channels-last, or contiguous where
    the weight outweighs the activations (`convolution_prefers_channels_last`). Elsewhere an
    eager call of the arguments as they come."""
    graph = current_graph()
    values = (grad_output, x, weight)
    if not getattr(graph, "channels_last", False) or x.get_device().type != "cpu" or \
            any(len(value.get_size()) != 4 for value in values) or \
            not all(to_expr(extent).is_Integer for value in values
                    for extent in value.get_size()):
        raise NotImplementedError("plain library call")
    if convolution_prefers_channels_last(_elements(x), weight.get_size(),
                                         _elements(grad_output)):
        grad_output, x = require_channels_last(grad_output), require_channels_last(x)
    else:
        grad_output = require_strides(grad_output, _contiguous_strides(grad_output.get_size()))
        x = require_strides(x, _contiguous_strides(x.get_size()))
    graph.count_library_call("aten.convolution_backward")
    arguments = (grad_output, x, realize_input(weight), bias_sizes, stride, padding, dilation,
                 transposed, output_padding, groups, output_mask)
    return make_extern(aten.convolution_backward.default, arguments, {},
                       graph.current_example(), "library", device=x.get_device())

