"""An input of a compiled training graph that no arriving gradient reaches keeps `.grad` None
(program fuzzer seed 60300, batch 60200-60499 at 6a2e414). The graph returned `t1` and kept
`mm(x, w.T)` for an object; `t1.sum().backward()` gave the unused output a zero tangent and
the compiled backward returned zeros for `x` and `w`, which autograd stored as their `.grad`
where eager leaves None. Backends: `eager` (control), inductor with the C++ and the Triton
(interpreted on the CPU) code generators.
"""
import pytest
import torch

import dynamo


class Box:
    def __init__(self, value):
        self.value = value


@pytest.mark.parametrize("through", ["first", "second", "both"])
def test_gradient_only_where_an_output_used_reaches(code_generator, through):
    def f(g, x, w):
        return g.sin() * 2, Box(torch.mm(x, w.T))

    def loss(first, box):
        parts = {"first": [first], "second": [box.value], "both": [first, box.value]}[through]
        return sum(part.sum() for part in parts)
    grads = []
    for function in (f, dynamo.jit(f, backend=code_generator)):
        leaves = [torch.linspace(-1, 1, 4).reshape(2, 2).requires_grad_() for _ in range(3)]
        loss(*function(*leaves)).backward()
        grads.append([leaf.grad for leaf in leaves])
    assert [g is None for g in grads[1]] == [g is None for g in grads[0]]
    torch.testing.assert_close([g for g in grads[1] if g is not None],
                               [g for g in grads[0] if g is not None])
