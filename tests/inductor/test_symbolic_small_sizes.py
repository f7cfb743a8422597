"""A graph compiled over symbolic sizes assumed each of them at least 2 (the ShapeEnv's 0/1
rule: dynamo never hands such a graph a 0 or a 1, but `inductor.compile_fx` may be called
straight). `x.t()` of a (1, n) input has eager's strides; a variance over a size-1 axis is
not eager's nan (found by S2, issue 23): a strict xfail until such calls run per-size variants (a check of
the bound sizes in the wrapper; S1's tests expect sizes 0/1 to run the symbolic code, so it
needs its own fallback reason). Dynamo and torch.compile never hand such a graph a 0 or 1
for a symbolic dimension (their 0/1 specialisation guards it)."""
import pytest
import torch

import inductor
from tests.inductor.symbolic_graphs import symbolic_graph


def transpose_plus_one(x):
    return x.t() + 1


def variance(x):
    return x.var(0)


@pytest.mark.parametrize("function", [
    transpose_plus_one,
    pytest.param(variance, marks=pytest.mark.xfail(
        strict=True, reason="a size-1 axis: the divisor traced as n - 1 >= 1, not eager's nan"))])
def test_sizes_zero_and_one_get_eager_answers(function):
    first = torch.randn(5, 20)
    compiled = inductor.compile_fx(symbolic_graph(function, [first], [[0]]), [first])
    for rows in (5, 1, 0, 9, 1):
        x = torch.randn(rows, 20)
        got, = compiled(x) if isinstance(compiled(x), (list, tuple)) else (compiled(x),)
        want = function(x)
        torch.testing.assert_close(got, want, equal_nan=True)
        assert got.stride() == want.stride() or got.numel() <= 1, (rows, got.stride())
