"""Repros of the graph fuzzer's view and aliasing classes (tests/fuzz/graphs/FINDINGS.md,
classes 24, 25, 30, 31), on both CPU code generators (Triton under its interpreter).

24: `as_strided` (and `unfold`, decomposed to it) of a view, in a graph that writes anywhere:
    functionalization made the view a fresh copy and `as_strided` read past its end; over an
    input the graph writes, the offset counted into the new value laid out from 0.
25: a write through an `expand` that broadcasts nothing was inverted as `base + (new - base)`:
    NaN where the input held inf, an error for bools.
30: a view of an intermediate returned twice (matmul of a 1-D tensor: `squeeze_` of the
    product) got a hidden base with the product's rank-2 strides and the view's shape.
31: views of one intermediate were rebuilt with the decomposed base's strides, not eager's;
    with the base returned too, the views read the wrong elements of it.
"""
import copy

import pytest
import torch
import torch.fx

import inductor


@pytest.fixture(params=["cpp", "triton"])
def backend(request, monkeypatch):
    monkeypatch.setattr(inductor.config, "cpu_backend", request.param)
    return request.param


def _sharing(outputs):
    """Per output: the earlier outputs it shares memory with, and those it is."""
    keys = [value.untyped_storage().data_ptr() if value.untyped_storage().nbytes() else None
            for value in outputs]
    return [(tuple(j for j in range(i) if keys[i] is not None and keys[j] == keys[i]),
             tuple(j for j in range(i) if outputs[j] is outputs[i]))
            for i in range(len(outputs))]


def check(function, *inputs, compiled_reason=None):
    """Eager and compiled on copies of `inputs` (views of other storages stay so), twice:
    values bit for bit, dtypes, strides, which outputs share memory or are one object, and
    the inputs' whole storages afterwards. `compiled_reason`: None, or a phrase of the reason
    the graph runs as is."""
    compiled = inductor.compile_fx(torch.fx.symbolic_trace(function), copy.deepcopy(inputs))
    reason = compiled.report.reason
    if compiled_reason is None:
        assert reason is None
    else:
        assert reason is not None and compiled_reason in reason
    for _ in range(2):
        eager_inputs, jit_inputs = copy.deepcopy(inputs), copy.deepcopy(inputs)
        expected, actual = function(*eager_inputs), compiled(*jit_inputs)
        for got, want in zip(actual, expected):
            assert got.dtype == want.dtype and got.shape == want.shape
            assert all(extent <= 1 or first == second for extent, first, second
                       in zip(want.shape, got.stride(), want.stride())), \
                (got.stride(), want.stride())
            torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
        assert _sharing(list(actual)) == _sharing(list(expected))
        for got, want in zip(jit_inputs, eager_inputs):
            assert bytes(got.untyped_storage()) == bytes(want.untyped_storage())


def at_offset(value, offset=3):
    """`value` as a view of a larger tensor, starting `offset` elements into its storage."""
    storage = torch.arange(value.numel() + offset + 5, dtype=value.dtype) - 7
    return storage[offset:offset + value.numel()].view(value.shape).copy_(value)


GRID = torch.arange(20.0).view(4, 5) - 6


@pytest.mark.parametrize("start", [0, 3])
def test_unfold_of_a_narrow_of_a_written_input(backend, start):
    def function(a0):                       # seed 46759
        a0.neg_()
        return (a0.narrow(1, 1, 3).unfold(1, 2, 2).to(torch.float64),)
    check(function, at_offset(GRID, start))


@pytest.mark.parametrize("start", [0, 3])
def test_as_strided_of_a_narrow_beside_an_unrelated_write(backend, start):
    def function(a0, a2):                   # seed 40011
        v0 = a0.narrow(0, 0, 3)
        a2.clamp_(2, 4)
        return (torch.as_strided(v0, [4, 1, 2], [5, 3, 3], a0.storage_offset() + 5) + 1,)
    check(function, at_offset(torch.randn(7, 4), start), torch.randn(3, 4))


