"""Reduction lanes (codegen/cpp/reductions.py) against eager on the values where eager is exact:
argmax/argmin with NaN (the first NaN's index), ties (the first occurrence, inside one lane and
across lanes), infinities, -inf rows, zeros of both signs, all-NaN rows; amax/amin with NaN
and infinities. Row lengths cover the scalar-only path (7), 16 lanes (100), 64 lanes (1024,
1031 with a tail), reductions over all elements and along the first dimension (lanes over
outer points), split over threads, in float32, float64, bfloat16 and int64.

Argmax/argmin lanes that see growing positions update with two selects (4.1 ms -> about 0.4
ms along 1024 x 1024, eager 1.3-1.5 ms); `positions_ascend` decides where that holds."""
import pytest
import sympy
import torch

import inductor
from inductor.codegen.cpp.reductions import positions_ascend
from tests.inductor.conftest import check_same, compile_function

NAN, INF = float("nan"), float("inf")


def _rows(columns: int) -> torch.Tensor:
    x = torch.randn(13, columns, generator=torch.Generator().manual_seed(columns))
    x[0, 5 % columns] = NAN
    x[0, columns - 3] = NAN                   # two NaNs: the first one's index
    x[1] = 1.0                                # every element ties
    x[2] = -INF                               # nothing beats the identity
    x[3] = 0.0
    x[3, ::3] = -0.0                          # zeros of both signs tie
    x[4, columns // 2] = INF
    x[4, columns - 1] = INF                   # infinities tie
    x[5, columns - 1] = NAN                   # NaN in the tail
    x[6] = NAN                                # every element NaN
    x[7] = torch.arange(columns, dtype=torch.float32) % 64   # ties across lanes
    x[8] = torch.arange(columns, dtype=torch.float32)        # the last wins
    x[9] = -torch.arange(columns, dtype=torch.float32)       # the first wins
    x[10] = -INF
    x[10, columns - 1] = 2.0
    x[11, ::7] = 5.0
    x[12] = INF
    x[12, columns // 3] = NAN
    return x


def argmax1(x):
    return x.argmax(1)


def argmin1(x):
    return x.argmin(1)


def argmax0(x):
    return x.argmax(0)


def argmin0(x):
    return x.argmin(0)


def argmax_all(x):
    return x.argmax()


def argmin_of_transpose(x):
    return x.t().argmin()


def argmax_of_product(x):
    return (x.t() * 2).argmax(1)


def amax1(x):
    return x.amax(1)


def amin0(x):
    return x.amin(0)


def max_with_index(x):
    return x.max(1)


FUNCTIONS = [argmax1, argmin1, argmax0, argmin0, argmax_all, argmin_of_transpose,
             argmax_of_product, amax1, amin0, max_with_index]


@pytest.mark.parametrize("columns", [7, 100, 1024, 1031])
@pytest.mark.parametrize("function", FUNCTIONS, ids=lambda f: f.__name__)
def test_float32_rows_match_eager_exactly(function, columns):
    check_same(function, _rows(columns), atol=0, rtol=0)


@pytest.mark.parametrize("function", [argmax1, argmin1, argmax0, argmax_all],
                         ids=lambda f: f.__name__)
def test_bfloat16_and_int64_rows(function):
    x = _rows(1031)
    check_same(function, x.bfloat16(), atol=0, rtol=0)
    check_same(function, (x.nan_to_num() * 3).long(), atol=0, rtol=0)


@pytest.mark.parametrize("function", [amax1, amin0, argmax1, max_with_index],
                         ids=lambda f: f.__name__)
def test_float64_rows(function):
    """Float64 max/min lanes keep NaN through 64-bit masks."""
    check_same(function, _rows(1031).double(), atol=0, rtol=0)


@pytest.mark.parametrize("function", [argmax_all, argmin_of_transpose],
                         ids=lambda f: f.__name__)
def test_split_over_threads(function):
    saved = inductor.config.snapshot()
    inductor.config.update(threads=2, parallel_threshold=1024)
    try:
        x = _rows(5000)
        x[:, 4000:] = 7.0                     # ties in the second thread's chunk only
        check_same(function, x, atol=0, rtol=0)
        x[0, 4500] = NAN                      # a NaN after the first chunk
        check_same(function, x, atol=0, rtol=0)
    finally:
        inductor.config.update(**saved)


def test_argmax_lanes_update_without_a_position_compare():
    """The per-element update of the lanes has no `argmax_takes` (it kept GCC from
    vectorising); the lanes' positions are int32 for a reduction of 1024 elements, 32 lanes
    (a value and a position each: 64 spilled AVX2's registers)."""
    compiled = compile_function(argmax1, torch.randn(8, 1024))
    source = compiled.report.source
    simd_loop = source.split("#pragma omp simd", 1)[1].split("for (int64_t y0 = 0 +", 1)[0]
    assert "argmax_takes" not in simd_loop and "const bool take" in simd_loop, source
    assert "int32_t m0_acc_lane_index[32]" in source, source


def test_positions_ascend():
    r0, r1 = sympy.symbols("y0 y1", integer=True)
    assert positions_ascend(r0, [r0], [1024])
    assert positions_ascend(100 * r0 + r1, [r0, r1], [70, 100])
    assert positions_ascend(r0 + 3, [r0], [10])
    assert not positions_ascend(r0 + 70 * r1, [r0, r1], [100, 70])   # loops transposed
    assert not positions_ascend(50 * r0 + r1, [r0, r1], [70, 100])   # rows overlap
    assert not positions_ascend(sympy.Mod(r0, 7), [r0], [100])
    assert not positions_ascend(-r0, [r0], [100])
    n = sympy.Symbol("s0", integer=True, positive=True)
    assert positions_ascend(n * r0 + r1, [r0, r1], [5, n])
    assert not positions_ascend(r0 + r1, [r0, r1], [5, n])


def sum_all(x):
    return x.sum()


def mean_rows(x):
    return x.mean(1)


@pytest.mark.parametrize("elements", [4096 * 3 + 64 * 5 + 7, 64 * 64 * 64, 4096 * 64 + 13])
def test_long_float_sums_flush_in_whole_chunks(elements):
    """Float sums of more than 64 x 64 lanes' terms fold into double every 64 blocks: the
    blocks run as a loop of 64 per chunk, then the remaining blocks and the tail (a test per
    block kept the lanes in memory). Close to the float64 sum, as before."""
    x = torch.randn(elements, generator=torch.Generator().manual_seed(elements)) + 0.25
    compiled = compile_function(sum_all, x)
    assert "y0_flush" in compiled.report.source and "% 64 == 63" not in compiled.report.source
    torch.testing.assert_close(compiled(x), x.double().sum().float(), atol=1e-3, rtol=1e-6)
    rows = x[: elements // 4 * 4].view(4, -1)
    check_same(mean_rows, rows, atol=1e-6, rtol=1e-5)
