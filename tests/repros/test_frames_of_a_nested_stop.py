"""A graph break two calls deep resumes inside the inlined calls (a nested stop): the
compiled frame runs the breaking instruction of the innermost resumable call itself. An
exception out of that instruction showed the compiled frame at the callee's line and lost the
inlined calls' frames (`fn` -> `h2` where eager shows `fn` -> `h1` -> `h2`; program fuzzer
P15, seeds 8356 and 17289). The copied instruction runs inside a `try` that puts those frames
back, then re-raises into the compiled frame's own `try` blocks."""
import torch

from tests.capture.differential import check
from tests.repros.test_tracebacks_and_frames import same_traceback


def cannot_resume(a):
    if bool(a.sum() > 0):
        raise ValueError("positive")
    return [a for _ in range(1)]  # a cell: this function is never resumed inside


def middle(a):
    b = a + 1
    cannot_resume(b)
    return b * 2


def outer(a):
    return middle(a - 1) + 1


def two_deep(y):
    return middle(y * 3)


def three_deep(y):
    return outer(y) * 2


def indexed(y, i):
    return middle(y.sin())[i]


def test_an_exception_out_of_the_copied_call_lists_every_inlined_frame():
    same_traceback(two_deep, torch.ones(2))
    same_traceback(three_deep, torch.ones(2) * 2)


def test_an_exception_out_of_a_copied_subscript_lists_the_inlined_frame():
    same_traceback(indexed, -torch.ones(2), 5)


def caught(y):
    try:
        z = outer(y)
    except ValueError as error:
        print("caught", error)
        z = y
    try:
        w = middle(y * 3)
    finally:
        print("finally")
    return z, w


def test_the_frames_own_try_blocks_still_see_the_exception(backend):
    check(caught, torch.ones(2) * 2, graphs=None, breaks=None, backend=backend)
    check(caught, -torch.ones(2), graphs=None, breaks=None, backend=backend)


def test_a_nested_stop_that_does_not_raise_is_unchanged(backend):
    check(two_deep, -torch.ones(2), graphs=None, breaks=None, calls=3, backend=backend)
