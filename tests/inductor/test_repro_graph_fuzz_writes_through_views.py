"""Repros of the CPU graph campaign at fb48edd (torch 2.11, seeds 30,000-45,379): writes through
`as_strided` (or `unfold`, which decomposes to it) into an input.

- Seed 32108: `torch.as_strided(a4, [2], [2], 32).zero_()` with `a4 = r[::3]`: positions 32
  and 34 of the storage lie between `a4`'s elements. The write became `as_strided_scatter` into
  `a4`'s new value, which holds only `a4`'s elements, so the write was lost (the compiled
  graph returned the old values). Such a graph now runs as is.
- Seed 33544: `v = a0.unfold(1, 1, 2)`, then `a0.scatter_add_(...)`, then `v.copy_(-1)`: the
  view is made before the owner's first write but written after it; the write was placed at
  eager's strides into the owner's fresh (contiguous) value: "setStorage ... out of bounds".
  Whether the owner is still unwritten is now judged where the write through the view lands
  (here it is not: the graph runs as is).
"""
import pytest
import torch

import inductor
from tests.inductor.conftest import compile_function


@pytest.fixture(params=["cpp", "triton"])
def cpu_backend(request, monkeypatch):
    monkeypatch.setattr(inductor.config, "cpu_backend", request.param)
    return request.param


def _check_with_bases(function, make):
    """Eager and compiled on fresh inputs from `make`: results, and every input's whole
    storage (writes between a view's elements are invisible in the view itself)."""
    eager_inputs, compiled_inputs = make(), make()
    compiled = compile_function(function, *make())
    expected, actual = function(*eager_inputs), compiled(*compiled_inputs)
    torch.testing.assert_close(actual, expected, equal_nan=True)
    for want, got in zip(eager_inputs, compiled_inputs):
        base_want = want if want._base is None else want._base
        base_got = got if got._base is None else got._base
        torch.testing.assert_close(base_got, base_want, equal_nan=True)
    return compiled


@pytest.mark.expect_fallback("unsupported", reason="a write between an input's elements runs "
                             "as is")
def test_write_through_as_strided_between_an_inputs_elements(cpu_backend):
    """Seed 32108: offset 32 lies between the elements of `r[::3]`."""
    _write_through_as_strided(32, 2, 3)


@pytest.mark.parametrize("offset, stride, step", [(12, 1, 3), (13, 12, 3), (5, 3, 1)])
def test_write_through_as_strided_onto_an_inputs_elements(cpu_backend, offset, stride, step):
    """Writes that land on the input's own elements stay compiled."""
    _write_through_as_strided(offset, stride, step)


def _write_through_as_strided(offset, stride, step):
    def function(a4):
        view = torch.as_strided(a4, [2], [stride], offset)
        view.zero_()
        return (view, a4 * 1)

    def make():
        return [(torch.arange(60, dtype=torch.int16).reshape(15, 2, 2) + 1)[::step]]
    compiled = _check_with_bases(function, make)
    between = offset == 32
    assert (compiled.report.reason is not None) == between, compiled.report.reason


@pytest.mark.expect_fallback("unsupported", reason="a write through `unfold` into an owner "
                             "written before runs as is")
def test_view_made_before_the_owners_first_write_written_after(cpu_backend):
    """Seed 33544 (it runs as is: the owner's new value is laid out as the graph chooses)."""
    def function(a0, a1, a2):
        view = a0.unfold(1, 1, 2)
        same = a0.to(torch.float64)   # a0 itself
        same.scatter_add_(0, a1, a2)
        view.copy_(-1)
        return (a0 * 1,)

    def make():
        rows = torch.arange(16, dtype=torch.float64).reshape(8, 2)
        return [rows[:, ::2], torch.tensor([[2], [0]]),
                torch.tensor([[0.5], [0.25]], dtype=torch.float64)]
    _check_with_bases(function, make)
