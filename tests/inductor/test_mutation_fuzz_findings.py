"""Graph-fuzzer findings in mutation, aliasing and output handling (tests/fuzz/graphs/
FINDINGS.md, classes 2, 3, 4, 5, 8 and 13), minimized, on both CPU code generators.

2: a computed buffer with a zero-size dimension divided by zero while its loops were merged.
3: the same tensor passed twice was one fake tensor while tracing, so every use read one
   placeholder and a later call with distinct tensors read the wrong input.
4: output strides came from the decomposed graph (torch's `repeat` decomposition keeps a
   transposed input's layout; eager returns a contiguous tensor).
5, 8: writes through memory that overlaps itself (an expanded input accumulated into, a fill
   through overlapping `unfold` windows) were functionalized as if the elements were apart.
13: an input written through a view and returned came back as a copy instead of the input.
"""
import copy

import pytest
import torch
import torch.fx
import torch.nn.functional as F

import inductor


@pytest.fixture(params=["cpp", "triton"])
def backend(request, monkeypatch):
    monkeypatch.setattr(inductor.config, "cpu_backend", request.param)
    return request.param


def check(function, inputs, compile_inputs=None):
    """Eager and compiled on copies of `inputs`: values, dtypes, strides, mutated inputs."""
    compiled = inductor.compile_fx(torch.fx.symbolic_trace(function),
                                   list(compile_inputs or inputs))
    eager_inputs, jit_inputs = copy.deepcopy(inputs), copy.deepcopy(inputs)
    expected, actual = function(*eager_inputs), compiled(*jit_inputs)
    expected = expected if isinstance(expected, tuple) else (expected,)
    actual = actual if isinstance(actual, tuple) else (actual,)
    for first, second in zip(actual, expected):
        assert first.dtype == second.dtype and first.shape == second.shape
        assert first.stride() == second.stride() or first.numel() <= 1
        torch.testing.assert_close(first, second, rtol=0, atol=0)
    for first, second in zip(jit_inputs, eager_inputs):
        torch.testing.assert_close(first, second, rtol=0, atol=0)
    return compiled, jit_inputs, actual


@pytest.mark.parametrize("name", ["pad", "add", "in_place", "softmax", "beside_another"])
def test_zero_size_buffers(backend, name):
    cases = {
        "pad": (lambda a: F.pad(a, [2, 1], value=True), (torch.zeros(0, 4, dtype=torch.uint8),)),
        "add": (lambda a, b: a + b, (torch.randn(0, 3), torch.randn(3))),
        "in_place": (lambda a: a.mul_(2), (torch.randn(2, 0),)),
        "softmax": (lambda a: a.softmax(-1), (torch.randn(0, 5),)),
        "beside_another": (lambda a, b: (a * 2, b.sum()), (torch.randn(0, 5), torch.arange(3.0))),
    }
    function, inputs = cases[name]
    check(function, inputs)


def test_one_tensor_passed_twice_then_two(backend):
    shared = torch.randn(6)
    check(lambda a, b, c: (a * 2 + c, b), (torch.randn(6), torch.randn(6), torch.randn(6)),
          compile_inputs=(shared, torch.randn(6), shared))


def test_output_strides_are_eager_strides(backend):
    check(lambda a: a.repeat([1, 1]).type(torch.float32),
          (torch.randn(2, 2, dtype=torch.bfloat16).t(),))


@pytest.mark.expect_fallback("unsupported", reason="a write into memory overlapping itself runs as is")
def test_accumulate_into_an_expanded_input(backend):
    def function(a, index, value):
        a.index_put_((index,), value, accumulate=True)
        return a + 0
    compiled, _, _ = check(function, (torch.tensor([-1], dtype=torch.int32).expand(2),
                                      torch.tensor([0, 1, 1, 0, 1]),
                                      torch.tensor(-5, dtype=torch.int32)))
    assert "overlap" in compiled.report.reason


@pytest.mark.expect_fallback("unsupported", reason="a write into memory overlapping itself runs as is")
def test_fill_through_overlapping_unfold_windows(backend):
    def function(a, b):
        a.sub_(b)
        a.unfold(1, 2, 1).fill_(1)
        return a + 0
    check(function, (torch.randn(2, 12)[:, ::3], torch.randn(2, 4)))


def test_input_written_through_a_view_is_returned_as_itself(backend):
    def function(a):
        a[:2].mul_(2)
        return (a,)
    _, inputs, (result,) = check(function, (torch.randn(3, 4),))
    assert result is inputs[0]
