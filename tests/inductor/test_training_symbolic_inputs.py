"""Peer finding I8 (PyTorch's test_dtype_sympy_expr): torch.compile with dynamic shapes hands
`compile_fx` a training graph whose inputs include symbolic sizes; the training path sent them
to lowering (`'SymInt' object has no attribute 'device'`). Such a graph gets one static
training compile per input size (`inductor/size_variants.py`), as an inference graph with
symbolic sizes does: a counted "per_size" fallback, gradients as eager's."""
import pytest

import inductor


def _trim(a):
    return a[..., :-1, :].contiguous() * 2


@pytest.mark.torch_compile
@pytest.mark.expect_fallback("per_size", reason="symbolic sizes: a static variant per size")
def test_training_graph_with_symbolic_sizes(monkeypatch):
    import torch._dynamo
    monkeypatch.setattr(torch._dynamo.config, "assume_static_by_default", False)
    monkeypatch.setattr(inductor.config, "fallback_on_error", False)
    torch._dynamo.reset()
    compiled = torch.compile(_trim, backend=inductor.compile_fx)
    for shape in ((1, 2, 16, 4), (1, 3, 9, 4)):
        x = torch.randn(*shape, requires_grad=True)
        x_eager = x.detach().clone().requires_grad_()
        actual, expected = compiled(x), _trim(x_eager)
        torch.testing.assert_close(actual, expected)
        actual.sum().backward()
        expected.sum().backward()
        torch.testing.assert_close(x.grad, x_eager.grad)
    torch._dynamo.reset()
