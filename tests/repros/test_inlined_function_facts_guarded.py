"""An inlined helper whose `__code__` was replaced after capture still ran the old code; the same
for its defaults (a different number of them), and for functions reached without a source of
their own (a method through its class, a decorated function's closure). A user's function is
now guarded on its code object and the shape of its defaults, and a function, class or module
reached without a source gets one of its own, held weakly (library functions are trusted)."""
import torch

from tests.repros.after_change import check_after_changes


def helper(x):
    return x + 1


def other(x):
    return x + 100


def scaled(x, factor=2):
    return x * factor


def test_code_replaced(backend):
    def f(x):
        return helper(x)
    x = torch.ones(3)
    original = helper.__code__

    def replace(code):
        return lambda: setattr(helper, "__code__", code)
    try:
        check_after_changes(f, backend, [(None, lambda: (x,)), (replace(other.__code__),
                                                                lambda: (x,)),
                                         (replace(original), lambda: (x,))])
    finally:
        helper.__code__ = original


def test_defaults_replaced(backend):
    def f(x):
        return scaled(x)
    x = torch.ones(3)
    try:
        check_after_changes(f, backend, [
            (None, lambda: (x,)),
            (lambda: setattr(scaled, "__defaults__", (5,)), lambda: (x,)),
            (lambda: setattr(scaled, "__code__", (lambda x, factor=2: x - factor).__code__),
             lambda: (x,))])
    finally:
        scaled.__defaults__ = (2,)
        scaled.__code__ = (lambda x, factor=2: x * factor).__code__


class Net(torch.nn.Module):
    def step(self, x):
        return x * 2

    def forward(self, x):
        return self.step(x) + 1


def test_method_code_replaced_through_the_class(backend):
    module = Net()
    x = torch.ones(3)
    original = Net.step.__code__
    try:
        check_after_changes(module, backend, [
            (None, lambda: (x,)),
            (lambda: setattr(Net.step, "__code__", (lambda self, x: x * 5).__code__),
             lambda: (x,))])
    finally:
        Net.step.__code__ = original


def scaling_method():
    """A method made by a factory (as decorators make them): its closure holds `factor`, which
    `set_factor` rebinds; the method is reached through its class, without a source."""
    factor = 3.0

    def step(self, x):
        return x * factor

    def set_factor(value):
        nonlocal factor
        factor = value
    return step, set_factor


def test_closure_cell_of_a_method_changed_through_nonlocal(backend):
    step, set_factor = scaling_method()

    class Scaled(torch.nn.Module):
        def forward(self, x):
            return self.step(x) + 1
    Scaled.step = step
    module = Scaled()
    x = torch.ones(3)
    check_after_changes(module, backend, [(None, lambda: (x,)),
                                          (lambda: set_factor(5.0), lambda: (x,)),
                                          (None, lambda: (x,))])
