"""Views over symbolic sizes compiled once (issue 23): `split` / `chunk` of a symbolic extent
(`qkv.split(width, -1)`, `chunk(3, -1)`), pieces of a constant size, `unbind` of a static dim
of a tensor with symbolic ones, `diagonal` over symbolic dims, and slices ending at (or
starting from) a constant of a symbolic extent, whose clamping torch's meta kernel decided
while tracing (guarded by the front end). One compile, no `per_size` variant, no fallback, and
at every size eager's values, strides, offsets, storages and version counters (the checks of
test_symbolic_aliasing.py); on the C++ backend and on Triton's (interpreted on CPU)."""
import pytest
import torch

import inductor
from tests.inductor.test_symbolic_aliasing import check_every_size


def test_qkv_split_by_a_third_of_a_symbolic_width(code_generator):
    def function(qkv):
        parts = qkv.split(qkv.size(-1) // 3, dim=-1)
        return parts[0] * 2, parts[1] + parts[2], parts[2]
    check_every_size(function, lambda n: [torch.randn(2, 3 * n)], [[1]],
                     sizes=(5, 2, 3, 7, 97, 1000))


def test_chunk_into_three_and_split_with_sizes(code_generator):
    def function(x):
        chunks = x.chunk(3, -1)
        pieces = x.split_with_sizes([1, x.size(0) - 1], dim=0)
        return chunks[0] - chunks[2], chunks[1], pieces[1] * 3, pieces[0]
    check_every_size(function, lambda n: [torch.randn(n, 3 * n)], [[0, 1]],
                     sizes=(5, 2, 3, 7, 97))


def test_split_into_pieces_of_a_constant_size(code_generator):
    """Three pieces of 4 for extents 9..12 (their count is fixed in the graph, guarded)."""
    def function(x):
        pieces = x.split(4, dim=-1)
        return pieces[0] + 1, pieces[1] * 2, pieces[2]
    check_every_size(function, lambda n: [torch.randn(3, n)], [[1]], sizes=(10, 9, 11, 12))


def test_unbind_a_static_dim_of_a_symbolic_tensor(code_generator):
    def function(x):
        rows = x.unbind(0)
        return rows[0] * rows[1], rows[2]
    check_every_size(function, lambda n: [torch.randn(3, n)], [[1]])


def test_slices_ending_at_constants(code_generator):
    def function(x):
        return x[:3] * 2, x[1:4], x[:, :2] + 1, x[2:]
    check_every_size(function, lambda n: [torch.randn(n, n)], [[0, 1]],
                     sizes=(5, 4, 7, 97, 1000))


def test_slices_starting_before_a_symbolic_extent(code_generator):
    """`x[-10:]` of fewer than 10 rows clamps its start to 0 (torch's meta decided it, the
    front end guards `s0 < 10`): it was compiled as a slice of length 10, reading past the
    input and returning 10 rows."""
    def function(x):
        return x[-10:] * 2, x[-3:-1], x[:-1]
    check_every_size(function, lambda n: [torch.randn(n, 3)], [[0]], sizes=(5, 3, 4, 7, 9))


def test_diagonals_of_static_dims_of_a_symbolic_tensor(code_generator):
    def function(batch):
        return batch.diagonal(dim1=1, dim2=2) * 2, batch.diagonal(1, 1, 2), \
            batch.diagonal(-1, 2, 1).sum(-1)
    check_every_size(function, lambda n: [torch.randn(n, 4, 4)], [[0]])


@pytest.mark.expect_fallback("per_size", reason="a diagonal over two symbolic dims is as long "
                             "as the smaller: Min(s0, s1) is no size expression yet")
def test_a_diagonal_over_two_symbolic_dims_is_compiled_per_size():
    """Still per size (docs/dynamic-shapes.md): the length `Min(s0, s1)` (the front end makes
    a symbol per dim, a square matrix included) cannot be printed; counted, and right."""
    from inductor.runtime import fallbacks
    from tests.inductor.symbolic_graphs import symbolic_graph

    def function(x):
        return x.diagonal() * 2, x.diagonal(1)
    before = fallbacks.fallbacks()
    compiled = inductor.compile_fx(symbolic_graph(function, [torch.randn(5, 5)], [[0, 1]]),
                                   [torch.randn(5, 5)])
    for size in (5, 3, 7):
        x = torch.randn(size, size)
        for got, want in zip(compiled(x), function(x)):
            torch.testing.assert_close(got, want)
    assert "Min(" in compiled.report.size_reason
    assert set(fallbacks.since(before)) == {f"per_size: {compiled.report.size_reason}"}
