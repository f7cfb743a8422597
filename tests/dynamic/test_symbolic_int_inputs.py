"""Graphs taking ints whose values are sizes (SymInt placeholders) compile once.

An int argument the front end makes symbolic (`x[:k]`'s `k` under `dynamic=True`) or a size
carried across a graph break (`n = x.size(0); print(); x.reshape(n * 2, -1)`: the resumed
frame's graph takes `n`) was refused by inductor's symbolic path ("SymInt graph inputs": a
static variant per size; 40 of the program fuzzer's per-size graphs at stop 41). The graph
now takes the int as a `SizeInput` (inductor/ir/nodes.py): its readers use its symbol, and
the wrapper binds the symbol from the argument (size_binding.py, kind "int").
tests/conftest.py fails a test on any fallback, `per_size` included: these compile once.
"""
import pytest
import torch

import dynamo
import inductor
from dynamic_programs import counting_backend


def _slice_scaled(x, k):
    return x[:k] * k


def _arange_by_int(x, k):
    return torch.arange(k) * x.sum() + k


def _write_a_prefix(x, k):
    x[:k].add_(1.0)
    return x.new_zeros(k, 2) + k


def _size_across_a_break(x):
    n = x.size(0)
    print("break")
    return x.reshape(n * 2, -1) * n, n + 1


def _view_by_int(x, k):
    return x.view(k, -1), k * 2


def _two_ints(x, k, j):
    return x[k:j].cos() + (j - k)


def _half_across_a_break(x):
    n = x.shape[0] // 2
    print("break")
    return x[:n] / n, torch.full((n,), 3.0)


def _written_ones_transposed(x, k):
    y = torch.ones(k, x.size(1))
    y.mul_(x[0])
    return y.t()


# name -> (function, arguments for a size n, frames compiled: one per graph)
PROGRAMS = {
    "slice_scaled": (_slice_scaled, lambda n: (torch.randn(n, 3), n - 1), 1),
    "arange_by_int": (_arange_by_int, lambda n: (torch.randn(n), n + 2), 1),
    "write_a_prefix": (_write_a_prefix, lambda n: (torch.randn(n, 2), n - 1), 1),
    "size_across_a_break": (_size_across_a_break, lambda n: (torch.randn(n, 4),), 2),
    "view_by_int": (_view_by_int, lambda n: (torch.randn(n * 2, 3), n), 1),
    "two_ints": (_two_ints, lambda n: (torch.randn(n + 5, 2), 2, n + 3), 1),
    "half_across_a_break": (_half_across_a_break, lambda n: (torch.randn(2 * n, 3),), 2),
    "written_ones_transposed": (_written_ones_transposed,
                                lambda n: (torch.randn(n, 3), n + 4), 1),
}
SIZES = [3, 5, 7, 11, 4]


def _arguments(make, size: int, seed: int) -> tuple:
    torch.manual_seed(seed)
    return make(size)


def _same(actual, expected, what: str) -> None:
    actual = actual if isinstance(actual, tuple) else (actual,)
    expected = expected if isinstance(expected, tuple) else (expected,)
    assert len(actual) == len(expected), what
    for index, (got, want) in enumerate(zip(actual, expected)):
        if isinstance(want, torch.Tensor):
            assert got.dtype == want.dtype and got.shape == want.shape, (what, index)
            assert got.stride() == want.stride(), (what, index)
            # `x.sum()` may add in another order than eager's kernel
            torch.testing.assert_close(got, want, rtol=1e-6, atol=1e-6, msg=f"{what} {index}")
        else:
            assert type(got) is type(want) and got == want, (what, index, got, want)


@pytest.mark.parametrize("code_generator", ["cpp", "triton"])
@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_int_inputs_compile_once_and_match_eager(name, code_generator, monkeypatch, capsys):
    monkeypatch.setattr(inductor.config, "cpu_backend", code_generator)
    function, make, frames = PROGRAMS[name]
    dynamo.reset()
    counting = counting_backend("inductor")
    compiled = dynamo.jit(function, backend=counting, dynamic=True)
    for seed, size in enumerate(SIZES):
        expected_arguments = _arguments(make, size, seed)
        actual_arguments = _arguments(make, size, seed)
        expected = function(*expected_arguments)
        eager_printed = capsys.readouterr().out
        _same(compiled(*actual_arguments), expected, f"{name} at {size}")
        assert capsys.readouterr().out == eager_printed
        for position, (got, want) in enumerate(zip(actual_arguments, expected_arguments)):
            if isinstance(want, torch.Tensor):
                assert torch.equal(got, want), (name, size, position)
                assert got._version == want._version, (name, size, position)
    assert counting.frame_count == frames


def _first(value):
    return value[0] if isinstance(value, tuple) else value


@pytest.mark.parametrize("name", sorted(set(PROGRAMS) - {"write_a_prefix"}))
def test_int_inputs_of_a_graph_computing_gradients(name):
    """The training path (joint graph, forward and backward) takes the ints too: its forward
    returns the sizes the backward needs, which takes them as ints. Before, such a graph
    would have been compiled as an inference graph, dropping the autograd history, had the
    inference path not refused SymInt inputs."""
    function, make, frames = PROGRAMS[name]
    dynamo.reset()
    counting = counting_backend("inductor")
    compiled = dynamo.jit(function, backend=counting, dynamic=True)
    for seed, size in enumerate(SIZES):
        expected_arguments = list(_arguments(make, size, seed))
        actual_arguments = list(_arguments(make, size, seed))
        expected_arguments[0].requires_grad_(True)
        actual_arguments[0].requires_grad_(True)
        expected = function(*expected_arguments)
        actual = compiled(*actual_arguments)
        _same(actual, expected, f"{name} at {size}")
        assert _first(actual).requires_grad
        (_first(expected) * torch.arange(_first(expected).numel()).view_as(
            _first(expected))).sum().backward()
        (_first(actual) * torch.arange(_first(actual).numel()).view_as(
            _first(actual))).sum().backward()
        torch.testing.assert_close(actual_arguments[0].grad, expected_arguments[0].grad,
                                   rtol=0, atol=0)
    assert counting.frame_count == frames
