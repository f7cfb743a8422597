"""Stage "decompose" (moments): var, std, var_mean and std_mean as eager's CPU kernels compute them.

Input: the arguments of `aten.var`, `aten.std`, `aten.var_mean` or `aten.std_mean` (fake
tensors while `make_fx` traces). Output: ATen ops computing the same results, or NotImplemented
(the caller's next choice: torch's decomposition or the op's own lowering).

On the CPU, eager's variance kernels (`std_var_kernel_impl` and `std_var_all_cpu`,
`aten/src/ATen/native/cpu/ReduceOpsKernel.cpp` and `native/ReduceOps.cpp`) accumulate a
float32, float16 or bfloat16 input in float64: the sum of squared deviations, its division by
`n - correction`, std's square root and the mean are float64, and only the results are rounded
to the input's dtype. Accumulated in float32, a sum of squares above 3.4e38 overflowed: the
std of values near 1e34 came back inf (and NaN downstream) where eager's is 1.2e34 (program
fuzzer inductor seed 22856). So a CPU input is converted to float64 first, and the lowering's
one Welford pass runs in float64 as eager's does. CUDA's kernels accumulate in float (the
input's `opmath`): other devices keep the lowering's float32 pass.

The normalizations (layer norm, group norm, batch norm) decompose into `var_mean`, but eager's
CPU kernels for them accumulate their moments in float: while their decomposition runs
(`float_moments`), these decompositions step aside.
"""
from __future__ import annotations

import contextlib
import functools
import threading

import torch

aten = torch.ops.aten

_WIDENED = (torch.float32, torch.float16, torch.bfloat16)
_state = threading.local()


def _widened(x) -> bool:
    return x.device.type == "cpu" and x.dtype in _WIDENED and \
        not getattr(_state, "normalizing", 0)


def float_moments(decomposition):
    """`decomposition` (of a normalization) tracing its moments in the input's opmath, as
    eager's normalization kernels compute them."""
    @functools.wraps(decomposition)
    def normalization(*args, **kwargs):
        _state.normalizing = getattr(_state, "normalizing", 0) + 1
        try:
            return decomposition(*args, **kwargs)
        finally:
            _state.normalizing -= 1
    return normalization


@contextlib.contextmanager
def opmath_moments():
    """Trace var/std moments in the input's opmath, as eager's CUDA kernels accumulate them,
    whatever the tensors' device (tests print GPU kernels from CPU tensors)."""
    _state.normalizing = getattr(_state, "normalizing", 0) + 1
    try:
        yield
    finally:
        _state.normalizing -= 1


def moments(take_sqrt: bool, with_mean: bool, fallback=None):
    """The decomposition of var (std with `take_sqrt`; var_mean / std_mean with `with_mean`)
    for the `.correction` overloads; `fallback` (torch's decomposition) where eager does not
    accumulate in float64."""
    def decomposition(x, dim=None, *, correction=None, keepdim=False):
        if not _widened(x):
            if fallback is None:
                return NotImplemented
            return fallback(x, dim, correction=correction, keepdim=keepdim)
        wide = x.to(torch.float64)
        if with_mean:
            variance, mean = aten.var_mean.correction(wide, dim, correction=correction,
                                                      keepdim=keepdim)
        else:
            variance = aten.var.correction(wide, dim, correction=correction, keepdim=keepdim)
        spread = (torch.sqrt(variance) if take_sqrt else variance).to(x.dtype)
        return (spread, mean.to(x.dtype)) if with_mean else spread
    return decomposition


def add_to(table: dict) -> None:
    """Enter the decompositions into `table`, around its normalizations."""
    for overload, value in list(table.items()):
        if any(norm in overload.name() for norm in ("batch_norm", "layer_norm", "group_norm")):
            table[overload] = float_moments(value)
    for overload, take_sqrt, with_mean in (
            (aten.var.correction, False, False), (aten.std.correction, True, False),
            (aten.var_mean.correction, False, True), (aten.std_mean.correction, True, True)):
        table[overload] = moments(take_sqrt, with_mean, table.get(overload))
