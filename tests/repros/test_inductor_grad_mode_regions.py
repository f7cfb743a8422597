"""Grad-mode regions inside a compiled graph (Soundness II, class 4). `compile_fx` chose the
training path from the caller's grad mode alone: a graph whose only op runs under `no_grad`
returned an output with a `grad_fn` (the generated wrapper called `addmm` with grad mode on),
and an `enable_grad` region under a `no_grad` caller returned one without. Both backends,
through `dynamo.jit`; `check` compares requires_grad and grad mode after each call."""
import torch

from tests.capture.differential import check

LINEAR = torch.nn.Linear(3, 3)


def test_no_grad_region(backend):
    def f(x):
        with torch.no_grad():
            y = LINEAR(x)
        return y
    check(f, torch.randn(2, 3), backend=backend)


def test_enable_grad_region_under_a_no_grad_caller(backend):
    def f(x):
        with torch.enable_grad():
            y = LINEAR(x)
        return y
    with torch.no_grad():
        check(f, torch.randn(2, 3), backend=backend)


def test_regions_of_both_kinds(backend):
    def f(x):
        a = LINEAR(x)
        with torch.no_grad():
            b = LINEAR(x) * 2
        return a + b, b
    check(f, torch.randn(2, 3), backend=backend)
