"""Peer finding I8 (PyTorch's test_dtype_sympy_expr): torch.compile with dynamic shapes hands
`compile_fx` a training graph whose inputs include symbolic sizes; the training path sent them
to lowering (`'SymInt' object has no attribute 'device'`). Such a graph gets one static
training compile per input size (`inductor/size_variants.py`), as an inference graph with
symbolic sizes does: a counted "per_size" fallback, gradients as eager's."""
import pytest
import torch

import inductor


def _trim(a):
    return a[..., :-1, :].contiguous() * 2


@pytest.mark.torch_compile
@pytest.mark.expect_fallback("per_size", reason="symbolic sizes: a static variant per size")
def test_training_graph_with_symbolic_sizes(monkeypatch):
    import torch._dynamo  # noqa: F401  (torch.compile's config)
    # torch's own patch: pytest's monkeypatch deletes a config entry on undo (ConfigModule
    # keeps it outside the module's __dict__) and torch then hides it for good, so every
    # later torch.compile in the worker failed ('...assume_static_by_default does not exist')
    monkeypatch.setattr(inductor.config, "fallback_on_error", False)
    torch._dynamo.reset()
    with torch._dynamo.config.patch(assume_static_by_default=False):
        _train_per_size(torch.compile(_trim, backend=inductor.compile_fx))
    torch._dynamo.reset()


def _train_per_size(compiled):
    for shape in ((1, 2, 16, 4), (1, 3, 9, 4)):
        x = torch.randn(*shape, requires_grad=True)
        x_eager = x.detach().clone().requires_grad_()
        actual, expected = compiled(x), _trim(x_eager)
        torch.testing.assert_close(actual, expected)
        actual.sum().backward()
        expected.sum().backward()
        torch.testing.assert_close(x.grad, x_eager.grad)
