"""Program fuzzer seed 52236 (inductor, campaign at fb48edd): eager raises "Trying to backward
through the graph a second time" and the jitted program did not.

```python
self.avg[:2] = self.w                     # a buffer's new value requires grad
self.avg.mul_(0.9).add_(t.detach() * 0.1)
return self.avg                           # then out[-1].backward() after each of two calls
```
Eager's `mul_(0.9)` saves its factor (a wrapped number), freed by the first call's backward;
the second call's `avg[:2] = w` keeps the first call's history as an edge, so the second
backward reaches the freed node and raises. The compiled node saved nothing (its backward reads
no saved value) and ran again. Now a node whose traced eager history holds a node that saves
tensors (`joint.freeing_groups`) saves an empty token when it keeps nothing else: autograd
frees it as eager's, and a second backward raises eager's error. A history that saves nothing
still runs again, as eager's (P29, seed 14478)."""
import pytest
import torch

import dynamo


def _program(factor_saves):
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(2))
            self.register_buffer("avg", torch.zeros(2))

        def forward(self, t):
            self.avg[:2] = self.w
            if factor_saves:
                self.avg.mul_(0.9)   # MulBackward0 saves the wrapped-number factor
            self.avg.add_(t.detach() * 0.1)   # AddBackward0 saves nothing
            return self.avg
    return Net()


def _run(jit, factor_saves, backend):
    net = _program(factor_saves)
    fn = (lambda y: net(y.logsumexp(-2))[-1])
    if jit:
        fn = dynamo.jit(fn, backend=backend)
    facts = []
    for _ in range(2):
        out = fn(torch.ones(2, 2))
        try:
            out.backward()
            facts.append(("ok", net.w.grad.tolist()))
        except RuntimeError as error:
            facts.append((type(error).__name__, str(error)[:60]))
    return facts


@pytest.mark.parametrize("factor_saves", [True, False])
def test_second_backward_through_a_freed_history(code_generator, factor_saves):
    expected = _run(False, factor_saves, code_generator)
    assert (expected[1][0] == "RuntimeError") == factor_saves   # the premise, in eager
    assert _run(True, factor_saves, code_generator) == expected
