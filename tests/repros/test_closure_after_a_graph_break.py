"""The compiled frame's own cell variables were never written to its real cells: a closure
created after a graph break (`y = x.sin(); print(); g = lambda: y * 2`) raised NameError
("cannot access free variable 'y'"), and so did a list comprehension after the break on 3.11
and a closure returned from a frame without a break. The glue now stores the traced contents
of the frame's cells at a break, and of those a rebuilt closure refers to at a return."""
import torch

from tests.capture.differential import check


def test_lambda_after_a_break(backend):
    def f(x):
        y = x.sin()
        print("b")
        g = lambda: y * 2  # noqa: E731
        return g()
    check(f, torch.ones(3), graphs=2, breaks=1, backend=backend)


def test_comprehension_after_a_break(backend):
    def f(x):
        y = x.sin()
        print("b")
        return [y * i for i in range(2)]
    check(f, torch.ones(3), graphs=None, breaks=1, backend=backend)


def test_returned_closure_without_a_break(backend):
    def f(x):
        y = x.sin()
        return lambda: y * 2

    def call(x):
        return dynamo_jit(f, backend)(x)()

    import dynamo

    def dynamo_jit(fn, chosen):
        return dynamo.jit(fn, backend=chosen)
    expected = f(torch.ones(3))()
    torch.testing.assert_close(call(torch.ones(3)), expected)


def test_cell_rebound_across_two_breaks(backend):
    def f(x):
        y = x + 1
        print("one")
        y = y * 3
        get = lambda: y  # noqa: E731
        print("two")
        y = y - 1
        return get()
    check(f, torch.ones(3), graphs=None, breaks=2, backend=backend)


def test_nonlocal_write_from_a_closure_made_before_a_break(backend):
    def f(x):
        total = x * 0

        def add(value):
            nonlocal total
            total = total + value
        add(x)
        print("between")
        add(x * 2)
        return total
    check(f, torch.ones(3), graphs=None, breaks=1, backend=backend)
