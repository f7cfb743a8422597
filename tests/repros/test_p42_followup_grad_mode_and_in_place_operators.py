"""Follow-ups of P42 (042b65b: an error inside a compiled graph leaves what eager leaves).

1. P42 counted every bare `torch.set_grad_enabled(flag)` as a mode an error would leave
   switched, even one that put back the mode the frame started in, and counted the switch
   that a `with torch.set_grad_enabled(False):` then entered; and it counted views such as
   `x[:, 0]` as operations that may raise when the graph runs. So the fuzzer's seed 6155
   (`torch.set_grad_enabled(False)`, `v1 = x[:, 0]`, `torch.set_grad_enabled(g1)`,
   `x += y.matmul(w.T)` giving `x` autograd history) broke its graph before the write, and
   the resume function took the stale no-grad view `v1` as an input: wrapping it raised 'A view
   was created in no_grad mode ...' while tracing
   (tests/repros/test_inductor_autograd_state_of_aliases.py). Now the trace compares the
   grad mode an error would leave (the mode before the outermost open grad-mode `with` block,
   else the mode now) with the one the glue puts back (`ExceptionPath.grad_left_differs`), and
   views whose failures fake tensors see do not count (`side_effects.cannot_raise`).
2. `trace.graph._written_region` did not see the in-place operators (`v1 *= a3`), so a write
   into a region that shares elements with another argument, which eager refuses when it runs
   it, was not refused while tracing as `v1.mul_(a3)` is: with inductor the graph computed a
   value where eager raises.
"""
import pytest
import torch

import dynamo
from tests.capture.differential import break_reasons, check
from tests.repros.test_p42_exit_on_graph_error import BAD, GOOD, _compare


def bare_switches_then_history(x, y, w):
    enabled = torch.is_grad_enabled()
    torch.set_grad_enabled(False)
    v = x[:, 0]                          # a view: it cannot raise when the graph runs
    torch.set_grad_enabled(enabled)      # the mode the frame started in: nothing to undo
    x += y.matmul(w.T)                   # x gains autograd history (no copy puts it back)
    return x * 2, v.shape


def with_set_grad_then_history(x, w):
    with torch.set_grad_enabled(False):  # a `with`: its exit puts the mode back
        y = x * 2
    x.add_(w)                            # x gains autograd history
    return y + x


@pytest.mark.parametrize("fn, args", [
    (bare_switches_then_history, (torch.ones(2, 3), torch.ones(2, 3),
                                  torch.ones(3, 3, requires_grad=True))),
    (with_set_grad_then_history, (torch.ones(3), torch.ones(3, requires_grad=True))),
], ids=["bare_switches", "with_set_grad_enabled"])
def test_grad_mode_put_back_keeps_one_graph(backend, fn, args):
    """No error could leave another grad mode than the glue puts back: one graph, no break,
    eager's values and autograd state."""
    check(fn, *args, graphs=1, breaks=0, backend=backend)


def bare_switch_left_then_metadata_write(x, i):
    torch.set_grad_enabled(False)        # left off: an error below leaves grad mode off
    y = x.index_select(0, i)             # may raise when the graph runs
    x.unsqueeze_(0)                      # a write no copy puts back
    return y


def test_a_grad_mode_left_switched_still_breaks(backend):
    """The exposure P42 found is kept: a bare switch the frame does not undo, then an
    operation that may raise, then a write that cannot be put back: a graph break, and the
    same error, grad mode and inputs as eager."""
    jitted = dynamo.jit(bare_switch_left_then_metadata_write, backend=backend)
    for index in (GOOD, BAD, BAD, GOOD):  # `_outcome` switches grad mode back on after
        _compare(bare_switch_left_then_metadata_write, jitted,
                 torch.arange(6.0).reshape(3, 2), index)
    found = break_reasons(jitted)
    assert len(found) == 1 and "may raise when the graph runs" in found[0], found


def multiply_into_an_overlapping_view(a3):
    v1 = a3.unsqueeze(0)
    v1 *= a3                             # eager refuses: the elements are shared
    return v1


def multiply_into_a_shifted_view(x):
    v = x[1:]
    v *= x[:-1]                          # a partial overlap: eager refuses it too
    return x


@pytest.mark.parametrize("fn", [multiply_into_an_overlapping_view,
                                multiply_into_a_shifted_view])
def test_in_place_operator_into_shared_elements_is_refused_while_tracing(backend, fn):
    """`v *= a` is refused while tracing as `v.mul_(a)` is (a graph break before it), and
    raises eager's error."""
    with pytest.raises(RuntimeError, match="single memory location"):
        fn(torch.randn(4, 4))
    check(fn, torch.randn(4, 4), graphs=None, breaks=1, backend=backend)


def stale_view_live_across_a_break(x, y, w):
    with torch.no_grad():
        v = x[:, 0]
    x += y.matmul(w.T)                   # v is now a view eager refuses to give a history
    print("a graph break")
    return x * 2, v.shape


def test_a_stale_no_grad_view_live_across_a_graph_break(backend):
    """The resume function takes the stale no-grad view `v` as an input; making its fake
    tensor read `v.is_leaf`, which raises 'A view was created in no_grad mode' (also at
    042b65b~1): such an input now breaks the graph where it is used, and runs as eager."""
    jitted = dynamo.jit(stale_view_live_across_a_break, backend=backend)
    w = torch.ones(3, 3, requires_grad=True)
    expected = stale_view_live_across_a_break(torch.ones(2, 3), torch.ones(2, 3), w)
    actual = jitted(torch.ones(2, 3), torch.ones(2, 3), w)
    torch.testing.assert_close(actual[0], expected[0])
    assert actual[1] == expected[1] and actual[0].requires_grad
