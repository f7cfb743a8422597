"""Pointwise kernels of several loops compute what does not vary along the innermost loop
once per row, before it (codegen/cpp/kernel.py `_pointwise`, hoist.py): index_select's and
embedding's row index and its bounds check were loaded and wrapped per element inside the
`omp simd` loop (op sweep timing, 1024x1024, 1 thread: index_select 1556 us vs eager 428).
Values match eager (negative indices of `x[i]` wrap, widths with a tail, a broadcast column); an index
out of range raises IndexError as eager's does; the generated C++ reads the index outside the
innermost loop; a nest whose innermost loop a `collapse` clause folds keeps no statement
between its loops."""
import pytest
import torch

import dynamo
import inductor
from tests.inductor.conftest import check_same, compile_function
from tests.inductor.test_cpp_hoisted_index import _innermost_loops


def index_select_rows(table, index):
    return table.index_select(0, index)


def embedding_scaled(table, index):
    return torch.nn.functional.embedding(index, table) * 2.0 + 1.0


def index_rows(table, index):
    return table[index] - 1.0


def add_column(x, y):
    return x + y[:, :1]


def _table(rows=40, width=203):
    return torch.randn(rows, width, generator=torch.Generator().manual_seed(0))


def _index(count=29, rows=40, low=0):
    return torch.randint(low, rows, (count,), generator=torch.Generator().manual_seed(1))


def _kernels(compiled) -> str:
    return compiled.report.source.split("call.with_argument_list")[-1]


@pytest.mark.parametrize("function", [index_select_rows, embedding_scaled])
def test_indexing_matches_eager(function):
    check_same(function, _table(), _index())


def test_negative_indices_wrap_like_eager():
    check_same(index_rows, _table(), _index(low=-40))


def test_a_broadcast_column_matches_eager():
    check_same(add_column, _table(), _table(rows=40, width=7))


@pytest.mark.parametrize("bad", [40, -41], ids=["past_the_end", "below_minus_rows"])
def test_an_index_out_of_range_raises_like_eager(bad):
    table, index = _table(), _index()
    compiled = compile_function(index_select_rows, table, index)
    index[17] = bad
    with pytest.raises(IndexError):
        index_select_rows(table, index)
    with pytest.raises(IndexError):
        compiled(table, index)
    index[17] = 3
    torch.testing.assert_close(compiled(table, index), index_select_rows(table, index))


@pytest.mark.parametrize("function", [index_select_rows, embedding_scaled, index_rows])
def test_the_row_index_is_read_outside_the_innermost_loop(function):
    source = _kernels(check_same(function, _table(), _index()))
    assert "jit_wrap_index(" in source, source
    loops = _innermost_loops(source)
    assert loops, source
    for body in loops:
        assert "jit_wrap_index(" not in body, body
        assert "const int64_t" not in body, body     # no index read or wrapped per element


def test_a_collapsed_parallel_nest_keeps_its_loops_together():
    saved = inductor.config.snapshot()
    inductor.config.update(threads=4, parallel_threshold=1)
    try:
        # 2 rows < 4 threads: the parallel loop collapses both levels, so nothing may
        # stand between them and the index stays inside (correct, not hoisted)
        table, index = _table(), _index(count=2)
        source = _kernels(check_same(index_select_rows, table, index))
        assert "collapse(2)" in source, source
        check_same(index_select_rows, table, _index(count=64))
    finally:
        inductor.config.update(**saved)


def test_through_dynamo_jit():
    table, index = _table(), _index()
    compiled = dynamo.jit(index_select_rows, backend="inductor")
    torch.testing.assert_close(compiled(table, index), index_select_rows(table, index))
