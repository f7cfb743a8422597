"""Stage "decompose" (BatchNorm): batch normalization as ATen ops rounding as eager's CPU kernel.

Input: the arguments of `aten.native_batch_norm` (fake tensors while `make_fx` traces). Output:
ATen ops computing its three results and updating the running statistics, bit for bit as
ATen's CPU kernel (`batch_norm_cpu_update_stats_template` and `batch_norm_cpu_transform_input`,
`aten/src/ATen/native/Normalization.cpp` and `native/cpu/batch_norm_kernel.cpp`) where that is
reproducible, else None (the caller keeps torch's general decomposition).

What the kernel computes for a float32 input, per channel c over the n = numel / C elements:

    sum     = sum of x in float64                  mean   = float(sum / n)
    var_sum = float(sum in float64 of float((x - mean) * (x - mean)))
    invstd  = float(1 / sqrt(float64(var_sum / n) + eps))        (var_sum / n in float)
    running_mean = float(m * mean) + float((1 - m) * running_mean)        (m = float(momentum))
    running_var  = float(float64(m) * float64(var_sum / (n - 1)) + float64((1 - m) * rv))
    alpha = invstd * weight,  beta = fma(-mean, alpha, bias),  out = fma(x, alpha, beta)

and in evaluation mode `invstd = 1 / sqrt(running_var + eps)` in float, then the same alpha,
beta and out. The float64 sums run in another order than the kernel's sequential loop, which
can change the float64 result in its last bits; rounded to float32 it almost never shows.
Reproduced on CPU, float32 throughout: in training mode contiguous inputs with more than one
element per sample and channel (N, C, *); in evaluation mode every contiguous input, (N, C) and
(N, C, 1, 1) included (the kernel takes other loops there but computes the same fma per
element; measured bitwise). Not reproduced: training-mode inputs of shape (N, C) and
channels-last ones (the kernel sums them in float32 partial sums, one per thread of
`torch.get_num_threads()`), other dtypes, and CUDA (cuDNN): those keep torch's decomposition.
"""
from __future__ import annotations

import contextlib
import struct
from typing import Optional

import torch


