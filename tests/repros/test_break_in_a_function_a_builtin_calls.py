"""A graph break inside a function that a builtin called (`list(map(h, xs))` with a `print`
in `h`) resumed as if the caller's instruction had called `h` itself: the caller received
h's first result as `list(...)`'s value (a tensor instead of a list; program fuzzer, eager
seed 5150, where a global then counted the wrong number of dimensions). Only calls the
instruction makes itself (through a method, a partial, a module's `forward`, a class's
`__init__`) resume inside the callee; a builtin's calls run with the builtin."""
import functools

import torch

from tests.capture.differential import check


def helper(a):
    print("break")
    return a * 2


def key(t):
    print("key")
    return float(t.sum())


def test_map_of_a_breaking_function(backend):
    def f(x):
        return list(map(helper, [x, x + 1]))
    check(f, torch.ones(3), graphs=None, breaks=None, backend=backend)


def test_map_into_a_tuple_then_used(backend):
    def f(x):
        parts = tuple(map(helper, (x, x.sin())))
        return parts[-1].shape, len(parts), parts[0] + 1
    check(f, torch.ones(2, 3), graphs=None, breaks=None, backend=backend)


def test_filter_sorted_min_max_keys_and_reduce(backend):
    def f(x):
        items = [x, x + 2, x - 1]
        kept = list(filter(lambda t: print("f") or bool(t.sum() > 0), items))
        ordered = sorted(items, key=key)
        low, high = min(items, key=key), max(items, key=key)
        total = functools.reduce(lambda a, b: print("r") or a + b, items)
        return kept, ordered, low, high, total
    check(f, torch.ones(3), graphs=None, breaks=None, backend=backend)


def test_global_counts_what_the_map_returned(backend):
    def f(x, y):
        scale = lambda a: float(y.sum()) * a  # noqa: E731
        last = list(map(scale, [x.select(1, 0) * y.max().item(), x.select(1, 0)]))[-1]
        return len(last.shape), last
    check(f, torch.randn(4, 4, 4), torch.randn(4, 4, 4), graphs=None, breaks=None,
          backend=backend)


class Scaler:
    def __init__(self, factor):
        print("init")
        self.factor = factor

    def apply(self, t):
        print("apply")
        return t * self.factor


def test_direct_calls_still_resume_inside_the_callee(backend):
    """A method, a partial and a class call made by the instruction itself still resume
    inside the callee: the graph and break counts are those before this fix."""
    def f(x):
        y = x.sin()
        s = Scaler(2.0)
        z = s.apply(y) + 1
        w = functools.partial(helper)(z) - 1
        return w.cos()
    check(f, torch.ones(3), graphs=3, breaks=3, backend=backend)
