"""Disabling as torch.compile users expect (issue 24, item 2): `dynamo.disable` as a scope and
a decorator, torch's disable decorators honoured, `jit(disable=True)` and `JIT_DISABLE=1`.

Each test runs the program eagerly and jitted and compares values, printed output and
exceptions; a counting backend (`Counting`) shows what was compiled and which compiled graphs
ran.
"""
import contextlib
import io
import os
import subprocess
import sys
import threading

import pytest
import torch

import dynamo
from dynamo import breaks, hook

from tests.api.counting import Counting

pytestmark = pytest.mark.skipif(not hook.SUPPORTED, reason=str(hook.unsupported_reason()))


@pytest.fixture(autouse=True)
def _fresh():
    dynamo.reset()
    yield
    dynamo.reset()
    assert hook.adjust_thread_disabled(0) == 0  # every scope closed


def _printed(function, *args):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = function(*args)
    return result, out.getvalue()


# -- `with dynamo.disable():` around calls of jitted functions and modules -------------------
def _scaled(x):
    return torch.sin(x) * 2


def test_disable_scope_stops_a_jitted_function_and_its_cached_entries():
    backend = Counting()
    jitted = dynamo.jit(_scaled, backend=backend)
    x = torch.randn(4)
    torch.testing.assert_close(jitted(x), _scaled(x))
    assert len(backend.graphs) == 1 and backend.runs == 1
    with dynamo.disable():
        torch.testing.assert_close(jitted(x), _scaled(x))        # cached entry unused
        torch.testing.assert_close(jitted(x.double()), _scaled(x.double()))  # nothing compiled
    assert len(backend.graphs) == 1 and backend.runs == 1
    jitted(x)
    assert backend.runs == 2  # after the scope the entry serves again


def test_disable_scope_reaches_jitted_callees_and_modules():
    backend = Counting()
    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU())
    jitted_model = dynamo.jit(model, backend=backend)
    jitted_helper = dynamo.jit(_scaled, backend=backend)

    def program(x):
        return jitted_helper(jitted_model(x)) + 1

    x = torch.randn(5, 3)
    expected = _scaled(model(x)) + 1
    with dynamo.disable():
        torch.testing.assert_close(program(x), expected)
        torch.testing.assert_close(dynamo.jit(program, backend=backend)(x), expected)
    assert backend.graphs == [] and backend.runs == 0
    torch.testing.assert_close(program(x), expected)
    assert len(backend.graphs) == 2  # outside the scope both compile


def test_disable_scope_is_per_thread_and_restores_after_an_exception():
    backend = Counting()
    jitted = dynamo.jit(_scaled, backend=backend)
    x = torch.randn(3)
    with pytest.raises(ZeroDivisionError):
        with dynamo.disable():
            jitted(x)
            1 / 0
    assert backend.graphs == []
    inside = threading.Event()
    release = threading.Event()

    def other_thread():
        with dynamo.disable():
            inside.set()
            release.wait(30)

    worker = threading.Thread(target=other_thread)
    worker.start()
    inside.wait(30)
    try:
        torch.testing.assert_close(jitted(x), _scaled(x))  # this thread still compiles
    finally:
        release.set()
        worker.join()
    assert len(backend.graphs) == 1


# -- `@dynamo.disable` and `with dynamo.disable():` inside a jitted function ------------------
def _inner_jitted_target(x):
    return torch.cos(x) - 1


_INNER_BACKEND = Counting()
_inner = dynamo.jit(_inner_jitted_target, backend=_INNER_BACKEND)


@dynamo.disable
def _eager_only(x):
    print("eager_only", x.shape)
    return _inner(torch.tanh(x))


def _calls_disabled(x):
    y = x + 1
    y = _eager_only(y)
    return y * 3


