"""Program-fuzzer finding P10 (tests/fuzz/FINDINGS.md): an exception raised by an inlined
call after a graph break inside it (the continuation resumes inside the callee) skipped the
compiled frame's own `try` blocks around the call: `with` cleanups did not run (grad mode
stayed off after the call, a context manager's `__exit__` was never called), `except` did
not catch and `finally` did not run. The region that finishes the call called it from its
prologue, outside every `try`; the call now sits in the `try` block that covers it in the
original code."""
import torch

from tests.capture.differential import check


class Recording:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        self.log.append(kind.__name__ if kind else None)
        return None


def failing(t):
    if (t.sum() > 0).item():  # a graph break inside the inlined call
        raise RuntimeError("too large")
    return t * 2


def test_grad_mode_block_left_when_the_callee_raises(backend):  # seed 7722
    def f(x, log):
        with torch.set_grad_enabled(False), Recording(log):
            failing(x)
    check(f, torch.ones(3), [], graphs=None, breaks=None, backend=backend)


def test_no_grad_block_and_exit_when_the_callee_raises(backend):
    def f(x, log):
        y = x + 1
        with torch.no_grad():
            with Recording(log):
                return failing(y)
    check(f, torch.ones(3), [], graphs=None, breaks=None, backend=backend)


def test_except_catches_what_the_callee_raises(backend):
    def f(x):
        try:
            y = failing(x)
        except RuntimeError as error:
            y = x - len(str(error))
        return y
    check(f, torch.ones(3), graphs=None, breaks=None, backend=backend)


def test_finally_runs_when_the_callee_raises(backend):
    def f(x, log):
        try:
            return failing(x + 1)
        finally:
            log.append("finally")
    check(f, torch.ones(3), [], graphs=None, breaks=None, backend=backend)
