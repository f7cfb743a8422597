"""A view made inside an op and saved by it, whose base is written before the backward
(program fuzzer P31: inductor seeds 27048, 20036; issue 21).

`F.linear` of a 1-D input saves `y.unsqueeze(0)`, a view that is no value of the graph. When
`y` is written afterwards (in the graph, or by the caller) and a gradient reaches `y`, eager's
saved view regenerates its node and the error names it: "..., which is output 0 of
AsStrided, is at version 1". The check found no value of the graph for it and named none.
Each case compares the exact error with eager's. Backends: `eager` (control), inductor with
the C++ and the Triton (interpreted on the CPU) code generators.
"""
import pytest
import torch

import dynamo
from tests.repros.conftest import values


def _linear():
    torch.manual_seed(0)
    return torch.nn.Linear(3, 3)


def _written_in_graph(lin, y, x):
    t1 = lin(y)
    y[1:2] = t1.amax(-1, keepdim=True)
    return t1, x


def _written_by_caller(lin, y, x):
    return lin(y), x


def _error(fn, backend, caller_writes, grad):
    function = fn if backend is None else dynamo.jit(fn, backend=backend)
    lin = _linear()
    y = values((3,), 1)
    if grad:
        y = y.requires_grad_().clone()   # a non-leaf requiring grad (writable in place)
    result, _ = function(lin, y, values((4, 3), 2))
    if caller_writes:
        y[1:2] = result.amax(-1, keepdim=True)
    with pytest.raises(RuntimeError) as caught:
        result.sum().backward()
    return str(caught.value)


@pytest.mark.parametrize("grad", [False, True], ids=["plain", "requires_grad"])
@pytest.mark.parametrize("fn,caller_writes", [(_written_in_graph, False),
                                              (_written_by_caller, True)],
                         ids=["in_graph", "by_caller"])
def test_inner_view_named_as_eager(code_generator, fn, caller_writes, grad):
    expected = _error(fn, None, caller_writes, grad)
    assert "AsStrided" in expected
    assert _error(fn, code_generator, caller_writes, grad) == expected
