"""Exceptions and frames read as in eager through graph breaks.

- An operation that fails on its inputs inside an inlined helper or module (a shape error in
  `nn.Linear`) broke the graph inside the call and ran the failing instruction as a copy in
  the compiled frame: the traceback lost the helper's frames. Such breaks now stop at the
  compiled frame's own call, which then runs for real.
- A frame with a graph break showed twice in a traceback through its continuation (the
  skeleton frame and the region's), and a resumed inlined call showed framejit's
  `resume_calls` and the caller at its first line.
- Inside a continuation, `sys._getframe(1)`, `f_back`, warnings' stacklevel and logging's
  caller saw the skeleton frame (the same function again) instead of the caller.
- A user exception class with extra `__init__` arguments raised in compiled code raised
  `TypeError: exceptions must derive from BaseException`.
- `locals()` after a graph break showed the region's internal `__state` argument.
"""
import sys
import traceback
import warnings

import torch

import dynamo
from tests.capture.differential import check


def frames_of(fn, *args, user_only=False):
    """(exception type, message, [(function, line)...]) of what `fn(*args)` raises;
    `user_only`: without torch's own frames (`Module.__call__`'s `_call_impl`...)."""
    try:
        fn(*args)
    except Exception as error:  # compared between eager and jit
        entries = traceback.extract_tb(error.__traceback__)[1:]  # drop this function
        if user_only:
            entries = [entry for entry in entries if "/torch/" not in entry.filename]
        return type(error), str(error), [(entry.name, entry.lineno) for entry in entries]
    raise AssertionError("expected an exception")


def same_traceback(fn, *args, user_only=False):
    expected = frames_of(fn, *args, user_only=user_only)
    for backend in ("eager", "inductor"):
        dynamo.reset()
        jitted = dynamo.jit(fn, backend=backend)
        assert frames_of(jitted, *args, user_only=user_only) == expected, backend
        assert frames_of(jitted, *args, user_only=user_only) == expected, f"{backend}, cached"


def wrong_shape(t):
    return t @ torch.ones(5, 5)


def through_helper(x):
    y = x + 1
    return wrong_shape(y)


LINEAR = torch.nn.Linear(4, 4)


def through_module(x):
    y = x + 1
    return LINEAR(y)


def raise_after_break(x):
    _y = x + 1
    print("break")
    raise ValueError("after the break")


def printing_then_raising(t):
    t = t + 1
    print("in helper")
    raise ValueError("in helper")


def raise_in_resumed_helper(x):
    y = x.sin()
    return printing_then_raising(y) - 1


class CodedError(Exception):
    def __init__(self, message, code):
        super().__init__(message)
        self.code = code


def raise_user_exception(x):
    _y = x + 1
    raise CodedError("bad", 3)


def test_shape_error_inside_a_helper():
    same_traceback(through_helper, torch.ones(3))


def test_shape_error_inside_a_module():
    same_traceback(through_module, torch.ones(3))


def test_raise_in_the_continuation_after_a_break():
    same_traceback(raise_after_break, torch.ones(3))


def test_raise_in_an_inlined_call_resumed_after_a_break():
    same_traceback(raise_in_resumed_helper, torch.ones(3))


def test_user_exception_with_extra_init_arguments(backend):
    check(raise_user_exception, torch.ones(3), graphs=None, breaks=None, backend=backend)
    same_traceback(raise_user_exception, torch.ones(3))


def caller_seen_from_helper(t):
    t = t + 1
    print("in helper")
    caller = sys._getframe(1)
    return caller.f_code.co_name, caller.f_lineno


def asks_for_its_caller(x):
    y = x.sin()
    return caller_seen_from_helper(y)


def continuation_asks_for_its_caller(x):
    _y = x.sin()
    print("break")
    return sys._getframe(1).f_code.co_name, sys._getframe().f_back is sys._getframe(1)


def test_caller_frame_seen_from_a_resumed_helper(backend):
    check(asks_for_its_caller, torch.ones(3), graphs=None, breaks=None, backend=backend)


def test_caller_frame_seen_from_a_continuation(backend):
    check(continuation_asks_for_its_caller, torch.ones(3), graphs=None, breaks=None,
          backend=backend)


def warns_for_its_caller(t):
    t = t + 1
    warnings.warn("careful", stacklevel=2)
    return t


def helper_warns(x):
    y = x.sin()
    return warns_for_its_caller(y)


def continuation_warns(x):
    y = x.sin()
    print("break")
    warnings.warn("careful", stacklevel=1)
    return y


def test_warning_locations(backend):
    for fn in (helper_warns, continuation_warns):
        with warnings.catch_warnings(record=True) as expected:
            warnings.simplefilter("always")
            fn(torch.ones(3))
        dynamo.reset()
        with warnings.catch_warnings(record=True) as actual:
            warnings.simplefilter("always")
            dynamo.jit(fn, backend=backend)(torch.ones(3))
        assert [(w.filename, w.lineno) for w in actual] == \
            [(w.filename, w.lineno) for w in expected]


def locals_after_a_break(x):
    y = x + 1
    print("break")
    return sorted(locals())


def locals_in_a_loop_with_a_break(x):
    for i in range(2):
        y = x + i
        print("break", sorted(locals()))
    return sorted(locals())


def test_locals_after_a_break(backend):
    check(locals_after_a_break, torch.ones(3), graphs=None, breaks=None, backend=backend)
    check(locals_in_a_loop_with_a_break, torch.ones(3), graphs=None, breaks=None,
          backend=backend)


def raises_deep(a, b):
    raise KeyError("no key")


def converts_then_raises(t):
    values = t.tolist()  # a break inside the module's helper
    raises_deep(t, values)


class Converting(torch.nn.Module):
    def forward(self, t):
        return converts_then_raises(t)


CONVERTING = Converting()


def raise_two_calls_below_a_module(x):
    t = x.sum(0)
    return CONVERTING(t)


def test_raise_in_a_resumed_call_inside_a_module():
    """Found by the program fuzzer (seed 100071): a break two calls inside a module's forward
    resumed the innermost call first, with its callers not yet on the frame stack, so a
    traceback from it lacked `forward` and the module call. Each resumed call's region now
    finishes its callee's first, so callers stay live, as in eager. The trace enters a
    module's `forward` directly, so torch's `Module.__call__` frames (`_wrapped_call_impl`,
    `_call_impl`) are not among them (docs/graph-breaks.md)."""
    same_traceback(raise_two_calls_below_a_module, torch.ones(4, 3), user_only=True)
