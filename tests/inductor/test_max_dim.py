"""`max(dim)` / `min(dim)` lowered as argmax / argmin plus the value read back at the position
(lower/reductions.py), where they were eager fallbacks (op sweep max_dim1, 64x64: 14 us
through the jit against eager's 10). Values and positions are compared with eager bit for
bit: NaN (first NaN's position), ties (first position), equal zeros of both signs (eager's
value is the element at its position), integers, bfloat16, float64, several dims, keepdim,
a transposed input, a reduced dim of one element; a zero-length dim raises as eager does."""
import pytest
import torch

from tests.inductor.conftest import compile_function


def _bits(tensor):
    widths = {torch.float32: torch.int32, torch.float64: torch.int64,
              torch.bfloat16: torch.int16}
    return tensor.view(widths[tensor.dtype]) if tensor.dtype in widths else tensor


def _same(function, x):
    compiled = compile_function(function, x)
    expected, actual = function(x), compiled(x)
    for want, got in zip(expected, actual):
        assert want.dtype == got.dtype and want.shape == got.shape
        assert torch.equal(_bits(got.contiguous()), _bits(want.contiguous())), (got, want)
    return compiled


def _both(result):
    return result[0], result[1]


def _floats(rows, columns, dtype=torch.float32, seed=0):
    generator = torch.Generator().manual_seed(seed)
    values = torch.randint(-3, 4, (rows, columns), generator=generator).to(torch.float64)
    values[::3] = torch.randn(values[::3].shape, generator=generator, dtype=torch.float64)
    values[1, 5 % columns] = float("nan")
    values[2, :] = 0.0
    values[2, ::2] = -0.0
    values[4 % rows, :] = -0.0
    values[5 % rows, 3 % columns:] = float("nan")
    values[6 % rows, :] = float("-inf")
    return values.to(dtype)


@pytest.mark.parametrize("reduction", ["max", "min"])
@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_values_and_positions_match_eager(reduction, dim, keepdim):
    def function(x):
        result = getattr(x, reduction)(dim, keepdim=keepdim)
        return result.values, result.indices
    compiled = _same(function, _floats(37, 70))
    assert compiled.report.fallback_ops == {}


@pytest.mark.parametrize("dtype", [torch.float64, torch.bfloat16, torch.int64, torch.int32])
def test_other_dtypes(dtype):
    x = _floats(9, 300, torch.float64)
    if not dtype.is_floating_point:
        x = torch.nan_to_num(x, nan=7, neginf=-9).to(dtype)
    _same(lambda v: _both(torch.max(v, 1)), x.to(dtype))
    _same(lambda v: _both(torch.min(v, 0)), x.to(dtype))


def test_values_alone_transposed_three_dims_and_single_elements():
    _same(lambda x: (x.max(1).values * 2,), _floats(64, 64))
    _same(lambda x: (x.t().min(1).values,), _floats(33, 20))
    x = _floats(12, 30).view(3, 4, 30)
    _same(lambda v: _both(v.max(1)), x)
    _same(lambda v: _both(v.min(-1, keepdim=True)), x)
    _same(lambda v: _both(v.max(1)), _floats(5, 1))


def test_a_zero_length_dim_raises_as_eager():
    x = torch.zeros(3, 0)
    with pytest.raises(IndexError):
        x.max(1)
    with pytest.raises((IndexError, RuntimeError)):
        compile_function(lambda v: _both(v.max(1)), x)(x)
