"""`functools.partial` arguments and keywords were folded without a guard
(`p.keywords["a"] = 5` after capture kept the old value). A partial read through a source is now
guarded on its type, the number of its arguments, its keyword names, and each part as read."""
import functools

import torch

from tests.repros.after_change import check_after_changes


def combine(x, a, b=1):
    return x * a + b


def test_partial_keywords_and_arguments_change(backend):
    p = functools.partial(combine, a=2, b=3)
    q = functools.partial(combine, torch.ones(3), 4)

    def f(x):
        return p(x) + q(b=2)
    x = torch.arange(3.0)
    steps = [(None, lambda: (x,)),
             (lambda: p.keywords.__setitem__("a", 5), lambda: (x,)),
             (lambda: p.keywords.pop("b"), lambda: (x,)),
             (lambda: q.__setstate__((combine, (torch.ones(3), 6), {}, None)), lambda: (x,)),
             (None, lambda: (x,))]
    check_after_changes(f, backend, steps)


def test_partial_passed_as_argument(backend):
    def f(x, fn):
        return fn(x)
    x = torch.arange(3.0)
    steps = [(None, lambda: (x, functools.partial(combine, a=2))),
             (None, lambda: (x, functools.partial(combine, a=3))),
             (None, lambda: (x, functools.partial(combine, a=3, b=0)))]
    check_after_changes(f, backend, steps, compiles=3)
