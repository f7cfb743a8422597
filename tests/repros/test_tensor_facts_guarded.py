"""Tensor facts outside the tensor guard were read without a guard: `x.storage_offset()` (of an
input, and of a view of an input), `x.is_leaf` of an input that requires grad, and a Python
attribute set on an input tensor (`getattr(x, "tag", 1)` answered from the fake example, which
never has one). Each is now guarded where it is read."""
import torch

from tests.repros.after_change import check_after_changes


def test_storage_offset_of_an_input(backend):
    base = torch.arange(10.0)

    def f(x):
        return x * x.storage_offset()
    steps = [(None, lambda offset=offset: (base[offset:offset + 4],)) for offset in (1, 2, 3, 1)]
    check_after_changes(f, backend, steps, compiles=3)


def test_storage_offset_of_a_view_of_an_input(backend):
    base = torch.arange(12.0)

    def f(x):
        y = x[1:]
        return y * y.storage_offset()
    steps = [(None, lambda offset=offset: (base[offset:offset + 5],)) for offset in (0, 2, 0)]
    check_after_changes(f, backend, steps, compiles=2)


def test_is_leaf_of_an_input_that_requires_grad(backend):
    def f(x):
        return x * 2 if x.is_leaf else x * 3
    leaf = torch.ones(3, requires_grad=True)
    steps = [(None, lambda: (leaf,)), (None, lambda: (leaf * 1,)), (None, lambda: (leaf,)),
             (None, lambda: (torch.ones(3),))]
    check_after_changes(f, backend, steps)


def test_python_attribute_set_on_an_input_tensor(backend):
    def f(x):
        return x * getattr(x, "tag", 1) + (1 if hasattr(x, "other") else 0)
    x = torch.ones(3)

    def tagged(value):
        def make():
            tensor = torch.ones(3)
            tensor.tag = value
            return (tensor,)
        return make
    steps = [(None, lambda: (x,)), (None, tagged(5)), (None, tagged(6)), (None, lambda: (x,))]
    check_after_changes(f, backend, steps)


def test_attribute_set_after_capture_on_the_same_tensor(backend):
    def f(x):
        return x * getattr(x, "tag", 1)
    x = torch.ones(3)
    steps = [(None, lambda: (x,)), (lambda: setattr(x, "tag", 5), lambda: (x,)),
             (lambda: setattr(x, "tag", 7), lambda: (x,)), (lambda: delattr(x, "tag"),
                                                            lambda: (x,))]
    check_after_changes(f, backend, steps)
