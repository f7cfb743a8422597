"""Outputs of one graph sharing a version counter, each moved once (program fuzzer P31:
inductor seed 26569; issue 21).

`d = t.detach()` kept across a graph break next to `t`, then `t` written in place: both are
outputs of the graph and share `t`'s counter, which eager's write moved once. The runtime
moved it once per output (version 2), so a view of `t` taken after the write and saved by a
later op (`t.select(1, 1) * ...`, saved at version 1) failed the version check: the jitted
backward raised "output 0 of Select, is at version 2; expected version 1" where eager's
runs. Each case compares the results, gradients and versions with eager's. Backends: `eager`
(control), inductor with the C++ and the Triton (interpreted on the CPU) code generators.
"""
import pytest
import torch

import dynamo
from tests.repros.conftest import values


def _view_saved_after_write(x, y):
    t = 2 * x
    d = t.detach()
    t.masked_fill_(t > 0.5, 0.0)
    r = t.select(1, 1) * x.sum(-1)
    y.mean().item()   # a graph break: `t` and `d` are outputs of the graph before it
    return r, t, d


def _written_twice(x, y):
    t = x * 3
    d = t.detach()
    t.add_(1)
    t.mul_(y.sum(0))
    r = t[0] * x
    y.mean().item()
    return r, t, d


def _run(fn, backend):
    function = fn if backend is None else dynamo.jit(fn, backend=backend)
    x = values((4, 2), 1).requires_grad_()
    result, t, d = function(x, values((4, 2), 2))
    result.sum().backward()
    return result.detach(), x.grad, t._version, d._version


@pytest.mark.parametrize("fn", [_view_saved_after_write, _written_twice],
                         ids=["view_saved_after_write", "written_twice"])
def test_shared_counter_moved_once(code_generator, fn):
    expected = _run(fn, None)
    got = _run(fn, code_generator)
    torch.testing.assert_close(got[0], expected[0])
    torch.testing.assert_close(got[1], expected[1])
    assert got[2:] == expected[2:]
