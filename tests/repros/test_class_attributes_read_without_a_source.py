"""Program-fuzzer finding P11 (tests/fuzz/FINDINGS.md): a class attribute read through an
object the trace made (`Box().scale`), through `type(obj)` or `obj.__class__` of such an
object, or through `super()`, had no source, so no guard: the value seen at capture was
baked in and a later change of the class attribute was not seen (a counter `type(o).made
+= 1` stayed at 1; a scale read through a new instance kept its first value). Such a read
now goes through the class, bound into the check."""
import torch

import dynamo
from tests.capture.differential import assert_same


class Box:
    made = 0
    scale = 1.0

    def __init__(self, a=None):
        pass


class Child(Box):
    def scaled(self, x):
        return x * super().scale


def test_counter_through_type_of_a_new_object(backend):  # seed 10829
    def f(x):
        made = Box(x)
        type(made).made += 1
        return x + Box.made
    jitted = dynamo.jit(f, backend=backend)
    try:
        for start in (0, 1, 5, 5):
            Box.made = start
            expected = (f(torch.ones(3)), Box.made)
            Box.made = start
            actual = (jitted(torch.ones(3)), Box.made)
            assert_same(expected, actual, f"counter from {start}")
    finally:
        Box.made = 0


def _reads(backend, f):
    """One jitted `f`, called after each change of `Box.scale`, agrees with eager."""
    jitted = dynamo.jit(f, backend=backend)
    try:
        for scale in (1.0, 2.0, 3.0):
            Box.scale = scale
            assert_same(f(torch.ones(3)), jitted(torch.ones(3)), f"scale {scale}")
    finally:
        Box.scale = 1.0


def test_class_default_through_a_new_instance(backend):
    _reads(backend, lambda x: x * Box().scale)


def test_class_attribute_through_type_and_class(backend):
    _reads(backend, lambda x: x * type(Box()).scale + Box().__class__.scale)


def test_class_attribute_through_super(backend):
    _reads(backend, lambda x: Child().scaled(x))


def test_class_made_by_exec_in_a_namespace_of_its_own(backend):  # seeds 11103, 11151
    space = {"__name__": "not_an_imported_module"}
    exec("class Made:\n    scale = 1.0\n", space)
    made = space["Made"]
    jitted = dynamo.jit(lambda x: x * made().scale, backend=backend)
    for scale in (1.0, 2.0):
        made.scale = scale
        assert_same(torch.ones(3) * scale, jitted(torch.ones(3)), f"scale {scale}")
