"""The decomposition table used while tracing joint and inference graphs.

Input: nothing. Output: a dict from ATen operator overloads to Python decompositions, handed to
`make_fx`. The inductor's own table (`inductor.decompose.decomposition_table()`) is used when it
exists, so that the graphs given to `compile_inner` are in the form the code generator expects;
until then a local table built from `torch._decomp`'s core ATen decompositions.

Captured `torch.lstm` calls are traced as matrix products and pointwise gates on every device
(`LstmAsGates`): torch's decomposition picks oneDNN's fused `mkldnn_rnn_layer` on CPU when the input
does not require grad, and that op's workspace, needed by its backward, comes back undefined
from a traced forward (a compiled LSTM training step failed in its backward).

Also, `native_dropout` on CPU is decomposed the way eager CPU dropout draws its
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


class LstmAsGates(torch.overrides.TorchFunctionMode):
    """While tracing, `torch.lstm` calls (the padded-input form, as `nn.LSTM` makes them) run
    `_lstm_as_gates`. torch's own LSTM decomposition runs at the autograd key, before
    `make_fx`'s table is consulted, so the call is redirected above it."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func is torch.lstm and len(args) == 9 and not kwargs and \
                isinstance(args[1], (tuple, list)) and _reference_lstm_helpers() is not None:
            return _lstm_as_gates(*args)
        return func(*args, **kwargs)


def _reference_lstm_helpers():
    """torch's one-layer LSTM pieces (`torch._decomp.decompositions`), or None where absent."""
    from torch._decomp import decompositions as reference
    names = ("gather_params", "_rnn_helper", "one_layer_lstm")
    if not all(hasattr(reference, name) for name in names):
        return None
    return reference


def _lstm_as_gates(input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
                   batch_first):
    """`aten.lstm.input` as matrix products and gates, layer by layer (never oneDNN's fused
    layer, whose backward needs a workspace a traced forward does not produce)."""
    reference = _reference_lstm_helpers()
    params = reference.gather_params(params, has_biases, hx[0].size(2) != hx[1].size(2))
    hidden = list(zip(hx[0], hx[1]))
    out, final = reference._rnn_helper(input, hidden, params, has_biases, num_layers, dropout,
                                       train, bidirectional, batch_first,
                                       reference.one_layer_lstm)
    final = list(zip(*final))
    return out, torch.stack(final[0], 0), torch.stack(final[1], 0)


def _native_dropout(fallback, input: torch.Tensor, p: float, train: bool):
    """`native_dropout` drawing its mask with the same random numbers as eager CPU dropout:
    eager fills `empty_like(input)` (the input's memory layout) with Bernoulli samples in memory
    order, so the sample is drawn contiguous in that physical order, then permuted back."""
    if input.device.type != "cpu" or not train or p == 0 or p == 1:
        if fallback is not None:
            return fallback(input, p, train)
        return NotImplemented
    order = _memory_order(input)
    physical = [input.shape[dimension] for dimension in order]
    noise = aten.bernoulli.p(aten.empty.memory_format(physical, dtype=input.dtype,
                                                      device=input.device), 1 - p)
    keep = aten.permute.default(noise, _inverse(order))
    output = aten.mul.Tensor(input, aten.div.Scalar(keep, 1 - p))
    return output, aten.ne.Scalar(keep, 0)


def _memory_order(tensor: torch.Tensor) -> list[int]:
    """Dimensions from outermost to innermost in memory, where `empty_like` would keep the
    tensor's strides (non-overlapping and dense); else the logical order (contiguous)."""
    dimensions = list(range(tensor.dim()))
    order = sorted(dimensions, key=lambda dimension: -tensor.stride(dimension))
    expected = 1
    for dimension in reversed(order):
        size = tensor.shape[dimension]
        if size != 1 and tensor.stride(dimension) != expected:
            return dimensions
        expected *= size
    return order


def _inverse(order: list[int]) -> list[int]:
    inverse = [0] * len(order)
    for position, dimension in enumerate(order):
        inverse[dimension] = position
    return inverse
