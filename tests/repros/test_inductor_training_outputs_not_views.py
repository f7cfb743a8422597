"""Outputs of a compiled training graph are views only where eager's are (program fuzzer seed
60144, batch 60000-60199 at 761ffee). The generated forward returned `lin(v) * 1.5` for a 1-D
`v` as a view of its buffer; a write into it under `no_grad` made any later use raise "Output
1 of CompiledFunction is a view and its base or another view of its base has been modified
inplace" (a view made inside a custom Function may not be written). Backends: `eager`
(control), inductor with the C++ and the Triton (interpreted on the CPU) code generators.
"""
import torch

import dynamo


def test_output_written_under_no_grad_then_used(code_generator):
    torch.manual_seed(0)
    linear = torch.nn.Linear(3, 3)

    def f(w):
        return linear(w.amax(1)) * 1.5
    results = []
    for function in (f, dynamo.jit(f, backend=code_generator)):
        w = torch.linspace(-1, 1, 9).reshape(3, 3)
        y = function(w)
        assert y._base is None
        with torch.no_grad():
            y.mul_(y)
        assert not y.is_leaf and y.requires_grad
        y.sum().backward()
        results.append((y.detach().clone(), linear.weight.grad.clone()))
        linear.weight.grad = None
        linear.bias.grad = None
    torch.testing.assert_close(results[1], results[0])
