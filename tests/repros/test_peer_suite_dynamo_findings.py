"""Found by running PyTorch's test/dynamo/test_functions.py through dynamo.jit
(tests/peer/FINDINGS.md, D1-D4):

- D1: `d.keys()` / `d.values()` / `d.items()` were snapshots (tuples): an insertion after the
  view was taken did not show (`4 in keys` False), and the view's type was `tuple`.
- D2: `dict(m)` and `f(**m)` of a user `MutableMapping` iterated it as pairs (ValueError);
  CPython reads anything with `keys()` as a mapping. (Its `keys()` builds a `KeysView`,
  a `__slots__` class: slots of objects are now written and read in the trace.)
- D3: `torch.is_floating_point(input=x)` with a keyword argument raised TypeError.
- D4: a pybind method object (unhashable) was looked up in the folding table: TypeError.
"""
from collections.abc import MutableMapping

import torch

from tests.capture.differential import check


def test_dict_views_are_live(backend):
    def f(x):
        d = {3: x}
        keys, values, items = d.keys(), d.values(), d.items()
        d[4] = x + 1
        return (4 in keys, len(values), len(items), {3: 2, 4: "a"}.keys() == keys, list(keys),
                [v * 2 for v in values], [k for k, _ in items], type(keys).__name__, bool(keys))
    check(f, torch.ones(3), backend=backend)


def test_views_of_an_argument_dict(backend):
    def f(x, d):
        keys = d.keys()
        d["new"] = x
        return [d[k] + 1 for k in keys], sorted(keys), d.keys() - {"a"}, d.keys() & {"a", "z"}
    check(f, torch.ones(3), {"a": torch.zeros(3), "b": torch.ones(3)}, backend=backend)


class Table(MutableMapping):
    def __init__(self):
        self._data = {"a": torch.full((3,), 2.0)}

    def __getitem__(self, key):
        return self._data[key]

    def __setitem__(self, key, value):
        self._data[key] = value

    def __delitem__(self, key):
        del self._data[key]

    def __iter__(self):
        return iter(self._data)

    def __len__(self):
        return len(self._data)


TABLE = Table()


def scale(a):
    return a * 3


def test_dict_of_a_user_mapping(backend):
    def f(x):
        return x * dict(TABLE)["a"], scale(**TABLE)
    check(f, torch.ones(3), graphs=None, breaks=None, backend=backend)


class Slotted:
    __slots__ = ("a", "b")


def test_slots_of_new_and_existing_objects(backend):
    def f(x, existing):
        existing.a = x + 1
        made = Slotted()
        made.a = x
        made.b = existing.a
        return made.a + made.b, made, existing.a, hasattr(made, "a")
    existing = Slotted()
    existing.a = torch.zeros(3)
    check(f, torch.ones(3), existing, backend=backend)


def test_folded_torch_functions_with_keywords(backend):
    def f(x):
        try:
            refused = torch.is_tensor(obj=x)  # positional-only: TypeError, as in eager
        except TypeError as error:
            refused = str(error)
        return x * 2, torch.is_floating_point(input=x), torch.numel(input=x), refused
    check(f, torch.ones(3), backend=backend)


def test_unhashable_callable_reaches_no_table(backend):
    method = torch._C._dynamo.guards.GuardDebugInfo  # a pybind class; its methods are unhashable

    def f(x):
        return x + 1, callable(method)
    check(f, torch.ones(3), graphs=None, breaks=None, backend=backend)


def test_torchscript_annotation(backend):
    """D5: `torch.jit.annotate(Any, v)` became a graph node whose code named `typing.Any`
    (NameError); it is the value itself."""
    from typing import Any, List

    def f(x):
        values = torch.jit.annotate(List[torch.Tensor], [])
        values.append(torch.jit.annotate(Any, x + 1))
        return values[0] * 2
    check(f, torch.ones(3), backend=backend)