def test_disabled_function_is_one_clean_break_and_runs_eagerly():
    _INNER_BACKEND.__init__()
    backend = Counting()
    x = torch.randn(4)
    expected, expected_out = _printed(_calls_disabled, x)
    jitted = dynamo.jit(_calls_disabled, backend=backend)
    for _ in range(2):
        result, out = _printed(jitted, x)
        torch.testing.assert_close(result, expected)
        assert out == expected_out
    assert len(backend.graphs) == 2  # before and after the call
    assert "torch.tanh" not in str(backend.ops()) and "tanh" not in str(backend.ops())
    assert _INNER_BACKEND.graphs == []  # a jitted function called inside stays eager

    report = dynamo.explain(_calls_disabled)(x)
    assert report.graph_break_count == 1
    (info,) = report.breaks
    assert info.kind == breaks.DISABLED.id and "_eager_only is marked dynamo.disable" in info.reason
    assert info.location.endswith(f"test_disable.py:{_calls_disabled.__code__.co_firstlineno + 2}")
    assert info.hint != breaks.UNSUPPORTED_CALL.hint
    assert "decorated with dynamo.disable" not in info.hint  # never "wrap it in itself"


def _with_block(x):
    y = x + 1
    with dynamo.disable():
        y = _inner(torch.tanh(y))
    return y * 3


def test_disable_block_inside_a_jitted_function_is_reported_once():
    _INNER_BACKEND.__init__()
    x = torch.randn(4)
    report = dynamo.explain(_with_block)(x)
    assert report.graph_break_count == 1, report
    (info,) = report.breaks
    assert info.kind == breaks.DISABLED.id
    assert "`with dynamo.disable():` block runs eagerly" in info.reason
    assert info.source_line.strip() == "with dynamo.disable():"
    assert "framejit itself" not in str(report)

    backend = Counting()
    jitted = dynamo.jit(_with_block, backend=backend)
    outside = hook.get_callback()   # None, or the NOP driver of `python -m dynamo nop-rewrite`
    for _ in range(2):
        torch.testing.assert_close(jitted(x), _with_block(x))
    assert "tanh" not in str(backend.ops()) and _INNER_BACKEND.graphs == []
    assert hook.get_callback() is outside


def _raises_inside(x):
    with dynamo.disable():
        return x.no_such_method()


def test_exception_inside_a_disabled_block_reads_as_eager():
    jitted = dynamo.jit(_raises_inside, backend=Counting())
    outside = hook.get_callback()   # None, or the NOP driver of `python -m dynamo nop-rewrite`
    with pytest.raises(AttributeError, match="no_such_method"):
        _raises_inside(torch.ones(2))
    with pytest.raises(AttributeError, match="no_such_method"):
        jitted(torch.ones(2))
    assert hook.adjust_thread_disabled(0) == 0 and hook.get_callback() is outside


# -- torch.compiler.disable and torch._dynamo.disable ----------------------------------------
def _helper(x):
    return torch.sin(x) + 2


def _torch_disabled_body(x):
    print("torch-disabled", x.shape)
    return _helper(x) * 5


_by_compiler = torch.compiler.disable(_torch_disabled_body)
_by_dynamo = torch._dynamo.disable(_torch_disabled_body)
_by_dynamo_reasoned = torch._dynamo.disable(_torch_disabled_body, reason="talks to a server")
_shallow = torch._dynamo.disable(_torch_disabled_body, recursive=False)


def _caller_of(disabled):
    def caller(x):
        y = x - 1
        y = disabled(y)
        return y.exp()
    return caller


@pytest.mark.parametrize("disabled", [_by_compiler, _by_dynamo, _by_dynamo_reasoned],
                         ids=["torch.compiler.disable", "torch._dynamo.disable", "reason="])
def test_torch_disabled_functions_are_never_traced(disabled):
    caller = _caller_of(disabled)
    x = torch.randn(3)
    expected, expected_out = _printed(caller, x)
    backend = Counting()
    jitted = dynamo.jit(caller, backend=backend)
    for _ in range(2):
        result, out = _printed(jitted, x)
        torch.testing.assert_close(result, expected)
        assert out == expected_out
    assert len(backend.graphs) == 2  # x - 1 and exp: the body and its callee run eagerly
    assert "sin" not in str(backend.ops()) and "mul" not in str(backend.ops())

    report = dynamo.explain(caller)(x)
    (info,) = report.breaks
    assert info.kind == breaks.DISABLED.id
    assert "_torch_disabled_body is marked torch.compiler.disable" in info.reason
    assert "set_eval_frame" not in str(report)
    if disabled is _by_dynamo_reasoned:
        assert "talks to a server" in info.reason