def _reproducible(input, weight, bias, running_mean, running_var, training: bool) -> bool:
    """Whether the kernel's rounding is reproduced (module docstring). Evaluation mode: every
    contiguous float32 input of two or more dimensions, whatever its sizes; training mode also
    needs more than one element per sample and channel, which over symbolic sizes is a
    condition on them (asked only there: asking made a symbolic trace of an evaluation graph
    guard on `H * W > 1` and fall back to one compile per size)."""
    tensors = [value for value in (input, weight, bias, running_mean, running_var)
               if value is not None]
    if not (input.device.type == "cpu" and input.dim() >= 2 and input.is_contiguous()
            and all(value.dtype == torch.float32 for value in tensors)):
        return False
    return not training or (input.dim() >= 3 and
                            input.numel() // (input.shape[0] * input.shape[1]) > 1)


def _float32(value: float) -> float:
    """`value` rounded to float32 as a Python float. Not through `torch.tensor`: under a trace
    that makes a tensor constant, which a symbolic trace refuses (a per-size fallback)."""
    return struct.unpack("f", struct.pack("f", value))[0]


def _per_channel(value: torch.Tensor, dim: int) -> torch.Tensor:
    return value.view([1, -1] + [1] * (dim - 2))


def _affine(input, weight, bias, mean, invstd):
    """out = fma(x, alpha, beta) with alpha = invstd * weight, beta = fma(-mean, alpha, bias)
    (`addcmul` lowers to exactly these fused multiply-adds).

    Over symbolic sizes, torch's meta of the last `addcmul` orders the output's dims by
    comparing the contiguous input's strides against (1, C, 1, 1) operands, which asks
    `W != H * W` (is H 1?), a guard the front end never made: the symbolic trace fell back to
    one compile per size. The answer cannot change the result (the output is contiguous for
    every size; a dim of size 1 has no stride that matters), so the op runs without recording
    guards (`_unguarded_layout`)."""
    alpha = invstd * weight if weight is not None else invstd
    base = bias if bias is not None else torch.zeros_like(mean)
    beta = torch.addcmul(base, mean, alpha, value=-1)
    dim = input.dim()
    with _unguarded_layout(input):
        return torch.addcmul(_per_channel(beta, dim), input, _per_channel(alpha, dim))


def _unguarded_layout(input: torch.Tensor):
    """A context in which the ShapeEnv of `input`'s symbolic sizes records no guard (torch's
    `suppress_guards`), for `_affine`'s last op only: its output is contiguous for every
    size, so the layout question torch's meta asks is answered from the size hints."""
    for size in input.shape:
        if isinstance(size, torch.SymInt):
            return size.node.shape_env.suppress_guards()
    return contextlib.nullcontext()


def training(input, weight, bias, running_mean, running_var, momentum: float,
             eps: float) -> Optional[tuple]:
    """(out, save_mean, save_invstd, new running mean or None, new running variance or None)
    of training-mode batch norm, computed without writing anything, or None where the
    kernel's rounding is not reproduced (module docstring)."""
    if not _reproducible(input, weight, bias, running_mean, running_var, training=True):
        return None
    channels = input.shape[1]
    count = input.numel() // channels
    dims = [0] + list(range(2, input.dim()))
    mean = (input.to(torch.float64).sum(dims) / count).to(torch.float32)
    centered = input - _per_channel(mean, input.dim())
    var_sum = (centered * centered).to(torch.float64).sum(dims).to(torch.float32)
    invstd = torch.reciprocal(torch.sqrt((var_sum / count).to(torch.float64) + eps)) \
        .to(torch.float32)
    scale = _float32(momentum)
    keep = _float32(1 - scale)
    new_mean = new_var = None
    if running_mean is not None:
        new_mean = mean * scale + running_mean * keep
    if running_var is not None:
        unbiased = (var_sum / (count - 1)).to(torch.float64)
        new_var = (unbiased * scale + (running_var * keep).to(torch.float64)).to(torch.float32)
    return _affine(input, weight, bias, mean, invstd), mean, invstd, new_mean, new_var


def updating(decomposition, functional: bool):
    """A decomposition of one of ATen's training-mode batch norms that takes the exact path
    where it applies and falls back to `decomposition` elsewhere.

    `functional`: the op returns the new running statistics after its three results
    (`_native_batch_norm_legit_functional`, what functionalization makes of the others);
    otherwise it writes them into `running_mean` and `running_var` (`native_batch_norm`,
    `_native_batch_norm_legit`, `_batch_norm_with_update`, whose fourth result, a reserve
    buffer, is empty on CPU)."""
    def decompose(input, weight, bias, running_mean, running_var, *rest):
        training_flag, momentum, eps = rest if len(rest) == 3 else (True,) + tuple(rest)
        exact = training(input, weight, bias, running_mean, running_var, momentum, eps) \
            if training_flag else None
        if exact is None:
            return decomposition(input, weight, bias, running_mean, running_var, *rest)
        out, mean, invstd, new_mean, new_var = exact
        if functional:
            return out, mean, invstd, new_mean, new_var
        if new_mean is not None:
            running_mean.copy_(new_mean)
        if new_var is not None:
            running_var.copy_(new_var)
        if len(rest) == 2:   # _batch_norm_with_update: (out, mean, invstd, reserve)
            return out, mean, invstd, input.new_empty((0,), dtype=torch.uint8)
        return out, mean, invstd
    return decompose


def evaluation(input, weight, bias, running_mean, running_var,
               eps: float) -> Optional[torch.Tensor]:
    """The output of evaluation-mode batch norm, or None where not reproduced."""
    if not _reproducible(input, weight, bias, running_mean, running_var, training=False):
        return None
    invstd = torch.reciprocal(torch.sqrt(running_var + eps))
    return _affine(input, weight, bias, running_mean, invstd)


def evaluating(decomposition, reserve: bool):
    """A decomposition of one of ATen's evaluation-mode batch norms that computes the output
    exactly where it applies (`evaluation`), with the other results the CPU kernel and
    `decomposition` give there (empty statistics; with `reserve`, an empty uint8 reserve
    buffer), and is `decomposition` elsewhere. `_native_batch_norm_legit_no_training` and
    `_batch_norm_no_update` (`reserve`) take (input, weight, bias, running_mean, running_var,
    momentum, eps); torch's Python dispatcher, which symbolic traces run under, routes an
    evaluation `F.batch_norm` to the first, not to `native_batch_norm`. `decomposition` is
    not traced where the exact output applies: its output went unused and doubled the
    trace's work on these ops."""
    def decompose(input, weight, bias, running_mean, running_var, momentum, eps):
        exact = evaluation(input, weight, bias, running_mean, running_var, eps)
        if exact is None:
            return decomposition(input, weight, bias, running_mean, running_var, momentum,
                                 eps)
        statistics = (input.new_zeros((0,)), input.new_zeros((0,)))
        if reserve:
            return (exact, *statistics, input.new_empty((0,), dtype=torch.uint8))
        return (exact, *statistics)
    return decompose
