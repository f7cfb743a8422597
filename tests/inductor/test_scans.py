"""Scans (`cumsum`, `cumprod`, `logcumsumexp`) in the C++ backend: a `ScanBuffer` kernel of
their own instead of eager's kernel, the same bits as eager.

Eager's CPU kernels accumulate each line in order, float32 in float64 and half types in
float32 (checked here against float64 cumsums of the same values), integers and booleans in
int64; the kernel does the same, so results are compared bit for bit (`torch.equal`), over
dtypes, shapes, every dim (negative ones included), `dtype=`, 0-d and empty tensors, and
under symbolic sizes. Pointwise producers run inside the scan's kernel.
"""
import copy

import numpy as np
import pytest
import torch

import inductor
from tests.inductor.conftest import compile_function
from tests.inductor.symbolic_graphs import symbolic_graph
from tests.inductor.test_dynamic_sizes import check_sizes

SHAPES = [(7,), (5, 9), (3, 70, 4), (2, 3, 33, 5), (1, 40, 1)]
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTEGERS = [torch.int64, torch.int32, torch.int8, torch.uint8, torch.bool]


def _values(shape, dtype, seed=0):
    generator = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=generator) > 0.5
    if not dtype.is_floating_point:
        return torch.randint(0, 100, shape, generator=generator).to(dtype)
    return (torch.randn(shape, generator=generator) * 3).to(dtype)


def _same_bits(function, *inputs):
    compiled = compile_function(function, *copy.deepcopy(inputs))
    actual, expected = compiled(*copy.deepcopy(inputs)), function(*copy.deepcopy(inputs))
    actual = actual if isinstance(actual, tuple) else (actual,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    for got, wanted in zip(actual, expected):
        assert got.dtype == wanted.dtype and got.shape == wanted.shape
        assert torch.equal(got, wanted) or (wanted.is_floating_point() and torch.equal(
            got.nan_to_num(0.5, 7.0, -7.0), wanted.nan_to_num(0.5, 7.0, -7.0)) and
            torch.equal(got.isnan(), wanted.isnan())), (got - wanted).abs().max()
    return compiled


def _no_fallback(compiled):
    assert not compiled.report.fallback_ops, compiled.report.summary()


@pytest.mark.parametrize("dtype", FLOATS + INTEGERS)
@pytest.mark.parametrize("shape", SHAPES)
def test_cumsum_matches_eager_bit_for_bit(dtype, shape):
    x = _values(shape, dtype)
    for dim in range(-len(shape), len(shape)):
        _no_fallback(_same_bits(lambda x, dim=dim: torch.cumsum(x, dim), x))


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.int32, torch.bool])
def test_cumprod_matches_eager_bit_for_bit(dtype):
    x = _values((4, 30, 3), dtype)
    x = x if not dtype.is_floating_point else (x / 3 + 1).clamp(0.6, 1.4).to(dtype)
    for dim in (0, 1, -1):
        _no_fallback(_same_bits(lambda x, dim=dim: torch.cumprod(x, dim), x))


@pytest.mark.parametrize("dtype", FLOATS)
def test_logcumsumexp_matches_eager_bit_for_bit(dtype):
    x = _values((3, 50, 5), dtype)
    x[0, 3], x[1, 7], x[2, 9:12] = float("inf"), float("nan"), float("-inf")
    x[:, 20:23, 1] = float("-inf")
    for dim in (0, 1, 2, -2):
        _no_fallback(_same_bits(lambda x, dim=dim: torch.logcumsumexp(x, dim), x))


def test_long_float32_lines_accumulate_in_float64():
    x = torch.randn(3, 20000) + 0.1
    assert torch.equal(x.cumsum(1), x.double().cumsum(1).float())   # eager's accumulator
    _same_bits(lambda x: x.cumsum(1), x)
    _same_bits(lambda x: x.cumsum(0), x.t().contiguous())


def test_half_lines_accumulate_in_float32():
    x = torch.randn(2, 3000, generator=torch.Generator().manual_seed(0)).half()
    in_float32 = np.cumsum(x.float().numpy(), axis=1, dtype=np.float32)   # sequential
    assert torch.equal(x.cumsum(1), torch.from_numpy(in_float32).half())
    assert not torch.equal(x.cumsum(1), x.float().cumsum(1).half())     # (float64 there)
    _same_bits(lambda x: x.cumsum(1), x)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.int32, torch.int8,
                                   torch.float32])
def test_dtype_argument(dtype):
    for source in (torch.float32, torch.int64, torch.bool):
        x = _values((6, 11), source)
        _same_bits(lambda x: x.cumsum(1, dtype=dtype), x)
        _same_bits(lambda x: x.cumprod(0, dtype=dtype), x)


def test_zero_dim_empty_and_single_element_lines():
    _same_bits(lambda x: x.cumsum(0), torch.tensor(2.5))
    _same_bits(lambda x: x.cumsum(-1), torch.tensor(3))
    _same_bits(lambda x: torch.logcumsumexp(x, 0), torch.tensor(-1.5))
    _same_bits(lambda x: x.cumsum(1), torch.randn(4, 0))
    _same_bits(lambda x: x.cumsum(0), torch.randn(0, 5))
    _same_bits(lambda x: x.cumprod(1), torch.randn(5, 1))


def test_out_of_range_dim_raises_as_eager():
    with pytest.raises(IndexError):
        torch.randn(3, 4).cumsum(2)
    with pytest.raises(IndexError):
        compile_function(lambda x: x.cumsum(2), torch.randn(3, 4))(torch.randn(3, 4))


def test_producers_fuse_into_the_scan_kernel():
    def function(x, y):
        return torch.cumsum(torch.abs(x) * y + 1, 1) * 2     # exactly rounded producers

    compiled = _same_bits(function, torch.randn(8, 300), torch.randn(300))
    _no_fallback(compiled)
    assert compiled.report.kernel_count == 2, compiled.report.summary()   # scan, then `* 2`
    assert "acc[" in compiled.report.source


def test_non_contiguous_input():
    x = torch.randn(40, 6)
    _same_bits(lambda x: x.t().cumsum(1), x)
    _same_bits(lambda x: x[:, ::2].cumsum(0), x)


def test_symbolic_sizes():
    def function(x):
        return x.cumsum(1) * 2, torch.cumsum(x + 1, 0), torch.logcumsumexp(x, 1)

    def make(n):
        return [torch.randn(n, n % 5 + 3)]
    compiled = check_sizes(function, make, [[0, 1]], sizes=(5, 2, 3, 13, 97))
    _no_fallback(compiled)


def test_symbolic_sizes_match_bit_for_bit():
    x = torch.randn(9, 40)
    compiled = inductor.compile_fx(symbolic_graph(lambda x: x.cumsum(0), [x], [[0, 1]]), [x])
    for rows, columns in ((9, 40), (3, 1000), (100, 3)):
        y = torch.randn(rows, columns)
        assert torch.equal(compiled(y), y.cumsum(0))
