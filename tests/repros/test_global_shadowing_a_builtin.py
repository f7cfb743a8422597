"""A module global defined after capture that shadows a builtin the code used (`max`, `len`)
was ignored: the entry kept calling the builtin. Reading a builtin now guards that the
function's globals still have no entry of that name."""
import torch

from tests.repros.after_change import check_after_changes


def uses_builtins(x):
    return x * max(2, 3) + len([1, 2])


def test_global_defined_after_capture(backend):
    namespace = globals()
    x = torch.ones(3)

    def shadow():
        namespace["max"] = lambda a, b: 10

    def unshadow():
        del namespace["max"]
    try:
        check_after_changes(uses_builtins, backend, [
            (None, lambda: (x,)), (shadow, lambda: (x,)),
            (lambda: namespace.__setitem__("len", lambda items: 7), lambda: (x,)),
            (unshadow, lambda: (x,))])
    finally:
        namespace.pop("max", None)
        namespace.pop("len", None)
