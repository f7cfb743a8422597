"""Lowerings of random numbers for Triton kernels: `rand`, `randn`, their `_like` forms and
`bernoulli` with a probability (dropout after decomposition).

Input: ATen random ops. Output: `Pointwise` bodies computing `ops.random(seed, offset, kind)`:
a counter-based generator (Philox) keyed by a seed and indexed by the element's position,
so the values fuse into their readers like any other pointwise math. Each op draws its seed
on the device with `torch.randint` from torch's generator when the graph runs, so results are
reproducible per `torch.manual_seed` and differ from call to call (CUDA graphs included).
They are not eager's values (neither are torch.compile's). Code generators without
`ops.random` (the C++ backend) keep these ops as eager fallbacks.
"""
from __future__ import annotations

import sympy
import torch

from inductor.config import config
from inductor.ir.layout import Layout
from inductor.ir.nodes import ExternKernel, Pointwise, TensorBox, current_graph
from inductor.ir.ops import ops
from inductor.lower.registry import register_lowering

aten = torch.ops.aten
SEED_LIMIT = 2 ** 62


def draw_seed(device: torch.device) -> torch.Tensor:
    """One int64 seed on `device` from torch's generator (runs with the graph)."""
    return torch.randint(SEED_LIMIT, (1,), dtype=torch.int64, device=device)


def _seed_buffer(device: torch.device):
    layout = Layout(device, torch.int64, [1], [1])
    node = ExternKernel(None, layout, draw_seed, [], ([device], {}), "library", device)
    current_graph().register_buffer(node)
    return node


def random_box(size, dtype: torch.dtype, device: torch.device, kind: str,
               transform=None) -> TensorBox:
    """A tensor of `size` of `kind` ("rand" or "randn") values, optionally transformed
    (`transform(value) -> value`), converted to `dtype`."""
    device = torch.device(device)
    if not config.uses_triton(device) or not dtype.is_floating_point and transform is None:
        raise NotImplementedError("random numbers are generated in Triton kernels only")
    seed = _seed_buffer(device).get_name()
    size = [int(extent) for extent in size]
    strides, running = [], 1
    for extent in reversed(size):
        strides.insert(0, running)
        running *= extent

    def inner_fn(index):
        position = sum((value * stride for value, stride in zip(index, strides)),
                       sympy.Integer(0))
        offset = ops.index_expr(position, torch.int64)
        value = ops.random(ops.load(seed, sympy.Integer(0)), offset, kind)
        if transform is not None:
            value = transform(value)
        return ops.to_dtype(value, dtype)
    return TensorBox.create(Pointwise(device, dtype, inner_fn, size))


@register_lowering(aten.rand)
def rand(size, *, dtype=None, device=None, **_ignored):
    return random_box(size, dtype or torch.get_default_dtype(), device or "cpu", "rand")


@register_lowering(aten.randn)
def randn(size, *, dtype=None, device=None, **_ignored):
    return random_box(size, dtype or torch.get_default_dtype(), device or "cpu", "randn")


@register_lowering(aten.rand_like)
def rand_like(x, *, dtype=None, device=None, **_ignored):
    return random_box(x.get_size(), dtype or x.get_dtype(), device or x.get_device(), "rand")


@register_lowering(aten.randn_like)
def randn_like(x, *, dtype=None, device=None, **_ignored):
    return random_box(x.get_size(), dtype or x.get_dtype(), device or x.get_device(), "randn")


@register_lowering(aten.bernoulli.p)
def bernoulli(x, p=0.5, *, generator=None):
    if generator is not None:
        raise NotImplementedError("bernoulli with an explicit generator")
    probability = float(p)

    def below(value):
        return ops.to_dtype(ops.lt(value, ops.constant(probability, torch.float32)),
                            torch.float32)
    return random_box(x.get_size(), x.get_dtype(), x.get_device(), "rand", transform=below)
