"""A region resumed inside a `set_grad_enabled(False)` block (a graph break in it) starts with
grad mode off and turns it back on in its graph; the compiled training graph ran under
`enable_grad`, but the views its epilogue rebuilt of its outputs were made with grad mode off
again: `linear`'s result (a view of its hidden product) required grad with no grad_fn, and
backward() gave the parameters no gradient (program fuzzer, inductor seed 300)."""
import torch

import dynamo

LINEAR = torch.nn.Linear(3, 3)


def block_with_a_break_then_a_layer(y):
    with torch.set_grad_enabled(False):
        flag = bool((y < 1).all())  # a graph break inside the block
    return LINEAR(torch.arange(3.0)), flag


def _gradients(fn, y):
    LINEAR.zero_grad(set_to_none=True)
    out, _ = fn(y)
    out.sum().backward()
    return out.detach(), LINEAR.weight.grad.clone(), LINEAR.bias.grad.clone()


def test_parameters_get_their_gradients(backend):
    jitted = dynamo.jit(block_with_a_break_then_a_layer, backend=backend)
    y = torch.randn(2, 3)
    expected = _gradients(block_with_a_break_then_a_layer, y)
    for _ in range(2):
        for actual, wanted in zip(_gradients(jitted, y), expected):
            torch.testing.assert_close(actual, wanted)
