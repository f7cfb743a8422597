"""Eager's version-error message over symbolic sizes: a graph after a break takes a view and
its base as inputs; a symbolic trace's example inputs keep the view's base, so both share a
version counter, and the saved base was found as a view of the first input: its name, "which
is output 0 of Mm", was lost (found under JIT_DYNAMIC_BY_DEFAULT=1 by
tests/repros/test_inductor_p31_compiled_output_names.py; inductor/autograd/versions._root_of
now prefers the saved tensor itself among the inputs sharing its counter)."""
import pytest
import torch

import dynamo


def _saved_with_a_view_of_it(x):
    w = torch.mm(x, x.T)
    v = w[:2]
    print("break")
    return torch.matmul(v, w), w


def _error(function, size: int, grad: bool) -> str:
    x = torch.randn(size, size, generator=torch.Generator().manual_seed(size)) \
        .requires_grad_()
    saver, made = function(x)
    with torch.set_grad_enabled(grad):
        made.add_(1)
    with pytest.raises(RuntimeError) as caught:
        saver.sum().backward()
    return str(caught.value)


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_saved_base_of_a_view_named_as_eager_over_symbolic_sizes(backend, grad, capsys):
    jitted = dynamo.jit(_saved_with_a_view_of_it, backend=backend, dynamic=True)
    for size in (4, 5, 7):
        expected = _error(_saved_with_a_view_of_it, size, grad)
        assert ("output 0 of Mm" in expected or "output 0 of MmBackward0" in expected) != grad
        assert _error(jitted, size, grad) == expected
    assert capsys.readouterr().out == "break\n" * 6
