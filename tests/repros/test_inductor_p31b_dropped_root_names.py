"""A compiled graph's output saved by that graph, renamed by a later graph's write and then
dropped by the caller before the backward (program fuzzer P31: inductor seeds 23071, 28210;
issue 21).

Eager's saved tensor holds the tensor it saved (an input of the saving op: `amin`'s,
`maximum`'s) and its error names that tensor's node at backward time: after `t *= s` "output
0 of Mul", after `t[:, 1] = s` "output 0 of torch::autograd::CopySlices". The check holds
only the counter of such an output (holding the tensor would make a reference cycle through
the graph's node) and, once the caller dropped it, named the node the graph made it with
("output 0 of Silu", "of Add"). A later compiled graph's write now notes eager's name on the
earlier calls' watches. Each case compares the exact error with eager's. Backends: `eager`
(control), inductor with the C++ and the Triton (interpreted on the CPU) code generators.
"""
import pytest
import torch

import dynamo
from tests.repros.conftest import values


def _multiplied(x):
    g = x.detach().clone().requires_grad_()
    t = torch.nn.functional.silu(g)
    low = t.amin(0)
    t *= t.mean().item()   # a graph break: the write is the next graph's
    return low, g


def _slice_written(x):
    t = x * 2
    high = torch.maximum(t, t)
    t[:, 1] = high.max().item()
    return high, x




def _error(fn, backend, grad):
    function = fn if backend is None else dynamo.jit(fn, backend=backend)
    x = values((4, 2), 1).requires_grad_(grad)
    saver, _ = function(x)
    with pytest.raises(RuntimeError) as caught:
        saver.sum().backward()
    return str(caught.value)


@pytest.mark.parametrize("fn,name", [(_multiplied, "Mul"), (_slice_written, "CopySlices")],
                         ids=["mul", "slice"])
def test_dropped_root_named_as_eager(code_generator, fn, name):
    grad = fn is _slice_written
    expected = _error(fn, None, grad)
    assert f"output 0 of {name}" in expected or f"of torch::autograd::{name}" in expected \
        or f"of {name}Backward0" in expected
    assert _error(fn, code_generator, grad) == expected
