"""Recognising builtins must not call a traced value's `__eq__` (a torch.compile'd function
reached while tracing raised AttributeError from torch's CompileId.__eq__)."""
import torch

import dynamo


class Touchy:
    calls = 0

    def __eq__(self, other):
        Touchy.calls += 1
        raise AttributeError("__eq__ must not run")

    __hash__ = object.__hash__

    def __call__(self, x):
        return x * 2


def test_objects_with_raising_eq_are_traced_without_comparing_them():
    touchy = Touchy()

    def f(x):
        return touchy(x) + 1
    jitted = dynamo.jit(f, backend="eager", options={"suppress_errors": False})
    assert torch.equal(jitted(torch.ones(3)), f(torch.ones(3)))
    assert Touchy.calls == 0
