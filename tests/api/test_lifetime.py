"""Lifetime of compiled entries (Soundness I, class 8): a jitted module or function is freed once
the program drops it, with or without `dynamo.reset()`, on both backends; the recompile limit
counts the live entries of one `jit` wrapper, so many wrappers of one class each compile."""
import gc
import warnings
import weakref

import pytest
import torch

import dynamo
from dynamo import hook

pytestmark = pytest.mark.skipif(not hook.SUPPORTED, reason=str(hook.unsupported_reason()))

BACKENDS = ["eager", "inductor"]


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.scale = 2.0

    def forward(self, x):
        return self.lin(x).relu() * self.scale


def _jit_and_call(backend, module):
    jitted = dynamo.jit(module, backend=backend)
    x = torch.randn(2, 3)
    torch.testing.assert_close(jitted(x), module(x))
    return jitted


def _jit_entries(code):
    """`code`'s cache entries but those of `python -m dynamo nop-rewrite` (its driver rewrites
    every frame, the test's own eager calls included, when CI runs these tests under it)."""
    return [entry for entry in hook.entries(code)
            if not getattr(entry[0], "__qualname__", "").startswith("NopRewriteDriver.")]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("make", [lambda: torch.nn.Linear(3, 3), Net], ids=["Linear", "Net"])
@pytest.mark.parametrize("reset", [False, True], ids=["del", "reset"])
def test_jitted_module_is_freed(backend, make, reset):
    module = make()
    watcher = weakref.ref(module)
    jitted = _jit_and_call(backend, module)
    code = type(module).forward.__code__
    assert hook.entries(code)
    if reset:
        dynamo.reset()
    del module, jitted
    gc.collect()
    assert watcher() is None
    assert not _jit_entries(code)  # the entry died with its wrapper


@pytest.mark.parametrize("backend", BACKENDS)
def test_jitted_function_and_its_closure_are_freed(backend):
    weight = torch.randn(3)

    def scaled(x):
        return x * weight + 1

    watcher = weakref.ref(scaled)
    jitted = dynamo.jit(scaled, backend=backend)
    x = torch.randn(3)
    torch.testing.assert_close(jitted(x), scaled(x))
    code = scaled.__code__
    del scaled, jitted
    gc.collect()
    assert watcher() is None
    assert not _jit_entries(code)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_module_outlives_its_wrapper_and_compiles_again(backend):
    module = Net()
    jitted = _jit_and_call(backend, module)
    del jitted
    gc.collect()
    again = _jit_and_call(backend, module)  # a new wrapper compiles afresh
    driver = again._framejit_driver
    assert [record for record in driver.records if record.replacement is not None]


@pytest.mark.parametrize("backend", BACKENDS)
def test_twenty_wrappers_of_one_class_each_compile(backend):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no recompile-limit warning
        for index in range(20):
            module = torch.nn.Linear(3, 3)
            counting = dynamo.CountingBackend(dynamo.backends.lookup_backend(backend))
            jitted = dynamo.jit(module, backend=counting)
            x = torch.randn(2, 3)
            torch.testing.assert_close(jitted(x), module(x))
            assert counting.frame_count == 1, f"wrapper {index} ran eagerly"
            del module, jitted
            gc.collect()


def test_twenty_live_wrappers_of_one_class_each_compile_and_stay_apart():
    modules = [torch.nn.Linear(3, 3) for _ in range(20)]
    backends = [dynamo.CountingBackend() for _ in modules]
    wrappers = [dynamo.jit(module, backend=backend) for module, backend in zip(modules, backends)]
    x = torch.randn(2, 3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for _ in range(2):
            for module, jitted in zip(modules, wrappers):
                torch.testing.assert_close(jitted(x), module(x))
    assert [backend.frame_count for backend in backends] == [1] * 20


def test_the_limit_counts_live_entries_of_one_wrapper():
    def scale(x, factor):
        return x * factor(2)

    jitted = dynamo.jit(scale, backend="eager", options={"recompile_limit": 2})
    x = torch.ones(2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in range(5):
            factor = (lambda value: lambda n: n * value)(step)  # a new object each time
            torch.testing.assert_close(jitted(x, factor), scale(x, factor))
            del factor
            gc.collect()  # the entry guarding the old function by identity dies
    assert not [warning for warning in caught if "recompile_limit" in str(warning.message)]
    assert len(_jit_entries(scale.__code__)) <= 1


@pytest.mark.static_shapes(reason="exact compile count; a symbolic n makes `n * value` a graph")
def test_entries_that_keep_dying_stop_compiling_after_a_while():
    def scale(x, factor):
        return x * factor(2)

    jitted = dynamo.jit(scale, backend="eager", options={"recompile_limit": 1})
    x = torch.ones(2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for step in range(8):
            factor = (lambda value: lambda n: n * value)(step)
            torch.testing.assert_close(jitted(x, factor), scale(x, factor))
            del factor
            gc.collect()
    limit = [warning for warning in caught if "recompile_limit" in str(warning.message)]
    assert len(limit) == 1 and "died since" in str(limit[0].message)
    compiled = [record for record in jitted._framejit_driver.records
                if record.replacement is not None]
    assert len(compiled) == 4  # _CHURN_FACTOR times the limit


def test_reset_makes_every_entry_of_live_wrappers_die():
    module = Net()
    jitted = _jit_and_call("eager", module)
    [record] = [record for record in jitted._framejit_driver.records if record.compiled]
    dynamo.reset()
    assert not record.compiled.guard_set.alive
    assert not _jit_entries(Net.forward.__code__)
    _jit_and_call("eager", module)  # still usable; compiles again
