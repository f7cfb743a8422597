"""A size symbol the trace fixed to a constant (a guard made `s1` equal 5) stays a SymInt in
the training runtime's output geometry, and a real tensor's `view` refuses a SymInt even of
known value: an `nn.LSTM` step under every-size-dynamic raised "SymIntArrayRef expected to
contain only concrete integers" where eager returns its outputs (found under
`JIT_DYNAMIC_BY_DEFAULT=1` by tests/training/test_modules.py::test_module_dynamo[lstm]). The
output infos now hold such values as ints (inductor/autograd/runtime.py)."""
import pytest
import torch

import dynamo


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_lstm_training_step_with_every_size_dynamic(backend):
    torch.manual_seed(0)
    module = torch.nn.LSTM(8, 16, batch_first=True)
    twin = torch.nn.LSTM(8, 16, batch_first=True)
    twin.load_state_dict(module.state_dict())

    def step(model, x):
        output, (hidden, cell) = model(x)
        loss = output.sum() + hidden.sum() + cell.sum()
        loss.backward()
        return output, hidden, cell

    jitted = dynamo.jit(step, backend=backend, dynamic=True)
    for batch, length in ((2, 5), (3, 5), (4, 7)):
        x = torch.randn(batch, length, 8)
        expected = step(twin, x.clone())
        actual = jitted(module, x.clone())
        for got, want in zip(actual, expected):
            torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
            assert got.shape == want.shape and got.stride() == want.stride()
        for mine, theirs in zip(module.parameters(), twin.parameters()):
            torch.testing.assert_close(mine.grad, theirs.grad, atol=1e-5, rtol=1e-5)
