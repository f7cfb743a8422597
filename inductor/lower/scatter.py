"""Lowerings that write through indices: `scatter`, `scatter_add`, `scatter_reduce` (sum),
`index_put` (with or without accumulation).

Input: the functional ATen ops. Output: a realized `ScatterBuffer`: the input copied, then
every source element stored (or added) at a position read from the index tensors
(`ops.indirect_indexing`, wrapped and bounds-checked like every indirect read). Accumulating
scatters of dtypes Triton cannot add atomically run through eager's kernel on that backend.
"""
from __future__ import annotations

import torch

from inductor.config import config
from inductor.ir.layout import Layout
from inductor.ir.nodes import Pointwise, ScatterBuffer, TensorBox, current_graph
from inductor.ir.ops import ops
from inductor.lower.elementwise import broadcast_loader
from inductor.lower.indexing import advanced_indexing
from inductor.lower.registry import register_lowering

aten = torch.ops.aten


# Triton adds atomically only 16-bit floats and wider types (no bool or 8/16-bit integers);
# its CPU interpreter has no bfloat16 at all. Such accumulating scatters run eager's kernel.
TRITON_ATOMIC_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64,
                        torch.int32, torch.int64)


def _scatter_buffer(x: TensorBox, size, value_fn, destination, mode) -> TensorBox:
    """Realize `x` updated at `destination(index)` with `value_fn(index)` over `size`."""
    dtype = x.get_dtype()
    device = x.get_device()
    if mode == "sum" and config.uses_triton(device) and (
            dtype not in TRITON_ATOMIC_DTYPES or (dtype == torch.bfloat16 and
                                                  device.type == "cpu")):
        raise NotImplementedError(f"no Triton atomic add for {dtype} on {device.type}")
    layout = Layout(x.get_device(), dtype, x.get_size())
    body = Pointwise(x.get_device(), dtype, value_fn, size)
    buffer = ScatterBuffer(None, layout, body, x.make_loader(), destination, mode)
    current_graph().register_buffer(buffer)
    return TensorBox.create(buffer)


def _value_loader(source, size, dtype):
    if isinstance(source, TensorBox):
        loader = broadcast_loader(source.make_loader(), source.get_size(), size)
        if source.get_dtype() == dtype:
            return loader
        return lambda index: ops.to_dtype(loader(index), dtype)
    return lambda index: ops.constant(source, dtype)


def _scatter(x, dim, index_tensor, source, mode):
    size = x.get_size()
    rank = max(len(size), 1)
    dim = dim + rank if dim < 0 else dim
    iteration = index_tensor.get_size()
    index_loader = index_tensor.make_loader()
    value = _value_loader(source, iteration, x.get_dtype())

    def destination(position):
        target = list(position)
        if size:
            target[dim] = ops.indirect_indexing(index_loader(position), size[dim])
        return target
    return _scatter_buffer(x, iteration, value, destination, mode)


@register_lowering(aten.scatter)
def scatter(x, dim, index, source, *, reduce=None):
    if reduce is not None:
        raise NotImplementedError("scatter with reduce= runs through the eager kernel")
    return _scatter(x, dim, index, source, None)


@register_lowering(aten.scatter_add)
def scatter_add(x, dim, index, source):
    return _scatter(x, dim, index, source, "sum")


@register_lowering(aten.scatter_reduce)
def scatter_reduce(x, dim, index, source, reduce, *, include_self=True):
    if reduce != "sum" or not include_self:
        raise NotImplementedError(f"scatter_reduce {reduce!r} runs through the eager kernel")
    return _scatter(x, dim, index, source, "sum")


@register_lowering(aten.index_put, aten._unsafe_index_put)
def index_put(x, indices, values, accumulate=False):
    iteration, destination = advanced_indexing(x, indices, "index_put")
    value = _value_loader(values, iteration, x.get_dtype())
    return _scatter_buffer(x, iteration, value, destination, "sum" if accumulate else None)