def test_as_strided_over_an_empty_slice(backend):
    def function(a0, a1):                   # seed 51347
        a1.zero_()
        return (torch.as_strided(a0[:, 4:4], [2, 3], [1, 4], 2) * 2,)
    check(function, torch.randn(4, 4), torch.randn(3))


@pytest.mark.parametrize("start", [0, 3])
def test_as_strided_view_read_after_a_later_write(backend, start):
    def function(a0):
        view = torch.as_strided(a0[1:], [2, 2], [4, 1], a0.storage_offset() + 5)
        a0.add_(1)
        return (view + 0, torch.as_strided(a0[1:], [3, 3], [4, 1], a0.storage_offset() + 4))
    check(function, at_offset(GRID, start))


def test_as_strided_of_views_of_a_written_intermediate(backend):
    def function(a0):
        c = a0 * 2
        c.add_(1)
        v = torch.as_strided(c[1:], [3, 3], [4, 1], 4)
        return (torch.as_strided(v[1:], [2], [5], 5) + 0, c.t()[1:].unfold(1, 2, 1) + 0)
    check(function, GRID.clone())


def test_unfold_of_a_written_transposed_input(backend):
    def function(a0):
        a0.mul_(2)
        return (a0.t()[1:].unfold(1, 2, 1) + 0,)
    check(function, GRID.clone().t().contiguous().t())


def _with_gaps():
    return (torch.arange(40.0).view(4, 10) - 9)[:, ::2]


def test_unfold_of_a_written_input_with_gaps(backend):
    def function(a0):                       # seed 46759: a0 = r[:, ::2]
        a0.neg_()
        return (a0, a0.narrow(1, 1, 3).unfold(1, 2, 2) * 1)
    check(function, _with_gaps())

    def read_before_a_later_write(a0):      # the copy is read before the write
        v = a0.narrow(1, 1, 3).unfold(1, 2, 2)
        first = v * 1
        a0.neg_()
        return (first, a0)
    check(read_before_a_later_write, _with_gaps())

    def returned_then_written(a4, a5):     # seed 45744: an input's view, rebuilt after
        v12 = a4.unfold(2, 3, 2)            # the call from the input, is not read inside
        a4.index_fill_(0, a5, 0)
        return (v12,)
    check(returned_then_written, torch.arange(20, dtype=torch.uint8).view(4, 1, 5)[:, :, 1:4],
          torch.tensor([0]))

    def across_rows(a0):
        a0.add_(2)
        return (torch.as_strided(a0[1:], [2, 3], [2, 10], a0.storage_offset() + 10) * 1,)
    check(across_rows, _with_gaps())


@pytest.mark.expect_fallback("unsupported", reason="as_strided reads storage around a tensor the "
                             "graph writes, or of a tensor with gaps written afterwards")
def test_as_strided_of_a_tensor_with_gaps_written_afterwards_runs_as_is(backend):
    def function(a0):
        v = a0.narrow(1, 1, 3).unfold(1, 2, 2)
        a0.neg_()
        return (v * 1,)
    check(function, _with_gaps(), compiled_reason="through `as_strided`")


@pytest.mark.expect_fallback("unsupported", reason="as_strided reads storage around a tensor the "
                             "graph writes: the functional form has only the tensor's elements")
def test_as_strided_around_a_written_input_runs_as_is(backend):
    def function(a0):                       # reads a0's storage outside a0's elements
        a0.sub_(1)
        return (torch.as_strided(a0, [3], [1], a0.storage_offset() + 3) + 0,)
    check(function, GRID.clone()[:, 1:], compiled_reason="through `as_strided`")


@pytest.mark.expect_fallback("unsupported", reason="a second write through as_strided into an "
                             "input's new value, which sits otherwise than the input")
