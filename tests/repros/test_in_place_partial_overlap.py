"""Program fuzzer, inductor seed 5412: `y += y.transpose(0, 1)` raised eager's "some elements
of the input tensor and the written-to tensor refer to a single memory location" eagerly; the
compiled graph read both operands before writing and returned a value. An in-place op that
reads memory it writes through a view laid out otherwise now runs as eager does."""
import pytest
import torch

import dynamo


def _transpose_into_itself(y):
    y += y.transpose(0, 1)
    return y * 2


def _shift_in_place(x):
    t = x * 2
    t[1:] = t[:-1]
    return t


def _same_elements_twice(y):
    y.add_(y.view(-1).view(y.shape))      # a full overlap: eager computes it
    return y.sum()


def _training_intermediate(w):
    t = w * 2
    t.add_(t.t())
    return t.sum()


def _outcome(fn, *args):
    try:
        return fn(*args), None
    except RuntimeError as error:
        return None, str(error)


_AS_IS = pytest.mark.expect_fallback("unsupported", reason="eager refuses the partial overlap: "
                                     "the graph runs as is")


@_AS_IS
@pytest.mark.parametrize("fn, shape", [(_transpose_into_itself, (3, 3)),
                                       (_shift_in_place, (6,))])
def test_partial_overlap_raises_as_eager(code_generator, fn, shape):
    jitted = dynamo.jit(fn, backend=code_generator)
    for _ in range(2):
        value = torch.randn(*shape)
        expected, expected_error = _outcome(fn, value.clone())
        actual, actual_error = _outcome(jitted, value.clone())
        assert expected is None and "single memory location" in expected_error
        assert actual_error == expected_error


def test_full_overlap_computes(code_generator):
    jitted = dynamo.jit(_same_elements_twice, backend=code_generator)
    value = torch.randn(3, 3)
    expected_input, actual_input = value.clone(), value.clone()
    torch.testing.assert_close(jitted(actual_input), _same_elements_twice(expected_input))
    torch.testing.assert_close(actual_input, expected_input)


@_AS_IS
def test_partial_overlap_in_a_training_graph(code_generator):
    jitted = dynamo.jit(_training_intermediate, backend=code_generator)
    w = torch.randn(3, 3, requires_grad=True)
    expected, expected_error = _outcome(_training_intermediate, w)
    actual, actual_error = _outcome(jitted, w)
    assert expected is None and actual_error == expected_error


def _columns_sharing_elements(x):
    t = x * 2
    t[:, :2] += t[:, 1:3]       # views with gaps, one column in common: eager computes
    return t


def _columns_apart(x):
    t = x * 2
    t[:, 0] += t[:, 1]          # one storage, no element in common: compiled
    return t


@pytest.mark.expect_fallback("unsupported", reason="shared elements through views with gaps")
def test_views_with_gaps_sharing_elements_compute_as_eager(code_generator):
    jitted = dynamo.jit(_columns_sharing_elements, backend=code_generator)
    x = torch.randn(4, 4)
    torch.testing.assert_close(jitted(x), _columns_sharing_elements(x))


def test_views_with_gaps_apart_compile(code_generator):
    jitted = dynamo.jit(_columns_apart, backend=code_generator)
    x = torch.randn(4, 4)
    torch.testing.assert_close(jitted(x), _columns_apart(x))
