"""Tensors eager's autograd saves, dropped by the caller before `backward()` (program fuzzer
P31: inductor seeds 11662, 21113, 21246; issue 21).

Eager's saved tensor holds the tensor it saved until the backward has run: its version
counter, which the caller's aliases share (`y.detach()` inside the function, saved by
`minimum`: the caller's `y` written afterwards), and its autograd node, which names the
error ("output 0 of CopySlices" after a later write through a slice). The compiled graph's
check referenced the inputs and outputs weakly: a tensor the caller had dropped was skipped
as gone (the backward returned where eager raises) or named as it was at the call. Each
case runs eagerly and jitted and compares the outcome of `backward()`; the last ones check
that the tensors are let go when eager lets them go (no reference cycle: the garbage
collector stays off). Backends: `eager` (control), inductor with the C++ and the Triton
(interpreted on the CPU) code generators.
"""
import gc
import weakref

import pytest
import torch

import dynamo
from tests.repros.conftest import values


def _outcome(fn, backend, make, after):
    """The error of `backward()` (type and message), or the gradients of the leaves."""
    function = fn if backend is None else dynamo.jit(fn, backend=backend)
    arguments, leaves = make()
    loss = after(function(*arguments), arguments)
    del arguments   # the caller drops every argument before the backward
    try:
        loss.backward()
    except RuntimeError as error:
        return type(error).__name__, str(error)
    return [None if leaf.grad is None else leaf.grad.tolist() for leaf in leaves]


def _assert_same(fn, backend, make, after):
    expected = _outcome(fn, None, make, after)
    assert _outcome(fn, backend, make, after) == expected
    return expected


def test_input_alias_dropped_while_the_caller_writes_its_counter(code_generator):
    # seed 11662: minimum saves the alias y, which dies with the function; the caller's y
    # shares its counter
    def fn(y):
        y = y.detach()
        g = y.clone().requires_grad_()
        return torch.minimum(g, y)

    def make():
        y = torch.tensor([-1.0, 0.5, 2.0])
        return [y], []

    def after(result, arguments):
        arguments[0].mul_(2)
        return result.sum()
    expected = _assert_same(fn, code_generator, make, after)
    assert "modified by an inplace operation" in expected[1]


@pytest.mark.parametrize("history", [False, True], ids=["leaf", "with_history"])
def test_saved_input_written_then_dropped_by_the_caller(code_generator, history):
    # seed 21113: `t5 * x` saves t5, which the caller writes and drops; with history, eager
    # names the node of the caller's write ("output 0 of Add")
    def fn(t5, x):
        return t5 * x

    def make():
        x = values((2, 2), 1).requires_grad_()
        if not history:
            return [values((2, 2), 2), x], [x]
        w = values((2, 2), 2).requires_grad_()
        return [w * 1, x], [x, w]

    def after(result, arguments):
        arguments[0].add_(1)
        return result.sum()
    expected = _assert_same(fn, code_generator, make, after)
    assert ("output 0 of Add" in expected[1]) == history


def test_output_without_history_written_by_a_later_graph(code_generator):
    # seed 21246: linear saves t0 (no autograd history); the graph after the break writes a
    # slice of it from linear's result, which gives t0 the node CopySlices, and drops it
    lin = torch.nn.Linear(4, 4)
    with torch.no_grad():
        lin.weight.copy_(values((4, 4), 3))
        lin.bias.copy_(values((4,), 4))

    def fn(x, w):
        t0 = torch.matmul(x, w)
        t1 = lin(t0)
        print("break")
        t0[:, 3] = t1.select(1, 0)
        return t1

    def make():
        return [values((4, 4), 5), values((4, 4), 6)], [lin.weight]

    expected = _assert_same(fn, code_generator, make, lambda result, arguments: result.sum())
    assert "CopySlices" in expected[1]


def _lifetimes(fn, backend, retain):
    """Whether the input the function saved is alive: after the call (the caller dropped
    it), after a backward, after a second one (`retain`), after the result is dropped."""
    function = fn if backend is None else dynamo.jit(fn, backend=backend)
    x = values((8, 8), 7).requires_grad_()
    a = values((8, 8), 8)
    reference = weakref.ref(a)
    result = function(a, x)
    del a
    alive = [reference() is not None]
    result.sum().backward(retain_graph=retain)
    alive.append(reference() is not None)
    if retain:
        result.sum().backward()
        alive.append(reference() is not None)
    del result
    alive.append(reference() is not None)
    return alive


@pytest.mark.parametrize("retain", [False, True], ids=["once", "retained"])
def test_held_input_let_go_as_eager_lets_it_go(code_generator, retain):
    def fn(a, x):
        return a * x

    enabled = gc.isenabled()
    gc.disable()
    try:
        expected = _lifetimes(fn, None, retain)
        assert _lifetimes(fn, code_generator, retain) == expected
    finally:
        if enabled:
            gc.enable()
    assert expected[0] and not expected[-1]


def test_held_tensor_with_history_let_go_when_the_result_is_dropped(code_generator):
    # the held input has a node of its own (an earlier op); nothing links it back to the
    # compiled graph's node: dropping the result frees it without the garbage collector
    def fn(a, x):
        return a * x

    enabled = gc.isenabled()
    gc.disable()
    try:
        function = dynamo.jit(fn, backend=code_generator)
        x = values((8, 8), 9).requires_grad_()
        a = values((8, 8), 10).requires_grad_() * 2
        reference = weakref.ref(a)
        result = function(a, x)
        del a
        assert reference() is not None   # eager's saved tensor holds it as well
        del result
        assert reference() is None
    finally:
        if enabled:
            gc.enable()
