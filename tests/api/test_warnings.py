"""framejit's warnings point at the user's line, and recompile reasons are never None (issue 24,
item 3): the recompile-limit warning, the internal-error fallback warning, and the
`recompiles` log channel (`JIT_LOGS=recompiles`).
"""
import logging
import os
import subprocess
import sys
import traceback
import warnings

import pytest
import torch

import dynamo
from dynamo import hook

pytestmark = pytest.mark.skipif(not hook.SUPPORTED, reason=str(hook.unsupported_reason()))


@pytest.fixture(autouse=True)
def _fresh():
    dynamo.reset()
    yield
    dynamo.reset()


@pytest.fixture
def recompile_log(caplog):
    logger = logging.getLogger("framejit.recompiles")
    level = logger.level
    logger.setLevel(logging.DEBUG)
    with caplog.at_level(logging.DEBUG, logger="framejit.recompiles"):
        yield caplog
    logger.setLevel(level)


def doubled(x):
    return x * 2


def _caught(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    return [warning for warning in caught if "framejit" in str(warning.message)]


def test_recompile_limit_warning_points_at_the_call():
    jitted = dynamo.jit(doubled, backend="eager", options={"recompile_limit": 2})
    line = sys._getframe().f_lineno + 4

    def calls():
        for dtype in (torch.float32, torch.float64, torch.int64):
            torch.testing.assert_close(jitted(torch.ones(3, dtype=dtype)),
                                       torch.full((3,), 2, dtype=dtype))
    (warning,) = _caught(calls)
    assert warning.filename == __file__ and warning.lineno == line
    assert "reached dynamo.config.recompile_limit (2)" in str(warning.message)
    assert "Last reason: None" not in str(warning.message)
    assert "dtype" in str(warning.message)


def _failing_backend(gm, example_inputs):
    raise RuntimeError("backend exploded")


def test_internal_error_warning_points_at_the_call():
    jitted = dynamo.jit(doubled, backend=_failing_backend, options={"suppress_errors": True})
    x = torch.ones(2)
    line = sys._getframe().f_lineno + 1
    (warning,) = _caught(lambda: torch.testing.assert_close(jitted(x), x * 2))
    assert warning.filename == __file__ and warning.lineno == line
    assert "internal error while compiling doubled" in str(warning.message)
    assert "backend exploded" in str(warning.message)


def applies(x, function):
    return function(x) + 1


def test_reason_when_the_entries_died_since(recompile_log):
    """A fresh lambda per call: each entry dies with its lambda, the churn cap is reached; the
    warning and the log still name the guard that failed."""
    jitted = dynamo.jit(applies, backend="eager", options={"recompile_limit": 2})
    x = torch.ones(2)

    def calls():
        for _ in range(12):
            torch.testing.assert_close(jitted(x, lambda y: y * 3), x * 3 + 1)
    (warning,) = _caught(calls)
    message = str(warning.message)
    assert "Last reason: None" not in message and warning.filename == __file__
    reason = message.split("Last reason: ")[1]
    assert "died" in reason or "dropped" in reason, reason
    logged = [record.getMessage() for record in recompile_log.records]
    assert any(reason in text and "recompile_limit" in text for text in logged), logged
    assert not any(text.endswith(": None") for text in logged), logged


def test_several_wrappers_of_one_code_object(recompile_log):
    first = dynamo.jit(doubled, backend="eager", options={"recompile_limit": 2})
    second = dynamo.jit(doubled, backend=dynamo.CountingBackend(),
                        options={"recompile_limit": 2})
    x = torch.ones(3)
    first(x)
    first(x.double())
    second(x)
    logged = [record.getMessage() for record in recompile_log.records]
    assert any("another dynamo.jit wrapper" in text for text in logged), logged
    second(x.double())

    (warning,) = _caught(lambda: second(x.long()))
    message = str(warning.message)
    assert warning.filename == __file__
    assert "Last reason: None" not in message and "dtype" in message.split("Last reason:")[1]
    logged = [record.getMessage() for record in recompile_log.records]
    assert all(not text.endswith(": None") for text in logged), logged
    assert any("not recompiling doubled" in text and "dtype" in text for text in logged)


_LOGGED_PROGRAM = """
import torch, dynamo
jitted = dynamo.jit(lambda x: x * 2, backend="eager")
jitted(torch.ones(2))
jitted(torch.ones(2, dtype=torch.float64))
"""


def test_jit_logs_recompiles_from_the_environment():
    environment = dict(os.environ, JIT_LOGS="recompiles")
    result = subprocess.run([sys.executable, "-c", _LOGGED_PROGRAM], env=environment,
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "recompiling <lambda>" in result.stderr and "dtype" in result.stderr, result.stderr


# A caller whose code was compiled from another text than its module's file (code made by
# `exec` in the module's globals: dataclass and namedtuple methods, templated code), at a line
# past the end of that file: CPython's warn_explicit reads the warning's source line through
# the globals' loader and raised IndexError, which failed the program (stop 47's GPU run of
# fasterrcnn_mobilenet_v3_large_320_fpn: "IndexError: list index out of range").
@pytest.fixture
def far_caller(tmp_path):
    import importlib.util
    path = tmp_path / "short_module.py"
    path.write_text("SHORT = 1\n")
    spec = importlib.util.spec_from_file_location("short_module", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = "\n" * 5000 + "def far_caller(function, x):\n    return function(x)\n"
    exec(compile(text, "<templated caller>", "exec"), module.__dict__)
    return module.far_caller


def test_internal_error_warning_from_a_caller_past_its_modules_source(far_caller):
    jitted = dynamo.jit(doubled, backend=_failing_backend, options={"suppress_errors": True})
    x = torch.ones(2)
    (warning,) = _caught(lambda: torch.testing.assert_close(far_caller(jitted, x), x * 2))
    assert warning.filename == "<templated caller>" and warning.lineno == 5002
    assert "backend exploded" in str(warning.message)


def test_recompile_limit_warning_from_a_caller_past_its_modules_source(far_caller):
    jitted = dynamo.jit(doubled, backend="eager", options={"recompile_limit": 2})

    def calls():
        for dtype in (torch.float32, torch.float64, torch.int64):
            torch.testing.assert_close(far_caller(jitted, torch.ones(3, dtype=dtype)),
                                       torch.full((3,), 2, dtype=dtype))
    (warning,) = _caught(calls)
    assert "reached dynamo.config.recompile_limit (2)" in str(warning.message)


def test_a_warnings_error_filter_still_raises(far_caller):
    jitted = dynamo.jit(doubled, backend=_failing_backend, options={"suppress_errors": True})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(RuntimeWarning, match="backend exploded"):
            far_caller(jitted, torch.ones(2))


# A graph break inside an inlined helper of another module resumes inside it: the compiled
# frame runs the helper's breaking call itself (a copy of its instructions, `resume/nested.py`).
# Those copies kept the helper's line numbers in the compiled function's file, so a warning
# raised while they ran named the helper's line in the caller's file (fasterrcnn's
# recompile-limit warning named `generalized_rcnn.py:372`, rpn.py's line; here past the end
# of this file). The helper's functions sit past line 300 of their module.
FAR_HELPERS = "\n" * 300 + '''
def breaker(x):
    y = x.cos()
    for _ in range(2):
        print(end="")   # a break in a loop: this call runs as a frame of its own
    return y


def helper(x):
    y = x + 1
    z = breaker(y)
    return z * 2


def raising(x):
    y = x + 1
    z = broken(y)
    return z * 2


def broken(x):
    for _ in range(2):
        print(end="")
    raise ValueError("from the helper")
'''


@pytest.fixture
def far_helpers(tmp_path):
    import importlib.util
    path = tmp_path / "far_helpers.py"
    path.write_text(FAR_HELPERS)
    spec = importlib.util.spec_from_file_location("far_helpers", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _fails_on_cos(gm, example_inputs):
    """Compiles the callers' graphs; raises on the breaker's (the one with `cos`)."""
    if any("cos" in str(node.target) for node in gm.graph.nodes):
        raise RuntimeError("backend exploded")
    return gm.forward


def _calls_the_far_helper(helpers, x):
    w = x * 3
    return helpers.helper(w) - 1


def _calls_the_raising_helper(helpers, x):
    w = x * 3
    return helpers.raising(w) - 1


def test_a_warning_while_an_inlined_helpers_copied_call_runs_names_the_users_line(
        far_helpers):
    jitted = dynamo.jit(_calls_the_far_helper, backend=_fails_on_cos,
                        options={"suppress_errors": True})
    x = torch.randn(3)
    (warning,) = _caught(lambda: torch.testing.assert_close(
        jitted(far_helpers, x), _calls_the_far_helper(far_helpers, x)))
    assert "internal error while compiling breaker" in str(warning.message)
    user_line = _calls_the_far_helper.__code__.co_firstlineno + 2   # `helpers.helper(w)`
    assert (warning.filename, warning.lineno) == (__file__, user_line)


def test_a_traceback_through_an_inlined_helpers_copied_call_is_eagers(far_helpers):
    def frames(function):
        with pytest.raises(ValueError, match="from the helper") as raised:
            function(far_helpers, torch.randn(3))
        return [(frame.filename, frame.lineno, frame.name)
                for frame in traceback.extract_tb(raised.value.__traceback__)
                if frame.filename in (__file__, far_helpers.__file__)]
    eager = frames(_calls_the_raising_helper)
    lines = FAR_HELPERS.splitlines()
    helper_lines = [lines.index("    z = broken(y)") + 1, lines.index(
        '    raise ValueError("from the helper")') + 1]
    assert [line for _file, line, _name in eager if line > 300] == helper_lines
    assert frames(dynamo.jit(_calls_the_raising_helper, backend="eager")) == eager
