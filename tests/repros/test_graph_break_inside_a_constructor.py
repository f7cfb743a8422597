"""A graph break inside `__init__` of a class called from compiled code: the break resumed
inside the inlined `__init__`, and the class call then took `__init__`'s result (None) as
its value, so `return Cls(...)` returned None. A call that a class call makes to initialise
an instance now gives its caller the instance."""
import torch

from tests.capture.differential import check


class Printing:
    def __init__(self, value):
        print("building")
        self.value = value * 2


class Counting:
    made = 0

    def __init__(self, value):
        Counting.made += 1
        self.value = value


class Child(Printing):
    def __init__(self, value):
        super().__init__(value)
        self.extra = value.sum()


class Failing(Exception):
    def __init__(self, message, code):
        print("failing with", code)
        super().__init__(message)
        self.code = code


def test_print_inside_init(backend):
    def f(x):
        return Printing(x.sin())
    check(f, torch.ones(3), graphs=2, breaks=1, backend=backend)


def test_class_attribute_counter_inside_init(backend):
    def f(x):
        made = Counting(x + 1)
        return made, made.value * 2
    check(f, torch.ones(3), graphs=None, breaks=None, backend=backend)


def test_break_inside_a_base_init_through_super(backend):
    def f(x):
        child = Child(x.cos())
        return child.value + child.extra
    check(f, torch.ones(3), graphs=None, breaks=None, backend=backend)


def test_break_inside_an_exception_init(backend):
    def f(x):
        try:
            raise Failing("bad", 3)
        except Failing as error:
            return x * error.code
    check(f, torch.ones(3), graphs=None, breaks=None, backend=backend)
