"""Inductor tests: a fresh on-disk kernel cache per session (CI starts cold), the IR verifiers
on, and a helper that compiles a function through `compile_fx` the way a backend receives it."""
import copy

import pytest
import torch

import inductor


@pytest.fixture(autouse=True, scope="session")
def _inductor_settings(tmp_path_factory):
    saved = inductor.config.snapshot()
    inductor.config.cache_dir = str(tmp_path_factory.mktemp("kernel-cache"))
    inductor.config.verify_ir = True
    inductor.config.fallback_on_error = False
    yield
    inductor.config.update(**saved)


@pytest.fixture(params=["cpp", "triton"])
def code_generator(request, tmp_path):
    """The test on the C++ backend, then on Triton's CPU interpreter (where a compile error
    raises instead of falling back): the symbolic-size tests take it."""
    saved = inductor.config.snapshot()
    if request.param == "triton":
        pytest.importorskip("triton")
        inductor.config.update(cpu_backend="triton", cache_dir=str(tmp_path),
                               fallback_on_error=False)
    yield request.param
    inductor.config.update(**saved)


@pytest.fixture
def fixed_machine_settings():
    """Two threads, vectorised, the default parallel threshold: the C++ code this machine's
    core count would otherwise change (golden files, source checks)."""
    saved = inductor.config.snapshot()
    inductor.config.threads = 2
    inductor.config.parallel_threshold = 32768
    inductor.config.vectorize = True
    yield
    inductor.config.update(**saved)


def compile_function(function, *inputs):
    """`inductor.compile_fx` on `function` traced by torch.fx (placeholders = `inputs`)."""
    graph = torch.fx.symbolic_trace(function)
    return inductor.compile_fx(graph, list(inputs))


def check_same(function, *inputs, atol=None, rtol=None):
    """Run eager and compiled on copies of `inputs`; compare results and mutated inputs."""
    eager_inputs = copy.deepcopy(inputs)
    compiled_inputs = copy.deepcopy(inputs)
    compiled = compile_function(function, *compiled_inputs)
    expected = function(*eager_inputs)
    actual = compiled(*compiled_inputs)
    torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol, equal_nan=True)
    torch.testing.assert_close(compiled_inputs, eager_inputs, atol=atol, rtol=rtol,
                               equal_nan=True)
    return compiled
