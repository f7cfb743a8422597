"""Corpus: context managers — `no_grad`, `enable_grad`, `set_grad_enabled`, `inference_mode`,
`autocast`, `nullcontext`, user classes with `__enter__`/`__exit__`, `contextlib` helpers, the
same used as decorators, nesting, and exceptions leaving a `with` block."""
import contextlib

import torch

from tests.capture.differential import check

x4 = torch.randn(4)
leaf = torch.randn(4, requires_grad=True)
m34 = torch.randn(3, 4)


class Scope:
    """A user context manager recording its use."""

    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("enter")
        return len(self.log)

    def __exit__(self, kind, value, traceback):
        self.log.append("exit" if kind is None else f"exit {kind.__name__}")
        return False


class Suppressing:
    def __enter__(self):
        return self

    def __exit__(self, kind, value, traceback):
        return kind is not None and issubclass(kind, KeyError)


@torch.no_grad()
def no_grad_helper(x):
    return x * 2


@torch.enable_grad()
def enable_grad_helper(x):
    return x * 3


def test_no_grad_block():
    def f(x):
        with torch.no_grad():
            y = x * 2
        return y, x * 2, y.requires_grad
    check(f, leaf)


def test_enable_grad_inside_no_grad():
    def f(x):
        with torch.no_grad():
            with torch.enable_grad():
                y = x * 2
            z = x * 3
        return y.requires_grad, z.requires_grad, y + z
    check(f, leaf)


def test_set_grad_enabled_as_context_and_call():
    def f(x, flag):
        with torch.set_grad_enabled(flag):
            y = x * 2
        return y, y.requires_grad
    check(f, leaf, False)
    check(f, leaf, True)


def test_grad_mode_decorators():
    def f(x):
        return no_grad_helper(x).requires_grad, enable_grad_helper(x).requires_grad, \
            no_grad_helper(x) + enable_grad_helper(x)
    check(f, leaf)


def test_decorator_applied_in_frame():
    def f(x):
        helper = torch.no_grad()(lambda t: t * 5)
        return helper(x), helper(x).requires_grad
    check(f, leaf)


def test_is_grad_enabled_seen_inside_blocks():
    def f(x):
        with torch.no_grad():
            inside = torch.is_grad_enabled()
        return x * (inside + torch.is_grad_enabled())
    check(f, x4)


def test_inference_mode_disabled_block():
    def f(x):
        with torch.inference_mode(False):
            return x * 2
    check(f, x4)


def test_called_under_inference_mode():
    import dynamo

    def f(x):
        return x.relu() + 1
    jitted = dynamo.jit(f, backend="eager")
    with torch.inference_mode():
        expected, actual = f(x4), jitted(x4)
    torch.testing.assert_close(actual, expected)
    assert actual.is_inference() == expected.is_inference()


def test_autocast_cpu_bfloat16():
    def f(a, b):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = a @ b
            z = torch.relu(y)
        return y.dtype, z.float(), (a @ b).dtype
    check(f, m34, torch.randn(4, 5))


def test_autocast_disabled_and_nested():
    def f(a, b):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            with torch.autocast("cpu", enabled=False):
                inner = a @ b
            outer = a @ b
        return inner.dtype, outer.dtype, inner + outer.float()
    check(f, m34, torch.randn(4, 5))


def test_autocast_as_decorator():
    @torch.autocast("cpu", dtype=torch.bfloat16)
    def mixed(a, b):
        return a @ b

    check(lambda a, b: mixed(a, b).dtype, m34, torch.randn(4, 5), graphs=1)


def test_nullcontext_with_and_without_value():
    def f(x, flag):
        context = torch.no_grad() if flag else contextlib.nullcontext()
        with context:
            y = x * 2
        with contextlib.nullcontext(x) as same:
            z = same + 1
        return y, z, y.requires_grad
    check(f, leaf, True)
    check(f, leaf, False)


def test_user_context_manager_created_in_frame():
    def f(x):
        log = []
        with Scope(log) as depth:
            y = x * depth
        return y, log
    check(f, x4)


def test_user_context_manager_passed_in():
    def f(x, scope):
        with scope as depth:
            y = x + depth
        return y
    check(f, x4, Scope(["before"]))


def test_nested_user_and_grad_contexts():
    def f(x):
        log = []
        with Scope(log), torch.no_grad():
            y = x * 2
            with Scope(log) as depth:
                y = y + depth
        return y, log, y.requires_grad
    check(f, leaf)


def test_exception_leaving_user_context_is_caught_outside():
    def f(x):
        log = []
        try:
            with Scope(log):
                raise ValueError("inside")
        except ValueError:
            y = x * 2
        return y, log
    check(f, x4)


def test_exception_leaving_no_grad_restores_grad_mode():
    def f(x):
        try:
            with torch.no_grad():
                raise KeyError("k")
        except KeyError:
            pass
        return x * 2, torch.is_grad_enabled(), (x * 2).requires_grad
    check(f, leaf)


def test_context_manager_suppressing_an_exception():
    def f(x, table):
        with Suppressing():
            x = x + table["missing"]
        return x * 2
    check(f, x4, {})


def test_contextlib_contextmanager_generator():
    @contextlib.contextmanager
    def scaled(log, factor):
        log.append("start")
        yield factor
        log.append("stop")

    def f(x):
        log = []
        with scaled(log, 3.0) as factor:
            y = x * factor
        return y, log
    check(f, x4)


def test_contextlib_suppress():
    def f(x, table):
        value = 1.0
        with contextlib.suppress(KeyError):
            value = table["missing"]
        return x * value
    check(f, x4, {})


def test_with_inside_loop():
    def f(x):
        log = []
        for i in range(3):
            with Scope(log):
                x = x + i
        return x, log
    check(f, x4)
