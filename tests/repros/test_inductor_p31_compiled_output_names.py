"""A tensor an earlier compiled graph made, saved by a later graph and written before the
backward (program fuzzer P31: inductor seed 17747; issue 21).

Eager's "modified by an inplace operation" error names the node that made the saved tensor
("output 0 of Mm"): the tensor came from an earlier compiled graph, whose autograd node is
the graph's own, and the later graph's check named that ("output 0 of CompiledFunction").
Each case runs eagerly and jitted and compares the exact error. Backends: `eager`
(control), inductor with the C++ and the Triton (interpreted on the CPU) code generators.
"""
import pytest
import torch

import dynamo
from tests.repros.conftest import values


def _error(fn, backend, grad):
    function = fn if backend is None else dynamo.jit(fn, backend=backend)
    saver, made = function(values((4, 4), 1).requires_grad_())
    with torch.set_grad_enabled(grad):   # under no_grad the write renames no node
        made.add_(1)
    with pytest.raises(RuntimeError) as caught:
        saver.sum().backward()
    return str(caught.value)


def _saved_whole(x):
    w = torch.mm(x, x.T)
    print("break")   # w is an input of the graph after the break, which saves it
    return w * w, w


def _saved_with_a_view_of_it(x):
    w = torch.mm(x, x.T)
    v = w[:2]
    print("break")
    return torch.matmul(v, w), w


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize("fn", [_saved_whole, _saved_with_a_view_of_it],
                         ids=["whole", "with_a_view"])
def test_output_of_an_earlier_graph_named_as_eager(code_generator, fn, grad):
    expected = _error(fn, None, grad)
    assert ("output 0 of Mm" in expected or "output 0 of MmBackward0" in expected) != grad
    assert _error(fn, code_generator, grad) == expected
