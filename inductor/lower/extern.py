"""Library calls and eager fallbacks: ATen ops the loop IR calls rather than generates.

Input: an ATen op, its lowered arguments and the FX node's example value. Output: an
`ExternKernel` buffer (with `MultiOutput`s for tuple results) whose inputs are realized
buffers or strided views of them. Matmul, convolution and attention are "library" calls by
design; every op without a lowering is a "fallback", counted and reported per graph.
"""
from __future__ import annotations

from typing import Optional

import sympy
import torch
import torch.utils._pytree as pytree

from inductor.ir.layout import Layout
from inductor.ir.nodes import (Buffer, ExternKernel, MultiOutput, Pointwise, ReinterpretView,
                               TensorArgument, TensorBox, current_graph)
from inductor.ir.ops import OpsHandler, use_handler
from inductor.ir.symbols import index_symbol, linear_coefficient, simplify_index, to_expr
from inductor.lower.registry import register_lowering

aten = torch.ops.aten

LIBRARY_OPS = {
    aten.mm, aten.bmm, aten.addmm, aten.baddbmm, aten.addmv, aten.mv, aten.dot,
    aten.convolution, aten._convolution, aten.convolution_backward,
    aten.scaled_dot_product_attention,
    aten._scaled_dot_product_flash_attention_for_cpu,
    aten._scaled_dot_product_flash_attention, aten._scaled_dot_product_efficient_attention,
    aten._scaled_dot_product_cudnn_attention, aten._scaled_dot_product_attention_math,
}


class _LoadCapture(OpsHandler):
    """Records the loads a loader makes; anything else marks the value as computed."""

    def __init__(self):
        self.loads = []
        self.computes = False

    def load(self, name, index):
        self.loads.append((name, index))
        return ("load", name, index)

    def default(self, name, *args, **kwargs):
        self.computes = True
        return (name,)


def strided_view(x: TensorBox) -> Optional[ReinterpretView]:
    """`x` as a strided view of a realized buffer, if its loader is one linear load."""
    storage = x.storage()
    if storage is None or not storage.is_realized():
        return None
    buffer = storage.data
    buffer.layout.freeze()
    size = x.get_size()
    index = [index_symbol("i", position) for position in range(len(size))]
    capture = _LoadCapture()
    with use_handler(capture):
        x.make_loader()(index)
    if capture.computes or len(capture.loads) != 1 or capture.loads[0][0] != buffer.get_name():
        return None
    # A reshape's index divides and takes remainders (`(i0 // 16) * 2048 + (i0 % 16) * 128`);
    # with the view's extents those fold back into a linear index.
    ranges = {symbol: to_expr(extent) for symbol, extent in zip(index, size)}
    expression = simplify_index(sympy.expand(to_expr(capture.loads[0][1])), ranges)
    strides = []
    for position, symbol in enumerate(index):
        coefficient = linear_coefficient(expression, symbol)
        if coefficient is None or not coefficient.is_Integer:
            if size[position] == 1:
                coefficient = sympy.Integer(0)
            else:
                return None
        if coefficient < 0:
            return None
        strides.append(coefficient)
    offset = sympy.sympify(expression).xreplace({symbol: sympy.Integer(0) for symbol in index})
    if not offset.is_Integer:
        return None
    layout = Layout(x.get_device(), x.get_dtype(), size, strides, offset)
    return ReinterpretView(buffer, layout)


def realize_input(x) -> Buffer | ReinterpretView:
    """A realized buffer (or strided view of one) holding the value of `x`."""
    if isinstance(x, (Buffer, ReinterpretView)):
        return x
    if isinstance(x.data, ReinterpretView):
        return x.data
    storage = x.storage()
    if storage is not None and x.data is storage:
        buffer = storage.realize()
        buffer.layout.freeze()
        return buffer
    if storage is not None:
        storage.realize()
    view = strided_view(x)
    if view is not None:
        return view
    copy = TensorBox.create(Pointwise(x.get_device(), x.get_dtype(), x.make_loader(),
                                      x.get_size()))
    buffer = copy.realize()
    buffer.layout.freeze()
    return buffer


def layout_of(value: torch.Tensor) -> Layout:
    """The fixed layout of an example tensor, relative to its first element."""
    return Layout(value.device, value.dtype, value.shape, value.stride(), 0)


