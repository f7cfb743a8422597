"""Stage "lower": the backward kernels of scaled-dot-product attention as library calls with
the layouts their CUDA kernels assume.

Input: an `_scaled_dot_product_{cudnn,flash,efficient}_attention_backward` node's lowered
arguments. Output: an `ExternKernel` (with `MultiOutput`s) whose gradient-of-output argument
has exactly the strides of the forward output argument, and whose 4-D arguments are
contiguous in their last dimension.

Eager's autograd formulas hand these kernels a `grad_out` laid out like `out` (cuDNN's
backward reads both with one set of strides: given a differently laid out `grad_out`, the
H100 run of BERT and GPT-2 training under bf16 autocast produced gradients off by orders of
magnitude). A generated kernel choosing its own layout for `grad_out` (the bf16 cast of a
tangent) therefore gets `out`'s strides imposed here.
"""
from __future__ import annotations

import torch

from inductor.ir.layout import contiguous_strides
from inductor.ir.nodes import Buffer, ReinterpretView, TensorBox, current_graph
from inductor.lower.extern import make_extern, realize_input, require_strides
from inductor.lower.registry import register_lowering

aten = torch.ops.aten

# The backward ops and the position of `out` among their arguments (`grad_out` is first).
OUT_POSITION = {
    "_scaled_dot_product_cudnn_attention_backward": 4,
    "_scaled_dot_product_flash_attention_backward": 4,
    "_scaled_dot_product_efficient_attention_backward": 5,
}


def _last_dimension_contiguous(value):
    """A realized 4-D tensor argument whose innermost stride is 1 (copied if not)."""
    buffer = realize_input(value)
    layout = buffer.layout
    if len(layout.size) != 4 or int(layout.size[-1]) == 1 or int(layout.stride[-1]) == 1:
        return buffer
    return require_strides(buffer, contiguous_strides(layout.size))


def _lowering(packet, out_position: int):
    def lower(*args, **kwargs):
        args = list(args)
        for position in range(1, len(args)):
            if position != out_position and _is_tensor_value(args[position]):
                args[position] = _last_dimension_contiguous(args[position])
        out = _last_dimension_contiguous(args[out_position])
        args[out_position] = out
        args[0] = require_strides(args[0], [int(stride) for stride in out.layout.stride])
        graph = current_graph()
        graph.count_library_call(str(packet))
        return make_extern(packet.default, tuple(args), kwargs, graph.current_example(),
                           "library")
    return lower


def _is_tensor_value(value) -> bool:
    return isinstance(value, (TensorBox, Buffer, ReinterpretView)) and \
        len(value.get_size()) == 4


for _name, _position in OUT_POSITION.items():
    _packet = getattr(aten, _name, None)
    if _packet is not None:
        register_lowering(_packet)(_lowering(_packet, _position))
