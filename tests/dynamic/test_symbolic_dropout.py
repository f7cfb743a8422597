"""Training-mode dropout over symbolic sizes draws eager's random numbers (C++ backend).

A symbolic trace runs under torch's Python dispatcher, whose Python `dropout` calls
`native_dropout`, decomposed as `rand_like(x) > p`, where ATen's CPU `dropout` fills
`bernoulli_(1 - p)`: a Dropout traced with symbolic sizes zeroed other elements than eager's
with the same seed, a wrong sum where the static compile matched (found under
JIT_DYNAMIC_BY_DEFAULT=1 by tests/repros/test_p42_exit_on_graph_error.py). The traces now run
ATen's C++ composite for it (inductor/python_dispatcher.py). On the C++ backend random ops run
as eager's kernels, so the values are eager's; Triton kernels draw their own (documented in
inductor/lower/random.py) and are not compared here.
"""
import pytest
import torch
from torch import nn

import dynamo
import inductor


def _net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Dropout(0.3), nn.Linear(8, 4),
                         nn.Dropout(0.1)).train()


def _forward(net, x):
    return net(x) * 2


@pytest.mark.parametrize("backend", ["eager", "inductor"])
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_dropout_over_symbolic_sizes_draws_eager_values(backend, grad, monkeypatch):
    monkeypatch.setattr(inductor.config, "cpu_backend", "cpp")
    mine, theirs = _net(), _net()
    jitted = dynamo.jit(_forward, backend=backend, dynamic=True)
    for call, rows in enumerate((5, 7, 12, 3)):
        x = torch.randn(rows, 8, generator=torch.Generator().manual_seed(call))
        with torch.set_grad_enabled(grad):
            torch.manual_seed(100 + call)
            expected = _forward(theirs, x)
            after_eager = torch.rand(2)   # the generator left where eager leaves it
            torch.manual_seed(100 + call)
            actual = jitted(mine, x)
            after_jit = torch.rand(2)
        assert torch.equal(actual, expected), rows
        assert torch.equal(after_jit, after_eager), rows
        if grad:
            expected.sum().backward()
            actual.sum().backward()
            for got, want in zip(mine.parameters(), theirs.parameters()):
                torch.testing.assert_close(got.grad, want.grad, rtol=1e-6, atol=1e-6)