def make_extern(kernel, args, kwargs, example, kind: str, device=None):
    """An `ExternKernel` calling `kernel(*args, **kwargs)`; returns boxes shaped like
    `example` (a tensor, or a tuple/list of tensors and Nones; `device` overrides its device,
    for examples computed on the meta device)."""
    inputs = []

    def replace(value):
        if isinstance(value, (TensorBox, Buffer, ReinterpretView)):
            inputs.append(realize_input(value))
            return TensorArgument(len(inputs) - 1)
        return value
    arguments = pytree.tree_map(replace, (list(args), dict(kwargs)),
                                is_leaf=lambda value: isinstance(value, (TensorBox, Buffer,
                                                                         ReinterpretView)))
    device = device or _device_of(example, inputs)
    if kind == "library" and device.type in ("cpu", "cuda") or \
            kind == "fallback" and device.type == "cpu":
        # An eager fallback's result follows its inputs' layouts too: DenseNet's `cat` of
        # channels-last features (eager's, above CAT_INLINE_INPUTS) came back channels-last
        # and was copied to the recorded NCHW strides, then back to channels-last by the
        # BatchNorm after it (docs/performance-notes.md, DenseNet-121).
        example = _example_for_inputs(kernel, arguments, inputs, example)
    graph = current_graph()
    if isinstance(example, torch.Tensor):
        layout = layout_of(example)
        layout.device = device
        node = ExternKernel(None, layout, kernel, inputs, arguments, kind, device)
        graph.register_buffer(node)
        return TensorBox.create(node)
    node = ExternKernel(None, None, kernel, inputs, arguments, kind, device)
    graph.register_buffer(node)
    return _multi_outputs(node, example, ())