def test_writes_through_as_strided(backend):
    def through_unfold(a0):                 # on the tensor itself: functionalized
        a0.unfold(1, 2, 2).fill_(7)
        return (a0 * 1,)
    check(through_unfold, GRID.clone())
    check(through_unfold, GRID.clone().t().contiguous().t())
    check(through_unfold, at_offset(GRID))
    check(through_unfold, _with_gaps())

    def twice(a0):                          # the second into the first's new value
        a0.unfold(1, 2, 2).fill_(7)
        a0.unfold(0, 2, 2).mul_(3)
        return (a0 * 1, a0.unfold(1, 2, 1) + 0)
    check(twice, GRID.clone())
    check(twice, at_offset(GRID), compiled_reason="writes through")   # into a new value
    check(twice, _with_gaps(), compiled_reason="writes through")

    def through_a_view(a0, a2):             # rebased onto a0 (functionalization refuses
        a2.add_(1)                          # as_strided of a view written through)
        torch.as_strided(a0[1:], [2, 2], [4, 1], a0.storage_offset() + 6).fill_(7)
        a0[1:].unfold(1, 2, 2).mul_(3)
        return (a0 * 1,)
    check(through_a_view, GRID.clone(), torch.randn(2))
    check(through_a_view, GRID.clone().t().contiguous().t(), torch.randn(2),
          compiled_reason="writes through")   # the second into a new value laid out otherwise


@pytest.mark.expect_fallback("unsupported", reason="an input's metadata changed in place")
def test_an_input_transposed_in_place_runs_as_is(backend):
    def function(x):
        x.t_()
        return (x + 1,)
    check(function, torch.randn(2, 3), compiled_reason="shape or strides in place")


def test_write_through_an_expand_of_bools(backend):
    def function(a2):                       # seeds 40583, 42474
        v4 = a2.expand(6, 3, 7)
        v4.logical_not_()
        return (a2,)
    check(function, torch.rand(6, 3, 7) > 0.5)


def test_fill_through_an_expand_over_infinities(backend):
    def function(x):
        x.expand(2, 3).fill_(5)
        x.expand(1, 1, 2, 3).mul_(2)
        return (x,)
    check(function, torch.tensor([[1.0, float("inf"), 2.0], [3.0, 4.0, -float("inf")]]))


def test_write_through_an_expand_to_no_elements(backend):
    def function(x):
        x.expand(0, 3).add_(1)              # writes nothing: -0.0 stays -0.0
        return (x + 0, x.expand(1, 3).add_(1))
    check(function, torch.tensor([[-0.0, 1.0, 2.0]]))


def test_a_view_of_an_intermediate_returned_twice(backend):
    def twice(a3, a4):                      # seed 45151
        v2 = a3 @ a4
        return (v2, v2)
    inputs = (torch.randn(2, dtype=torch.float16), torch.randn(2, 4, dtype=torch.float16))
    check(twice, *inputs)

    def with_views(a3, a4):
        v2 = a3 @ a4
        return (v2[1:], v2, v2[:2])
    check(with_views, *inputs)
    check(lambda x: ((x + 1)[1:],) * 2, torch.randn(3, 4))

    def empty_twice(a4, a5):                # seed 45290: no elements, its base's memory
        v = torch.addmm(a4, a5, a4, beta=1, alpha=2).narrow(0, 1, 0).view(-1)
        return (v, v)
    check(empty_twice, torch.randn(1, 8), torch.randn(4, 1))


def _permuted_like_eager_product():
    return torch.randn(4, 4, 3, dtype=torch.float64).transpose(0, 1).contiguous() \
        .transpose(0, 1)


def test_views_of_an_intermediate_get_eager_strides(backend):
    def function(a3, a4, a5):               # seed 46977
        v4 = torch.baddbmm(a3, a4, a5, alpha=0.5).unbind(0)
        return (v4[2], v4[3])
    inputs = (_permuted_like_eager_product(), torch.randn(4, 4, 5, dtype=torch.float64),
              torch.randn(4, 5, 3, dtype=torch.float64))
    check(function, *inputs)

    def with_the_base(a3, a4, a5):          # the base returned: views read the wrong elements
        c = torch.baddbmm(a3, a4, a5, alpha=0.5)
        return (c, c[1], c[2:])
    check(with_the_base, *inputs)


def test_views_of_a_repeat(backend):
    def function(x):                        # torch's repeat keeps a transposed layout
        r = x.t().repeat(2, 1)
        return (r[0], r[1:], r)
    check(function, torch.randn(3, 4))
