"""Found by the program fuzzer (seed 100100): `__exit__` of a user context manager raising
while an exception leaves the block (`with Ctx(): 1 / 0`, `__exit__` reading a missing class
attribute) made the break land inside the `with` block's cleanup handler. A region resumed
there with the handler's saved `lasti` rebuilt as a plain number, and RERAISE jumped through
it: CPython crashed (before regions got a bounded stack size, `bytecode` refused to assemble
it: an internal error).
Code that runs while an exception is being handled is never resumed: the frame runs
eagerly there, and agrees with eager."""
import torch

from tests.capture.differential import check


class BrokenExit:
    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        BrokenExit.depth -= 1  # no such attribute: raises while ZeroDivisionError leaves


class Swallowing:
    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        print("leaving with", kind)
        return True


def helper(t):
    t = t + 1
    print("helper")
    return t * 2


def test_exit_raising_while_an_exception_leaves(backend):
    def f(w):
        y = w + 1
        with BrokenExit():
            _ = 1 / 0
        return y
    check(f, torch.ones(3), graphs=None, breaks=None, backend=backend)


def test_exit_swallowing_with_a_break_inside_it(backend):
    def f(w):
        with Swallowing():
            _y = w + 1
            raise ValueError("swallowed")
        return w * 3
    check(f, torch.ones(3), graphs=None, breaks=None, backend=backend)


def test_breaks_inside_except_and_finally_bodies(backend):
    def f(x):
        try:
            y = x.sum()
            if y > 0:
                raise KeyError("k")
        except KeyError as error:
            print("caught", error)
            for i in range(2):
                print(i)
                y = y + helper(x).sum()
        finally:
            print("finally")
            y = y * 2
        return y
    check(f, torch.ones(3), graphs=None, breaks=None, backend=backend)


def test_helper_with_a_break_called_from_an_except_body(backend):
    def f(x):
        try:
            raise ValueError("v")
        except ValueError:
            y = helper(x)
            print("in except")
            z = y + 1
        return z
    check(f, torch.ones(3), graphs=None, breaks=None, backend=backend)
