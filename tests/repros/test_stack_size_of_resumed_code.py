"""Program-fuzzer findings P1, P2, P5 and P6 (tests/fuzz/FINDINGS.md): code a graph break
resumes in the middle of a `try` block. The `bytecode` package sizes each exception handler
from the smallest stack depth its walk has seen, which for code entered mid-`try` (a region's
prologue, a skeleton's jump to a stop) is 0: it reported a negative size (an internal error)
or, worse, a stack too small for the handler, and an `except` body calling a function overran
it (the callee got internal objects as arguments; on CPython 3.11, a segfault). Generated code
now gets at least the original code's stack plus what it adds; and code that runs while an
exception is being handled is never resumed."""
import types

import torch

from tests.capture.differential import check

CONFIG = types.ModuleType("config")
CONFIG.n = 2
CONFIG.scale = 2.0


def masked(a, b, c, scale=0.5):
    return c.masked_fill(c > 0.5, 0.0) * scale


def test_call_with_keywords_in_an_except_body_after_a_break(backend):  # P6
    def f(x, y, s, n):
        t5 = x.std(1)
        try:
            if CONFIG.n == CONFIG.n:
                raise ZeroDivisionError(f"too large {t5.max().item()}")
            t5.fill_(s)
        except ZeroDivisionError as error:
            print("caught", type(error).__name__, error)
            t6 = masked(t5, n, y, scale=CONFIG.scale)
        return t6
    check(f, torch.ones(4, 3), torch.ones(3), 1.0, 2, graphs=None, breaks=None,
          backend=backend)


class Coded(ValueError):
    def __init__(self, message, code):
        super().__init__(message)
        self.code = code


class Holder:
    scale = 1.5


def nothing(a, b, c):
    return None


def test_user_exception_caught_after_a_break_with_a_nonlocal_cell(backend):  # P5
    def f(x, w, holder):
        def touch(a):
            nonlocal x
        t2 = touch(w)
        positive = (x.sum() > 0).item()
        v1 = x.T
        try:
            if holder.scale != v1.mean().item():
                raise Coded("too large", 2)
            made = [t2 for _ in range(1)]
        except (Coded, LookupError):
            made = [t2 for _ in range(2)]
        return nothing(v1, x, positive), made
    check(f, torch.ones(4, 3), torch.ones(3, 3), Holder(), graphs=None, breaks=None,
          backend=backend)


def catching_helper(t):
    try:
        raise TypeError("no key")
    except TypeError as error:
        print("caught", error)
    return t


def test_break_in_a_handler_of_a_helper_called_from_finally(backend):  # P1
    def f(x):
        try:
            _ = 1 / 0
        finally:
            catching_helper(x)
    check(f, torch.ones(3), graphs=None, breaks=None, backend=backend)


class PrintingExit:
    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        print("exit", kind)


class Failure(RuntimeError):
    pass


def test_exception_through_an_exit_with_a_break(backend):  # P2
    def f(x):
        y = x + 1
        with PrintingExit():
            raise Failure(f"bad {y.sum().item()}")
    check(f, torch.ones(3), graphs=None, breaks=None, backend=backend)
