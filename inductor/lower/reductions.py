"""Lowerings of reductions: sum, mean, prod, amax/amin, argmax/argmin, any/all, var/std
(one Welford pass) and var_mean.

Input: ATen reduction ops with lowered operands, dims and keepdim. Output: realized
`Reduction` buffers (accumulating in float32 for half types and in int64 for integer sums)
followed by pointwise epilogues (division by the count, casts) the scheduler fuses into the
reduction's kernel.
"""
from __future__ import annotations

from typing import Optional

import sympy
import torch

from inductor.ir.nodes import Pointwise, Reduction, TensorBox
from inductor.ir.ops import ops
from inductor.ir.symbols import NotSymbolic, product
from inductor.lower.elementwise import cast, make_pointwise, opmath_dtype
from inductor.lower.registry import register_lowering

aten = torch.ops.aten


def _reduced_dims(x: TensorBox, dims) -> list:
    """The reduced dimensions, wrapped and sorted; none for a 0-d tensor (its dim 0 or -1
    names the tensor itself: eager returns the value as it is)."""
    rank = len(x.get_size())
    if dims is None or (isinstance(dims, (list, tuple)) and len(dims) == 0):
        return list(range(rank))
    if isinstance(dims, int):
        dims = [dims]
    if rank == 0:
        return []
    return sorted({dim + rank if dim < 0 else dim for dim in dims})


# The value of a reduction over no elements (eager raises for max, min, argmax and argmin).
EMPTY_VALUES = {"sum": 0, "prod": 1, "any": False, "all": True, "var_m2": 0,
                "welford_mean": float("nan")}


def make_reduction(x: TensorBox, dims, keepdim: bool, reduction_type: str,
                   dtype: torch.dtype, src_dtype: Optional[torch.dtype] = None) -> TensorBox:
    """Realize `reduction_type` of `x` over `dims`; the body yields `src_dtype` values.

    A reduction over one element or none is a pointwise body instead (the element, its
    position 0, a zero sum of squares; or the empty reduction's value): every code
    generator then computes it as eager does without a degenerate reduction loop."""
    size = x.get_size()
    dims = _reduced_dims(x, dims)
    kept = [dim for dim in range(len(size)) if dim not in dims]
    out_size = [sympy.Integer(1) if dim in dims else size[dim] for dim in range(len(size))] \
        if keepdim else [size[dim] for dim in kept]
    src_dtype = src_dtype or x.get_dtype()
    loader = x.make_loader()
    source = x.get_dtype()
    convert = opmath_dtype(source) != src_dtype and source != src_dtype

    def load(index, rindex):
        full = [None] * len(size)
        outer = [index[dim] for dim in kept] if keepdim else list(index)
        for dim, value in zip(kept, outer):
            full[dim] = value
        for dim, value in zip(dims, rindex):
            full[dim] = value
        value = loader(full)
        return ops.to_dtype(value, src_dtype) if convert else value
    reduced = [size[dim] for dim in dims]
    count = product(reduced)
    if count.is_Integer and int(count) <= 1:
        return TensorBox.create(Pointwise(x.get_device(), dtype, _degenerate_body(
            load, len(reduced), int(count), reduction_type, dtype, src_dtype), out_size))
    reduction = Reduction(x.get_device(), dtype, load, out_size, reduced, reduction_type,
                          src_dtype)
    box = TensorBox.create(reduction)
    box.realize()
    return box


def _degenerate_body(load, reduced_rank: int, count: int, reduction_type: str,
                     dtype: torch.dtype, src_dtype: torch.dtype):
    """The body of a reduction over `count` (0 or 1) elements."""
    if count == 0 and reduction_type not in EMPTY_VALUES:
        raise NotImplementedError(f"{reduction_type} over no elements")  # eager raises too
    zeros = [sympy.Integer(0)] * reduced_rank

    def inner_fn(index):
        if count == 0:
            return ops.constant(EMPTY_VALUES[reduction_type], dtype)
        if reduction_type in ("argmax", "argmin"):
            return ops.constant(0, dtype)
        value = load(index, zeros)
        if reduction_type == "var_m2":  # 0, or NaN for an infinite or NaN element
            deviation = ops.sub(value, value)
            value = ops.mul(deviation, deviation)
        return ops.to_dtype(value, dtype) if dtype != src_dtype else value
    return inner_fn


def _accumulator(dtype: torch.dtype) -> torch.dtype:
    if dtype == torch.bool or not (dtype.is_floating_point or dtype.is_complex):
        return torch.int64
    return opmath_dtype(dtype)


@register_lowering(aten.sum)
def sum_(x, dims=None, keepdim=False, *, dtype=None):
    if dtype is not None:
        x = cast(x, dtype)
    accumulate = _accumulator(x.get_dtype())
    out_dtype = dtype or (torch.int64 if accumulate == torch.int64 else x.get_dtype())
    result = make_reduction(x, dims, keepdim, "sum", accumulate, accumulate)
    return cast(result, out_dtype)


@register_lowering(aten.prod)
def prod(x, dims=None, keepdim=False, *, dtype=None):
    if isinstance(dims, int):
        dims = [dims]
    return _typed_reduction(x, dims, keepdim, "prod", dtype)


def _typed_reduction(x, dims, keepdim, reduction_type, dtype):
    if dtype is not None:
        x = cast(x, dtype)
    accumulate = _accumulator(x.get_dtype())
    out_dtype = dtype or (torch.int64 if accumulate == torch.int64 else x.get_dtype())
    result = make_reduction(x, dims, keepdim, reduction_type, accumulate, accumulate)
    return cast(result, out_dtype)


