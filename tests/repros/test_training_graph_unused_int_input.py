"""Program fuzzer seed 47521 (inductor): a graph that needs autograd (an input requiring
grad) after a loop whose counter `k` became a symbolic int. The partitioned forward kept `k`
as an unread plain-int input, and lowering read `.device` of it: an internal error
(`'int' object has no attribute 'device'`), run eagerly. Now an unread number input is an
argument the compiled graph takes and ignores."""
import pytest
import torch

import dynamo

LOG = []


def _program(w, t):
    k = 0
    while w.abs().sum() > 1.0 and k < 3:
        w = w * 0.5
        k += 1
    LOG.append(float(k))
    scaled = (w * torch.nn.functional.pad(w, (0, 0, 1, 0)).sum(0)).detach()
    copied = torch.tensor(t.tolist(), requires_grad=True)   # a graph break
    return k * scaled, t * 2, copied


@pytest.mark.expect_fallback("unsupported", reason="torch.tensor(..., requires_grad=True) "
                             "starts autograd history inside a graph: run as is, documented")
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_training_graph_with_an_unread_int_input(backend):
    jitted = dynamo.jit(_program, backend=backend)
    for scale in (1.0, 0.3, 2.0):
        w = torch.full((4, 4), scale)
        t = torch.linspace(-1, 1, 12).reshape(3, 4).requires_grad_()
        t_eager = t.detach().clone().requires_grad_()
        LOG.clear()
        actual = jitted(w, t)
        logged = list(LOG)
        LOG.clear()
        expected = _program(w, t_eager)
        assert logged == LOG
        for got, want in zip(actual, expected):
            torch.testing.assert_close(got, want)
            assert got.requires_grad == want.requires_grad
        actual[1].sum().backward()
        expected[1].sum().backward()
        torch.testing.assert_close(t.grad, t_eager.grad)
