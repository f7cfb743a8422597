"""Graphs writing into their inputs, compiled once over symbolic sizes (issue 23): `x.add_(1)`,
writes through slices and selects of a symbolic extent (`cache[:, n - 1] = k`, `copy_` into
`cache[:, :t]`), `index_copy_` into a KV cache, `index_put_`. One compile, no `per_size`
variant and no fallback of any kind; at every size the writes land in the caller's tensors
(same memory, the views made before the call see them), their version counters move as
eager's in-place ops move them, and outputs are eager's (values, dtype, shape, strides); on
the C++ backend and on Triton's (interpreted on CPU). Inputs sharing memory with another
written input take their own compile (the storage pattern is part of what was compiled)."""
import copy

import pytest
import torch

import inductor
from inductor.runtime import fallbacks
from tests.inductor.symbolic_graphs import shape_env_of, symbolic_graph

SIZES = (5, 2, 3, 7, 97, 1000)


def values(*shape):
    """Integer-valued floats: sums of them are exact in any order (reductions over 1000 rows
    compare bit for bit with eager's)."""
    return torch.randint(-8, 8, shape).float()


def _compare(got, want, size):
    torch.testing.assert_close(got, want)
    assert got.dtype == want.dtype and got.shape == want.shape, size
    assert got.stride() == want.stride(), (size, got.stride(), want.stride())


def run_every_size(compiled, function, make_inputs, sizes):
    """Call `compiled` and `function` on copies of `make_inputs(size)` for each size and
    compare outputs, inputs, memory, views of the inputs and version counters."""
    for size in sizes:
        torch.manual_seed(size)
        inputs = make_inputs(size)
        ours_in, eager_in = copy.deepcopy(inputs), copy.deepcopy(inputs)
        pointers = [value.data_ptr() for value in ours_in]
        ours_views = [value.view(-1)[:] for value in ours_in]   # made before the call
        eager_views = [value.view(-1)[:] for value in eager_in]
        ours, eager = compiled(*ours_in), function(*eager_in)
        ours = list(ours) if isinstance(ours, (list, tuple)) else [ours]
        eager = list(eager) if isinstance(eager, (list, tuple)) else [eager]
        for got, want in zip(ours, eager):
            _compare(got, want, size)
            for got_in, want_in in zip(ours_in, eager_in):
                assert (got is got_in) == (want is want_in), size
        for got, want in zip(ours_in, eager_in):
            _compare(got, want, size)
        assert [value.data_ptr() for value in ours_in] == pointers, size
        torch.testing.assert_close(ours_views, eager_views)
        assert [value._version for value in ours_in] == \
            [value._version for value in eager_in], size


def check_every_size(function, make_inputs, dynamic, sizes=SIZES):
    """Compile once at `sizes[0]` (adding no guard), run every size (`run_every_size`), and
    assert that nothing was compiled per size and nothing fell back."""
    first = make_inputs(sizes[0])
    before = fallbacks.fallbacks()
    gm = symbolic_graph(function, first, dynamic)
    guards = list(shape_env_of(gm).guards)
    compiled = inductor.compile_fx(gm, copy.deepcopy(first))
    assert list(shape_env_of(gm).guards) == guards
    run_every_size(compiled, function, make_inputs, sizes)
    assert compiled.report.size_reason is None, compiled.report.size_reason
    assert compiled.report.size_variants == 0
    assert fallbacks.since(before) == {}
    return compiled


def test_in_place_ops_on_an_input(code_generator):
    def function(x):
        x.add_(1)
        x.mul_(2)           # two writes: the counter moves twice
        return x, x.sum(0)
    check_every_size(function, lambda n: [values(n, 3)], [[0]])


def test_an_input_written_through_views(code_generator):
    def function(x, y):
        x.t()[1].mul_(3)
        x[1:].add_(y)
        return x * 2
    check_every_size(function, lambda n: [values(n, 4), values(4)], [[0], []])


def test_a_slice_ending_at_a_constant_written(code_generator):
    def function(x):
        x[:, :3].mul_(2)
        x[:, -2:].zero_()
        return x.sum(1)
    check_every_size(function, lambda n: [values(4, n)], [[1]])


def test_a_cache_written_at_the_last_position():
    """The decode step's write, `cache[:, n - 1] = key` (as torch.fx traces no `setitem`):
    the new key stored at a position that is a size."""
    def function(cache, key):
        cache.select(1, cache.size(1) - 1).copy_(key)
        return cache.sum(1)
    check_every_size(function, lambda n: [values(2, n, 4), values(2, 4)],
                     [[1], []])


def test_copy_into_a_slice_of_two_symbolic_extents(code_generator):
    def function(cache, new):
        cache[:, :new.size(1)].copy_(new)
        return cache * 1
    check_every_size(function, lambda n: [values(2, n + 3, 4), values(2, n, 4)],
                     [[1], [1]])


def test_index_copy_into_a_kv_cache(code_generator):
    def function(cache, key, position):
        cache.index_copy_(2, position, key)
        return cache[:, :, :1] + 1
    check_every_size(function, lambda n: [values(1, 2, n, 4), values(1, 2, 1, 4),
                                          torch.tensor([n - 1])], [[2], [], []])


def test_index_put_accumulating_and_not(code_generator):
    def function(x, rows, values):
        x.index_put_((rows,), values, accumulate=True)
        x.index_put_((rows[:1],), values[:1] * 2)
        return x.sum()
    check_every_size(function, lambda n: [values(n, 4), torch.tensor([0, 1, 0]),
                                          values(3, 4)], [[0], [], []])


@pytest.mark.expect_fallback("per_size", "unsupported", reason="writes into inputs sharing "
                             "memory run as is, as on the static path")
def test_inputs_sharing_memory_take_their_own_compile():
    """Compiled for distinct inputs; a call passing one tensor twice (written through both
    names) is compiled for that pattern (per size: the static path handles shared writes),
    counted, and matches eager."""
    def function(x, y):
        x.add_(1)
        y.mul_(2)
        return x + y
    first = [values(5, 3), values(5, 3)]
    gm = symbolic_graph(function, first, [[0], [0]])
    compiled = inductor.compile_fx(gm, copy.deepcopy(first))
    run_every_size(compiled, function, lambda n: [values(n, 3), values(n, 3)],
                   (5, 7))
    before = fallbacks.fallbacks()
    for size in (6, 9):
        shared = values(size, 3)
        eager_shared = shared.clone()
        ours = compiled(shared, shared)
        eager = function(eager_shared, eager_shared)
        torch.testing.assert_close(ours, eager)
        torch.testing.assert_close(shared, eager_shared)
        assert shared._version == eager_shared._version
    assert any("share memory" in reason for reason in fallbacks.since(before))


def test_a_written_input_whose_sizes_are_static_beside_a_symbolic_one(code_generator):
    """Module state as decode keeps it: a static buffer written from a symbolic batch."""
    def function(total, x):
        total.add_(x.sum(0))
        return x - total
    check_every_size(function, lambda n: [torch.zeros(4), values(n, 4)], [[], [0]])