@register_lowering(aten.mean)
def mean(x, dims=None, keepdim=False, *, dtype=None):
    if dtype is not None:
        x = cast(x, dtype)
    out_dtype = x.get_dtype()
    accumulate = opmath_dtype(out_dtype)
    count = product(x.get_size()[dim] for dim in _reduced_dims(x, dims))
    total = make_reduction(x, dims, keepdim, "sum", accumulate, accumulate)
    return make_pointwise(ops.truediv, total, float(count) if count.is_Integer else count,
                          dtype=out_dtype, compute_dtype=accumulate)


def _extremum(reduction_type: str):
    def lower(x, dims=None, keepdim=False):
        dtype = x.get_dtype()
        result = make_reduction(x, dims, keepdim, reduction_type, opmath_dtype(dtype),
                                opmath_dtype(dtype))
        return cast(result, dtype)
    return lower


register_lowering(aten.amax)(_extremum("max"))
register_lowering(aten.amin)(_extremum("min"))


def _arg_extremum(reduction_type: str):
    def lower(x, dim=None, keepdim=False):
        if dim is None:
            flat = _flatten(x)
            result = make_reduction(flat, [0], False, reduction_type, torch.int64,
                                    opmath_dtype(x.get_dtype()))
            if keepdim:
                from inductor.lower.views import view
                return view(result, [1] * len(x.get_size()))
            return result
        return make_reduction(x, [dim], keepdim, reduction_type, torch.int64,
                              opmath_dtype(x.get_dtype()))
    return lower


def _flatten(x: TensorBox) -> TensorBox:
    from inductor.lower.views import view
    return view(x, [-1])


register_lowering(aten.argmax)(_arg_extremum("argmax"))
register_lowering(aten.argmin)(_arg_extremum("argmin"))


def _extremum_and_position(reduction_type: str):
    """`max.dim` / `min.dim`: the position as argmax / argmin finds it (the first extremum,
    or the first NaN), and the value read back there, which is eager's value to the bit (a
    signed zero among equal zeros, a NaN's payload). Was an eager fallback: `x.max(1)` of
    64x64 took 14 us through the jit against eager's 10, `amax` 2.7 (op sweep max_dim1)."""
    positions_of = _arg_extremum("arg" + reduction_type)

    def lower(x, dim, keepdim=False):
        size = x.get_size()
        if not size or x.get_dtype() == torch.bool:
            raise NotImplementedError(f"{reduction_type}.dim of a 0-d or bool tensor")
        dim = dim + len(size) if dim < 0 else dim
        positions = positions_of(x, dim, keepdim)
        position_loader, source = positions.make_loader(), x.make_loader()

        def inner_fn(index):
            full = list(index) if keepdim else list(index[:dim]) + [0] + list(index[dim:])
            full[dim] = ops.indirect_indexing(position_loader(index), size[dim], check=False)
            return source(full)
        values = Pointwise(x.get_device(), x.get_dtype(), inner_fn, positions.get_size())
        return TensorBox.create(values), positions
    return lower


register_lowering(aten.max.dim)(_extremum_and_position("max"))
register_lowering(aten.min.dim)(_extremum_and_position("min"))


def _logical_reduction(reduction_type: str):
    def lower(x, dims=None, keepdim=False):
        truth = make_pointwise(lambda value: ops.ne(value, ops.constant(0, opmath_dtype(
            x.get_dtype()))), x, dtype=torch.bool, result_dtype=torch.bool) \
            if x.get_dtype() != torch.bool else x
        result = make_reduction(truth, dims, keepdim, reduction_type, torch.bool, torch.bool)
        return result if x.get_dtype() != torch.uint8 else cast(result, torch.uint8)
    return lower


register_lowering(aten.any)(_logical_reduction("any"))
register_lowering(aten.all)(_logical_reduction("all"))


def _variance_parts(x: TensorBox, dims, correction, keepdim):
    dtype = x.get_dtype()
    accumulate = opmath_dtype(dtype)
    dims = _reduced_dims(x, dims)
    count = product(x.get_size()[dim] for dim in dims)
    correction = 1 if correction is None else correction
    m2 = make_reduction(x, dims, keepdim, "var_m2", accumulate, accumulate)
    if count.is_Integer:
        divisor = max(float(count - correction), 0.0)
    elif float(correction).is_integer() and correction <= 1:
        # a product of sizes (each >= 1) less 0 or 1: an int >= 0 at every size (a symbolic
        # size is an int operand; `correction=1.0` from `std()` as well)
        divisor = count - int(correction)
    else:   # n - 0.5, or n - 2 which eager clamps at 0 for small n
        raise NotSymbolic(f"var/std with correction={correction!r} over symbolic sizes")
    variance = make_pointwise(ops.truediv, m2, divisor, dtype=dtype, compute_dtype=accumulate)
    return variance, count, dims, accumulate


@register_lowering(aten.var)
def var(x, dims=None, *, correction=None, keepdim=False):
    return _variance_parts(x, dims, correction, keepdim)[0]


@register_lowering(aten.var_mean)
def var_mean(x, dims=None, *, correction=None, keepdim=False):
    """The mean from the Welford pass, as eager's var_mean (and layer and group norm) take
    it: exact for a row of equal values, where `sum / count` may be an ulp off, which the
    normalisation's `rstd = 1 / sqrt(0 + eps)` amplified to 1.25e-4 where eager has 0
    (graph fuzzer seeds 12440, 12769, 61103)."""
    variance, count, dims, accumulate = _variance_parts(x, dims, correction, keepdim)
    average = make_reduction(x, dims, keepdim, "welford_mean", accumulate, accumulate)
    return variance, cast(average, x.get_dtype()) if x.get_dtype() != accumulate else average
