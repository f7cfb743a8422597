"""The node a compiled backward's version error names, as eager's (program fuzzer inductor
seeds 3563, 3795, 5033, minimized).

Eager's "one of the variables needed for gradient computation has been modified by an
inplace operation: [...], which is output 0 of Relu, ..." names, for a tensor saved by the node
that made it (`relu_`'s result, `exp`'s), that node, whatever the caller did to the tensor
since: the compiled graph's check named the tensor's node at the time of the backward ("Mul"
after a later `t1 *= f`). For a view whose base was written after the view was made, eager
names the `AsStrided` node it regenerates: the check recorded the view's version after every
node that returned it (the write `t3.copy_` included) instead of when it was made, and named
"Select" or "View". Each case runs eagerly and jitted and compares the exact error.
Backends: `eager` (control), inductor with the C++ and the Triton (interpreted on the CPU)
code generators.
"""
import gc

import pytest
import torch

import dynamo
from tests.repros.conftest import values


def _error(fn, backend, make, after):
    function = fn if backend is None else dynamo.jit(fn, backend=backend)
    loss = after(function(*make())).sum()   # the result is dropped unless `after` keeps it
    gc.collect()   # (reference cycles of the frames that made it)
    with pytest.raises(RuntimeError) as caught:
        loss.backward()
    return str(caught.value)


def _assert_same_error(fn, backend, make, after=lambda result: result):
    expected = _error(fn, None, make, after)
    assert "modified by an inplace operation" in expected
    assert _error(fn, backend, make, after) == expected


def _x():
    return [values((2, 3), 1).requires_grad_()]


def test_output_saved_by_its_in_place_maker_written_by_a_later_graph(code_generator):
    # seed 5033: relu_ saves its result; the write after the break is another graph's
    def fn(x):
        t1 = x.clone()
        t1.relu_()
        print("break")
        t1 *= 1.5
        return t1
    _assert_same_error(fn, code_generator, _x)


def test_output_saved_by_its_maker_written_by_the_caller(code_generator):
    def fn(x):
        t1 = x.clone()
        t1.relu_()
        return t1, x.exp()

    def after(results):
        for result in results:
            result.mul_(2)
        return results[0] + results[1]
    _assert_same_error(fn, code_generator, _x, after)


def test_view_written_after_it_was_saved(code_generator):
    # seed 3563: abs saves the view t3, which the graph then writes through
    def fn(x):
        t1 = torch.add(x, x, alpha=0.5)
        t3 = t1.select(1, -2)
        t3.copy_(t3.abs())
        return t1

    def make():
        return [values((3, 3), 2).requires_grad_()]
    _assert_same_error(fn, code_generator, make)


def test_view_of_an_output_written_after_it_was_saved(code_generator):
    # seed 3795: amin reads the output through itself; the write makes eager's node AsStrided
    lin = torch.nn.Linear(2, 2)
    with torch.no_grad():
        lin.weight.copy_(values((2, 2), 3))
        lin.bias.copy_(values((2,), 4))

    def fn(x):
        t2 = lin(x[0])
        t2[-1] = t2.amin(0)
        return t2

    def make():
        return [values((2, 2), 5)]
    _assert_same_error(fn, code_generator, make)


def _lin():
    lin = torch.nn.Linear(2, 2)
    with torch.no_grad():
        lin.weight.copy_(values((2, 2), 6))
        lin.bias.copy_(values((2,), 7))
    return lin


@pytest.mark.parametrize("again", [False, True], ids=["once", "again"])
@pytest.mark.parametrize("keep", [False, True], ids=["gone", "kept"])
def test_view_input_written_by_the_graph_that_saved_it(code_generator, keep, again):
    # seeds 3795, 3563: a 1-D linear's result is a view (of its hidden product); the second
    # graph saves it for amin and writes it (and a third writes it again). `f(x).sum()`
    # drops the tensor before the backward: the check skipped it as gone (eager raises: its
    # saved copy holds the counter, at version 2 after the third graph); kept, it named the
    # trace's CopySlices where eager regenerates AsStrided
    lin = _lin()
    kept = []

    def fn(x):
        t2 = lin(x[0])
        print("break")
        t2[-1] = t2.amin(0)
        if again:
            print("break again")
            t2[0] = 0.5
        return t2

    def after(result):
        if keep:
            kept.append(result)
        return result

    def make():
        return [values((2, 2), 8)]
    _assert_same_error(fn, code_generator, make, after)