def test_torch_disable_non_recursive_skips_only_that_function():
    caller = _caller_of(_shallow)
    x = torch.randn(3)
    backend = Counting()
    jitted = dynamo.jit(caller, backend=backend)
    expected, expected_out = _printed(caller, x)
    result, out = _printed(jitted, x)
    torch.testing.assert_close(result, expected)
    assert out == expected_out
    assert "mul" not in str(backend.ops())  # the function's own body ran eagerly
    assert "<built-in method sin" in str(backend.ops())  # its callee was compiled, as in torch


def test_torch_disabled_function_raising_reads_as_eager():
    @torch.compiler.disable
    def fails(x):
        raise ValueError("from the disabled function")

    def caller(x):
        return fails(x + 1)

    with pytest.raises(ValueError, match="from the disabled function"):
        dynamo.jit(caller, backend=Counting())(torch.ones(2))


# -- global switches: jit(disable=True), JIT_DISABLE=1, dynamo.config.disable ----------------
def test_jit_disable_true_returns_the_target_unchanged():
    model = torch.nn.Linear(2, 2)
    assert dynamo.jit(_scaled, disable=True) is _scaled
    assert dynamo.jit(model, disable=True) is model
    assert dynamo.jit(disable=True, backend="eager")(_scaled) is _scaled
    assert dynamo.jit(_scaled, options={"disable": True}) is _scaled


def test_config_disable_runs_everything_eagerly_until_switched_back():
    backend = Counting()
    jitted = dynamo.jit(_scaled, backend=backend)
    x = torch.randn(3)
    jitted(x)
    saved = dynamo.config.snapshot()
    try:
        dynamo.config.disable = True
        torch.testing.assert_close(jitted(x), _scaled(x))
        torch.testing.assert_close(jitted(x.double()), _scaled(x.double()))
        assert len(backend.graphs) == 1 and backend.runs == 1
    finally:
        dynamo.config.update(**saved)
    jitted(x)
    assert backend.runs == 2


_ENVIRONMENT_PROGRAM = """
import torch, dynamo
graphs = []
def backend(gm, inputs):
    graphs.append(gm)
    return gm
jitted = dynamo.jit(lambda x: torch.sin(x) * 2, backend=backend)
x = torch.randn(3)
torch.testing.assert_close(jitted(x), torch.sin(x) * 2)
print(dynamo.config.disable, len(graphs))
dynamo.config.disable = False
jitted(x)
print(len(graphs))
"""


def test_jit_disable_environment_variable():
    environment = dict(os.environ, JIT_DISABLE="1")
    result = subprocess.run([sys.executable, "-c", _ENVIRONMENT_PROGRAM], env=environment,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["True", "0", "1"]


# -- a disabled function called from an inlined helper ---------------------------------------
def _through_helper(x, function):
    y = x.sin()
    y = function(y)
    return y.cos()


def _outer(x, function):
    return _through_helper(x + 1, function) - 1


@pytest.mark.parametrize("function", [_eager_only, _by_compiler],
                         ids=["dynamo.disable", "torch.compiler.disable"])
def test_disabled_function_called_from_an_inlined_helper(function):
    _INNER_BACKEND.__init__()
    backend = Counting()
    jitted = dynamo.jit(_outer, backend=backend)
    x = torch.randn(3)
    expected, expected_out = _printed(_outer, x, function)
    for _ in range(2):
        result, out = _printed(jitted, x, function)
        torch.testing.assert_close(result, expected)
        assert out == expected_out
    assert len(backend.graphs) == 2  # x + 1, sin | cos, - 1
    assert "tanh" not in str(backend.ops()) and "mul" not in str(backend.ops())
    assert _INNER_BACKEND.graphs == []
    report = dynamo.explain(_outer)(x, function)
    (info,) = report.breaks
    assert info.kind == breaks.DISABLED.id and "is marked" in info.reason
