"""Grad-mode blocks: the trace's undo of `set_grad_enabled(flag)` set the mode to
`not flag` instead of the mode it replaced, so `with torch.set_grad_enabled(True): pass`
under grad mode left grad mode off after tracing: the compiled call ran without grad
(results without requires_grad) and, with a graph break after such a block, grad mode stayed
off in the caller. `check` compares grad mode after every call."""
import pytest
import torch

import dynamo
from tests.capture.differential import check

LINEAR = torch.nn.Linear(3, 3)


def test_set_grad_enabled_true_under_grad_mode(backend):
    def f(x):
        y = LINEAR(x)
        with torch.set_grad_enabled(True):
            pass
        return y
    check(f, torch.ones(3), backend=backend)


def test_grad_mode_after_a_break_following_a_block(backend):
    def f(x):
        with torch.set_grad_enabled(True):
            y = LINEAR(x)
        print("after the block")
        return y * 2, torch.is_grad_enabled()
    check(f, torch.ones(3), graphs=2, breaks=1, backend=backend)


def test_break_inside_no_grad(backend):
    def f(x):
        with torch.no_grad():
            y = LINEAR(x)
            print("inside")
            z = LINEAR(y)
        return z + LINEAR(x), torch.is_grad_enabled()
    check(f, torch.ones(3), graphs=None, breaks=1, backend=backend)


def test_enable_grad_inside_no_grad_with_a_break(backend):
    def f(x):
        with torch.no_grad():
            a = LINEAR(x)
            with torch.enable_grad():
                b = LINEAR(a)
                print("innermost")
                c = LINEAR(b)
            d = LINEAR(c)
        return a, b, c, d, torch.is_grad_enabled()
    check(f, torch.ones(3), graphs=None, breaks=1, backend=backend)


def test_set_grad_enabled_as_a_call_stays_applied(backend):
    def f(x):
        torch.set_grad_enabled(False)
        return LINEAR(x)
    check(f, torch.ones(3), backend=backend)


def test_exception_leaving_a_no_grad_block(backend):
    def f(x):
        with torch.no_grad():
            y = LINEAR(x)
            if y.sum() > -1e9:
                raise ValueError("inside no_grad")
        return y
    check(f, torch.ones(3), graphs=None, breaks=None, backend=backend)


def test_no_grad_decorated_helper_with_a_break(backend):
    @torch.no_grad()
    def helper(t):
        t = LINEAR(t)
        print("helper")
        return LINEAR(t)

    def f(x):
        return helper(x) + LINEAR(x), torch.is_grad_enabled()
    check(f, torch.ones(3), graphs=None, breaks=None, backend=backend)


@pytest.mark.parametrize("outer", [True, False])
def test_called_under_either_mode(backend, outer):
    def f(x):
        with torch.set_grad_enabled(not outer):
            y = LINEAR(x)
        return y, LINEAR(x)
    with torch.set_grad_enabled(outer):
        check(f, torch.ones(3), backend=backend)
    assert torch.is_grad_enabled()


def test_grad_mode_restored_after_tracing_a_frame_that_runs_eagerly():
    def f(x):
        with torch.no_grad():
            y = LINEAR(x)
        return y
    dynamo.jit(f, backend="eager")(torch.ones(3))
    assert torch.is_grad_enabled()


def test_raise_inside_a_with_block_after_a_break(backend):
    """The region after the break enters the `with` block in its middle; `bytecode` then
    computed a negative stack size (an internal error)."""
    def f(x):
        with torch.no_grad():
            y = LINEAR(x)
            print("inside")
            if y.sum() > -1e9:
                raise ValueError("inside no_grad")
        return y
    check(f, torch.ones(3), graphs=None, breaks=None, backend=backend)
