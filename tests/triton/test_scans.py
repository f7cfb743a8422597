"""Scans (`cumsum`, `cumprod`) on the Triton backend: one persistent kernel per scan
(`codegen/triton/scan.py`, `tl.associative_scan` over each line), CPU tensors through
Triton's interpreter and CUDA tensors where a GPU is present.

The interpreter scans each line in order in the accumulation dtype of eager's CPU kernels
(float32 in float64), so on CPU the results are eager's bits; GPUs combine in a tree and are
compared with tolerance. `logcumsumexp`, lines longer than `TRITON_LINE` and symbolic line
lengths run eager's kernel (a counted fallback).
"""
import copy

import pytest
import torch

from tests.inductor.test_dynamic_sizes import assert_same
from tests.inductor.symbolic_graphs import symbolic_graph
from tests.triton.conftest import DEVICES, check_same, compile_function, kernel_source

import inductor


def _values(shape, dtype, device):
    generator = torch.Generator().manual_seed(0)
    if dtype == torch.bool:
        values = torch.rand(shape, generator=generator) > 0.5
    elif not dtype.is_floating_point:
        values = torch.randint(-50, 50, shape, generator=generator).to(dtype)
    else:
        values = (torch.randn(shape, generator=generator) * 3).to(dtype)
    return values.to(device)


def _check(function, x):
    if x.device.type == "cuda":
        return check_same(function, x, atol=1e-4, rtol=1e-4)
    compiled = compile_function(function, copy.deepcopy(x))
    actual, expected = compiled(copy.deepcopy(x)), function(copy.deepcopy(x))
    assert actual.dtype == expected.dtype and torch.equal(actual, expected)
    return compiled


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int32, torch.int64,
                                   torch.bool])
@pytest.mark.parametrize("shape", [(9,), (5, 70), (3, 20, 4)])
def test_cumsum(device, dtype, shape):
    x = _values(shape, dtype, device)
    for dim in range(-len(shape), len(shape)):
        compiled = _check(lambda x, dim=dim: torch.cumsum(x * 2, dim) + 1, x)
        assert not compiled.report.fallback_ops, compiled.report.summary()
        assert "tl.associative_scan(" in kernel_source(compiled)


@pytest.mark.parametrize("device", DEVICES)
def test_cumprod_and_dtype_argument(device):
    x = (_values((4, 30), torch.float32, device) / 3 + 1).clamp(0.6, 1.4)
    _check(lambda x: torch.cumprod(x, 1), x)
    _check(lambda x: torch.cumprod(x, 0, dtype=torch.float64), x)
    _check(lambda x: torch.cumsum(x, 1, dtype=torch.int64), x * 10)


@pytest.mark.parametrize("device", DEVICES)
def test_lines_constant_along_the_scan(device):
    """A scanned value that does not vary along the line (a literal, a row's value, OPT's
    `ones(...).cumsum(1)` position ids) is a scalar or a [XBLOCK, 1] block: it is spread over
    the whole block before the scan (a size-1 axis scanned to the value itself, and sm_90
    rejects axis 1 of a scalar)."""
    x = _values((4, 128), torch.float32, device)
    _check(lambda x: x[:, :1].expand(4, 128).cumsum(1), x)
    _check(lambda x: x[:, 3:4].expand(4, 128).cumprod(1), x / 4 + 1)
    _check(lambda x: x[:1, :].expand(4, 128).cumsum(1), x)
    _check(lambda x: torch.ones(4, 128, device=x.device).cumsum(1) + x, x)
    _check(lambda x: torch.ones(3, 128, dtype=torch.int64, device=x.device).cumsum(1)
           + x[:3].long(), x)


@pytest.mark.parametrize("device", DEVICES)
def test_eager_kernel_where_no_triton_scan(device):
    x = _values((4, 30), torch.float32, device)
    compiled = _check(lambda x: torch.logcumsumexp(x, 1), x)
    assert compiled.report.fallback_ops


@pytest.mark.parametrize("device", DEVICES)
def test_symbolic_lines(device):
    def function(x):
        return x.cumsum(1) * 2
    x = _values((5, 24), torch.float32, device)
    compiled = inductor.compile_fx(symbolic_graph(function, [x], [[0]]), [x])
    assert not compiled.report.fallback_ops, compiled.report.summary()
    for rows in (5, 2, 13):
        y = _values((rows, 24), torch.float32, device)
        assert_same(compiled(y), function(y))
