"""A tensor read for the first time after the graph wrote its memory through another view with
an operand requiring grad (`v = x.view(-1); v *= w` where w requires grad, then `x`) crashed
the capture: the fake `x`, made from the already-written fake base, requires grad, the real
`x` does not yet, and the fake-tensor converter's consistency check raised AssertionError
(program fuzzer, eager seeds 5562 and 5713). Such a read now breaks the graph: it happens
after the write has run."""
import pytest
import torch

from tests.capture.differential import check


@pytest.mark.expect_fallback("unsupported", reason="inductor runs graphs that create tensors requiring grad as they are (cb254be)")
def test_view_written_with_a_leaf_requiring_grad_then_base_read(backend):
    def f(b):
        x = b[1:]
        v = x.view(-1)
        w = torch.tensor(v.tolist(), requires_grad=True)
        t = v
        v *= w
        return [t, x, b]
    check(f, torch.randn(3, 2), graphs=None, breaks=None, backend=backend)


def test_view_written_without_grad_then_base_read_stays_one_graph(backend):
    def f(x, w):
        v = x.view(-1)
        v *= w
        return x + 1
    check(f, torch.randn(3, 2)[1:], torch.randn(4), graphs=1, breaks=0, backend=backend)


@pytest.mark.expect_fallback("unsupported", reason="inductor runs graphs that create tensors requiring grad as they are (cb254be)")
def test_leaf_requiring_grad_written_in_place_raises_as_in_eager(backend):
    def f(x):
        w = torch.ones(4, requires_grad=True)
        v = w.view(2, 2)
        v.add_(x)
        return w
    check(f, torch.randn(2, 2), graphs=None, breaks=None, backend=backend)
