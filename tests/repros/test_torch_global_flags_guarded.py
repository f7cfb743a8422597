"""Process-wide torch settings read by a trace were folded without a guard:
`torch.backends.cudnn.enabled` and `torch.backends.mkldnn.enabled` (attributes a descriptor of
the module's class computes), `torch.get_num_threads()`, `torch.initial_seed()` (torch functions
whose result folded). The audit of the same kind: the other `torch.backends` flags, the
`torch._C` readers behind `torch.backends.cuda.matmul`, the autocast dtype while autocast is off,
and the state the global-state guard covers (default dtype, deterministic algorithms, matmul
precision)."""
import contextlib

import pytest
import torch

from tests.repros.after_change import check_after_changes


@contextlib.contextmanager
def restored(getter, setter):
    saved = getter()
    try:
        yield
    finally:
        setter(saved)


def _flag(module, name):
    return (lambda: getattr(module, name), lambda value: setattr(module, name, value))


FLAGS = {
    "cudnn.enabled": (lambda: torch.backends.cudnn.enabled,
                      *_flag(torch.backends.cudnn, "enabled"), False),
    "cudnn.benchmark": (lambda: torch.backends.cudnn.benchmark,
                        *_flag(torch.backends.cudnn, "benchmark"), True),
    "cudnn.deterministic": (lambda: torch.backends.cudnn.deterministic,
                            *_flag(torch.backends.cudnn, "deterministic"), True),
    "cudnn.allow_tf32": (lambda: torch.backends.cudnn.allow_tf32,
                         *_flag(torch.backends.cudnn, "allow_tf32"), False),
    "mkldnn.enabled": (lambda: torch.backends.mkldnn.enabled,
                       *_flag(torch.backends.mkldnn, "enabled"), False),
    "cuda.matmul.allow_tf32": (lambda: torch.backends.cuda.matmul.allow_tf32,
                               *_flag(torch.backends.cuda.matmul, "allow_tf32"), True),
    "num_threads": (torch.get_num_threads, torch.get_num_threads, torch.set_num_threads, 1),
    "initial_seed": (torch.initial_seed, torch.initial_seed, torch.manual_seed, 12345),
    "deterministic": (torch.are_deterministic_algorithms_enabled,
                      torch.are_deterministic_algorithms_enabled,
                      torch.use_deterministic_algorithms, True),
    "default_dtype": (torch.get_default_dtype, torch.get_default_dtype,
                      torch.set_default_dtype, torch.float64),
    "matmul_precision": (torch.get_float32_matmul_precision, torch.get_float32_matmul_precision,
                         torch.set_float32_matmul_precision, "medium"),
    "autocast_dtype": (lambda: torch.get_autocast_dtype("cpu"),
                       lambda: torch.get_autocast_dtype("cpu"),
                       lambda value: torch.set_autocast_dtype("cpu", value), torch.float16),
}


@pytest.mark.parametrize("name", list(FLAGS))
def test_flag_changed_after_capture(backend, name):
    read, getter, setter, other = FLAGS[name]

    def f(x):
        value = read()
        if value is True:
            return x + 1
        if value is False:
            return x - 1
        return x * len(str(value))
    x = torch.arange(3.0)
    with restored(getter, setter):
        if name == "initial_seed":
            torch.manual_seed(7)
        steps = [(None, lambda: (x,)), (lambda: setter(other), lambda: (x,)),
                 (None, lambda: (x,))]
        check_after_changes(f, backend, steps, compiles=2)


def test_process_constants_are_not_guarded():
    import dynamo

    def f(x):
        return x + 1 if torch.cuda.is_available() else x - 1
    jitted = dynamo.jit(f, backend="eager")
    jitted(torch.ones(2))
    [record] = [record for record in jitted._framejit_driver.records if record.compiled]
    assert not any("is_available" in line for line in record.guards)


def test_a_setter_inside_the_function_runs_on_every_call(backend):
    """A torch setter called by the function (`torch._C._set_cudnn_enabled(False)`) ran once,
    at trace time, and then on every check (its None result was guarded by calling it again).
    Setters of process state break the graph and run eagerly."""
    def f(x):
        torch._C._set_cudnn_enabled(False)
        return x + 1
    import dynamo
    jitted = dynamo.jit(f, backend=backend)
    with restored(torch._C._get_cudnn_enabled, torch._C._set_cudnn_enabled):
        for _ in range(3):
            torch._C._set_cudnn_enabled(True)
            torch.testing.assert_close(jitted(torch.ones(2)), torch.full((2,), 2.0))
            assert torch._C._get_cudnn_enabled() is False
        [first, *_] = [record for record in jitted._framejit_driver.records if record.compiled]
        assert not any("_set_cudnn_enabled" in line for line in first.guards)
