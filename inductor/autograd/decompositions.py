"""The decomposition table used while tracing joint and inference graphs.

Input: nothing. Output: a dict from ATen operator overloads to Python decompositions, handed to
`make_fx`. The inductor's own table (`inductor.decompose.decomposition_table()`) is used when it
exists, so that the graphs given to `compile_inner` are in the form the code generator expects;
until then a local table built from `torch._decomp`'s core ATen decompositions.

On top of either, `native_dropout` on CPU is decomposed the way eager CPU dropout draws its
mask (a Bernoulli sample of the input's shape, then a scale), so that for the same seed a
compiled training step drops exactly the elements eager drops. On other devices eager uses a
fused kernel whose stream cannot be reproduced, and the table's own decomposition stays.
"""
from __future__ import annotations

import functools
from typing import Callable

import torch

aten = torch.ops.aten


@functools.lru_cache(maxsize=None)
def _local_table() -> dict:
    from torch._decomp import core_aten_decompositions
    return dict(core_aten_decompositions())


def decomposition_table() -> dict[object, Callable]:
    """The table in effect: the inductor's when it has one, else the local one, with dropout
    drawing its mask as eager does on CPU."""
    try:
        from inductor.decompose import decomposition_table as inductor_table
    except ImportError:
        table = dict(_local_table())
    else:
        table = dict(inductor_table())
    fallback = table.get(aten.native_dropout.default)
    table[aten.native_dropout.default] = functools.partial(_native_dropout, fallback)
    return table


def _native_dropout(fallback, input: torch.Tensor, p: float, train: bool):
    """`native_dropout` drawing its mask with the same random numbers as eager CPU dropout."""
    if input.device.type != "cpu" or not train or p == 0 or p == 1:
        if fallback is not None:
            return fallback(input, p, train)
        return NotImplemented
    keep = aten.bernoulli.p(aten.empty_like.default(input), 1 - p)
    output = aten.mul.Tensor(input, aten.div.Scalar(keep, 1 - p))
    return output, aten.ne.Scalar(keep, 0)
