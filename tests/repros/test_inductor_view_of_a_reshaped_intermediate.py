"""Graph fuzzer seed 268: `a.repeat([1]).split(3, 0)[0]` returned alone. Eager's `repeat`
allocates its result in its own shape and `split` returns a view of it; the decomposition
clones a (1, n) tensor and views it as (n,), so the output's base had another shape than
eager's, and the output was computed as a fresh tensor (no view). The hidden base is now the
intermediate in eager's shape (an `_unsafe_view` of it, a tensor of its own)."""
import pytest
import torch

import dynamo


def _split_of_repeat(a):
    return a.repeat([1]).split(3, 0)[0]


def _slice_of_repeat(a):
    return a.repeat(2, 1)[1:]


def _slice_of_flattened_transpose(a):
    return (a * 2).t().flatten()[1:]


def _describe(value):
    base = value._base
    return (value.tolist(), tuple(value.stride()), value.storage_offset(),
            None if base is None else (tuple(base.shape), tuple(base.stride())))


def _check_two_shapes(fn, jitted):
    for shape in [(2, 3), (3, 1)]:
        a = torch.arange(float(shape[0] * shape[1])).reshape(shape)
        if fn is _split_of_repeat:
            a = a.flatten()
        assert _describe(jitted(a)) == _describe(fn(a))


@pytest.mark.parametrize("fn", [_split_of_repeat, _slice_of_repeat,
                                _slice_of_flattened_transpose])
def test_view_of_an_intermediate_eager_shapes_otherwise(fn, code_generator):
    """Each shape compiled statically (the finding's setting)."""
    _check_two_shapes(fn, dynamo.jit(fn, backend=code_generator, dynamic=False))


_PER_SIZE = pytest.mark.expect_fallback(
    "per_size", reason="the input, a view, is traced symbolically at the second shape since "
    "448d8c6 (views follow the dynamic policy); inductor's finding of which outputs alias "
    "assumes repeat's traced size (Eq(s, 3)) and compiles a static variant per size (counted)")


@pytest.mark.parametrize("fn", [pytest.param(_split_of_repeat, marks=_PER_SIZE),
                                pytest.param(_slice_of_repeat, marks=_PER_SIZE),
                                _slice_of_flattened_transpose])
def test_view_of_an_intermediate_with_automatic_dynamic(fn, code_generator):
    """The second shape traced symbolically: the geometry is still eager's. Where inductor
    falls back to a static variant per size, the fallback must be the known one (when the
    alias finding stops assuming the size, drop the mark and the assertion)."""
    from inductor.runtime import fallbacks
    before = fallbacks.fallbacks()
    _check_two_shapes(fn, dynamo.jit(fn, backend=code_generator))
    if fn is not _slice_of_flattened_transpose and code_generator != "eager":
        assert any(reason.startswith("per_size") for reason in fallbacks.since(before))


def _repeat(a):
    return a.repeat([1, 2])


def _slice_of_a_permuted_repeat(a):
    return a.repeat([1, 2])[1:], a.repeat([2, 1])[:, 1:]


@pytest.mark.parametrize("fn", [_repeat, _slice_of_a_permuted_repeat])
def test_repeat_read_through_a_permute_keeps_its_values(fn, code_generator):
    """Graph fuzzer seed 10628 (a regression of 941d95e, in the campaign at 3c59b0e):
    `a1.repeat([1, 2])` clones a (3, 2, 2) tensor and permutes it to (3, 4); reading eager's
    (3, 4) geometry over that clone picked other elements. The reshaped base is taken only
    where each output addresses our memory as eager's addresses its own."""
    for shape in [(6, 1), (3, 2)]:
        jitted = dynamo.jit(fn, backend=code_generator)
        a = torch.arange(6.).reshape(shape)
        expected, actual = fn(a), jitted(a)
        expected = expected if isinstance(expected, tuple) else (expected,)
        actual = actual if isinstance(actual, tuple) else (actual,)
        assert [t.tolist() for t in actual] == [t.tolist() for t in expected]
        if fn is _repeat:    # (a view of a repeat read through a permute is still computed
            assert [_describe(t) for t in actual] == [_describe(t) for t in expected]
        #                      alone: right values, no `_base`; FINDINGS.md class 43)


def _stack_and_a_view_of_it(a):
    v0 = torch.stack([a, a, a], -2)
    return v0, v0.view(-1), v0[1:]


def test_output_viewed_by_other_outputs_owns_them(code_generator):
    """Graph fuzzer class 43 A (seed 12680, campaign at 3c59b0e): `stack` decomposes into a
    `cat` viewed, so `v0` was no owner and `v0.view(-1)` viewed a hidden `cat` buffer; eager's
    v0 is fresh and the others view it. v0 is now that buffer in eager's shape."""
    jitted = dynamo.jit(_stack_and_a_view_of_it, backend=code_generator)
    a = torch.arange(8.).reshape(2, 4)
    expected, actual = _stack_and_a_view_of_it(a), jitted(a)
    assert [_describe(t) for t in actual] == [_describe(t) for t in expected]
    assert actual[1]._base is actual[0] and actual[2]._base is actual[0]


def _product_and_its_permute(a, b):
    v2 = a @ b
    return v2, v2.permute([1, 0, 2])


def test_output_that_lies_as_the_intermediate_owns_the_other(code_generator):
    """Graph fuzzer seed 19086 (class 43 A): a product of a one-wide contraction is an alias
    of the intermediate in the decomposed graph, so both outputs viewed a hidden base; eager's
    v2 is fresh and the permute views it."""
    jitted = dynamo.jit(_product_and_its_permute, backend=code_generator)
    a = torch.arange(4.).reshape(4, 1, 1).to(torch.bfloat16)
    b = torch.arange(8.).reshape(4, 1, 2).to(torch.bfloat16)
    expected, actual = _product_and_its_permute(a, b), jitted(a, b)
    assert [_describe(t) for t in actual] == [_describe(t) for t in expected]
    assert actual[1]._base is actual[0]