def _example_for_inputs(kernel, arguments, inputs, example):
    """The library call's result metadata for the layouts its inputs really have (their
    realized buffers or views), where the graph's recorded `example` assumed others:
    attention returns a layout that follows its inputs' (CPU flash, CUDA cuDNN), and a
    mismatch cost a copy of every attention output at run time (T5 on an H100: 18 copies
    per call). Falls back to `example` when the fake kernel fails or disagrees on anything
    but strides."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    if not isinstance(kernel, torch._ops.OpOverload):
        return example
    try:
        # one mode per graph: constructing a FakeTensorMode costs ~10-40 ms, most of
        # make_extern's time (t5-small training's 719 calls: 9.5 s of 21 s lowering)
        graph = current_graph()
        mode = getattr(graph, "fake_mode", None)
        if mode is None:
            mode = graph.fake_mode = FakeTensorMode()
        fakes = [_fake(value, mode) for value in inputs]
        args, kwargs = pytree.tree_map(
            lambda value: fakes[value.position] if isinstance(value, TensorArgument) else value,
            arguments)
        with mode:
            refreshed = kernel(*args, **kwargs)
    except Exception:  # noqa: BLE001  (no fake kernel, or one that refuses: keep the record)
        return example
    old_leaves, old_spec = pytree.tree_flatten(example)
    new_leaves, new_spec = pytree.tree_flatten(refreshed)
    if old_spec != new_spec or any(
            isinstance(old, torch.Tensor) != isinstance(new, torch.Tensor) or
            (isinstance(old, torch.Tensor) and (old.shape != new.shape or
                                                old.dtype != new.dtype))
            for old, new in zip(old_leaves, new_leaves)):
        return example
    return refreshed


def _multi_outputs(node: ExternKernel, example, path: tuple):
    if isinstance(example, torch.Tensor):
        output = MultiOutput(None, layout_of(example), node, path)
        current_graph().register_buffer(output)
        return TensorBox.create(output)
    if isinstance(example, (list, tuple)):
        return type(example)(_multi_outputs(node, item, path + (position,))
                             for position, item in enumerate(example))
    return example


def _device_of(example, inputs) -> torch.device:
    for value in pytree.tree_leaves(example):
        if isinstance(value, torch.Tensor):
            return value.device
    return inputs[0].get_device() if inputs else torch.device("cpu")


def is_library_op(target) -> bool:
    """Whether `target` is kept as a library call by design."""
    packet = getattr(target, "overloadpacket", target)
    return packet in LIBRARY_OPS


# Ops that only re-address their input: a consumer behind them reads the product itself.
VIEW_OPS = {
    aten.view, aten.reshape, aten._unsafe_view, aten.permute, aten.transpose, aten.t,
    aten.unsqueeze, aten.squeeze, aten.expand, aten.slice, aten.select, aten.split,
    aten.split_with_sizes, aten.unbind, aten.alias, aten.view_copy, aten.permute_copy,
    aten.transpose_copy, aten.t_copy, aten.unsqueeze_copy, aten.squeeze_copy,
    aten.expand_copy, aten.slice_copy, aten.select_copy, aten.split_copy,
    aten.split_with_sizes_copy, aten.unbind_copy, aten.alias_copy,
}


def reader_kinds(node) -> set:
    """What reads the value of FX `node`, directly or through views: "loop" (a pointwise op
    or a reduction, which a bias add can fuse into) and "buffer" (a library call, an eager
    fallback or the graph's output, which read a realized buffer)."""
    import operator
    from inductor.lower.registry import lowering_for
    forced = getattr(current_graph(), "forced_fallbacks", set())
    kinds = set()
    for user in node.users:
        if user.op != "call_function":
            kinds.add("buffer")
            continue
        packet = getattr(user.target, "overloadpacket", None)
        if user.target is operator.getitem or packet in VIEW_OPS:
            kinds |= reader_kinds(user)
        elif not is_library_op(user.target) and lowering_for(user.target) is not None \
                and str(packet) not in forced:
            kinds.add("loop")
        else:
            kinds.add("buffer")
    return kinds


def _aligned_product(arguments: tuple, bias: bool):
    """The product against a zero-padded right operand, in row blocks
    (`runtime/aligned_matmul.py`), when its result rows are not 16-byte aligned on a GPU;
    else None."""
    from inductor.runtime.aligned_matmul import aligned_addmm, aligned_mm, wants_alignment
    graph = current_graph()
    example = graph.current_example()
    if not isinstance(example, torch.Tensor) or example.dim() != 2 or \
            not wants_alignment(example.shape[0], example.shape[1], example.element_size(),
                                arguments[-1].get_device()):
        return None
    graph.count_library_call("aten.addmm" if bias else "aten.mm")
    return make_extern(aligned_addmm if bias else aligned_mm, arguments, {}, example,
                       "library")


@register_lowering(aten.mm)
def mm(first, second):
    """A library call; one whose result rows are misaligned on a GPU (GPT-2's logits) runs
    as an aligned product (`_aligned_product`)."""
    result = _aligned_product((first, second), bias=False)
    if result is None:
        raise NotImplementedError("plain library call")
    return result


@register_lowering(aten.addmm)
def addmm(bias, first, second, *, beta=1, alpha=1):
    """`mm` as a library call with the bias added by a pointwise body, which then fuses into
    whatever reads the product (GELU, residual adds) instead of costing a pass of its own.
    Where something needs the biased product in memory anyway (attention reading its Q, K and
    V projections through views; GPT-2's fused QKV projection, read by attention and by the
    copies of its returned keys and values) or nothing would fuse, one `addmm` library call:
    the library adds the bias itself, and loop readers read its result."""
    if beta != 1 or alpha != 1 or len(bias.get_size()) > 1:
        raise NotImplementedError("addmm with scaling or a 2-D bias stays a library call")
    graph = current_graph()
    if graph.current is not None and reader_kinds(graph.current) != {"loop"}:
        aligned = _aligned_product((bias, first, second), bias=True)
        if aligned is not None:
            return aligned
        graph.count_library_call("aten.addmm")
        return make_extern(aten.addmm.default, (bias, first, second), {},
                           graph.current_example(), "library")
    product = _aligned_product((first, second), bias=False)
    if product is None:
        graph.count_library_call("aten.mm")
        product = make_extern(aten.mm.default, (first, second), {}, graph.current_example(),
                              "library")
    from inductor.lower.math import add
    return add(product, bias)


def _fake(value, mode):
    """A fake tensor with the size, strides, dtype and device of a realized input (or None):
    meta kernels choose output layouts by device (a CPU convolution follows a channels-last
    input, a meta one does not)."""
    if value is None:
        return None
    layout = value.layout
    with mode:
        return torch.empty_strided([int(s) for s in layout.size],
                                   [int(s) for s in layout.stride], dtype=layout.dtype,
                                   device=layout.device)


def require_channels_last(x: TensorBox):
    """`x` (4-D) realized with channels-last strides (see `require_strides`)."""
    from inductor.lower.graph import channels_last_strides
    return require_strides(x, channels_last_strides(x.get_size()))


def require_strides(x, strides) -> Buffer:
    """`x` realized with `strides` (dimensions of extent 1 excepted): a flexible layout is
    given them, a fixed one that differs is copied."""
    strides = [int(stride) for stride in strides]
    if isinstance(x, TensorBox) and isinstance(x.data, ReinterpretView):
        x = x.data
    if isinstance(x, (Buffer, ReinterpretView)):
        if _strides_match(x.layout, strides):
            return x
    else:
        storage = x.storage()
        if storage is not None and x.data is storage:
            if not storage.is_realized():
                storage.preferred_stride = strides
            buffer = storage.realize()
            if not buffer.layout.fixed:
                buffer.layout.decide(strides)
            if _strides_match(buffer.layout, strides):
                buffer.layout.freeze()
                return buffer
    copy = TensorBox.create(Pointwise(x.get_device(), x.get_dtype(), x.make_loader(),
                                      x.get_size()), preferred_stride=strides)
    buffer = copy.realize()
    buffer.layout.freeze()
    return buffer


def _elements(x) -> int:
    count = 1
    for extent in x.get_size():
        count *= int(extent)
    return count


def _contiguous_strides(size) -> list:
    strides, running = [], 1
    for extent in reversed([int(extent) for extent in size]):
        strides.insert(0, running)
        running *= max(extent, 1)
    return strides


def _strides_match(layout, strides) -> bool:
    return all(int(extent) == 1 or int(actual) == wanted
               for extent, actual, wanted in zip(layout.size, layout.stride, strides))


@register_lowering(aten.convolution)
def convolution(x, weight, bias, stride, padding, dilation, transposed, output_padding,
                groups):
    """A library call fed channels-last activations and weights (in graphs the lowering
    switched to channels-last: its output then comes out channels-last too), or contiguous
    ones where the weight outweighs the activations."""
    if not all(to_expr(extent).is_Integer for extent in list(x.get_size()) +
               list(weight.get_size())):
        raise NotImplementedError("symbolic sizes: a plain library call")
    from inductor.lower.convolution import lower_without_library
    lowered = lower_without_library(x, weight, bias, stride, padding, dilation, transposed,
                                    output_padding, groups)
    if lowered is not None:
        return lowered
    graph = current_graph()
    if not getattr(graph, "channels_last", False) or len(x.get_size()) != 4 or \
            len(weight.get_size()) != 4:
        raise NotImplementedError("plain library call")
    from inductor.lower.graph import convolution_prefers_channels_last
    example = graph.current.meta.get("val") if graph.current is not None else None
    if x.get_device().type == "cuda":
        # cuDNN (config.gpu_channels_last): channels-last activations, the weight as it is.
        x = require_channels_last(x)
        weight = realize_input(weight)
    elif isinstance(example, torch.Tensor) and not convolution_prefers_channels_last(
            _elements(x), weight.get_size(), example.numel()):
        # Weight-heavy: contiguous input, the weight as it is (given a channels-last input,
        # ATen would copy the weight to channels-last itself, more slowly).
        x = require_strides(x, _contiguous_strides(x.get_size()))
        weight = realize_input(weight)
    else:
        # Channels-last weights too (copied each call): oneDNN then skips its own per-call
        # reorder; measured 7% on resnet18 at batch 8 in eager.
        x = require_channels_last(x)
        weight = require_channels_last(weight)
    bias = realize_input(bias) if bias is not None else None
    from torch._subclasses.fake_tensor import FakeTensorMode
    mode = FakeTensorMode()
    with mode:
        example = aten.convolution.default(_fake(x, mode), _fake(weight, mode),
                                           _fake(bias, mode), stride, padding, dilation,
                                           transposed, output_padding, groups)
    graph.count_library_call("aten.convolution")
    return make_extern(aten.convolution.default, (x, weight, bias, stride, padding, dilation,
                                                  transposed, output_padding, groups), {},
                       example, "library", device=x.get_device())
