"""Project-wide test setup: internal compiler errors raise in tests instead of falling back,
and every test starts with no compiled entries."""
import pytest


@pytest.fixture(autouse=True)
def _fresh_jit_state():
    try:
        import torch  # noqa: F401  (torch-free runs, e.g. a debug CPython, skip this)
        import dynamo
        from dynamo import hook
    except ImportError:
        yield
        return
    if not hook.SUPPORTED:
        yield
        return
    saved = dynamo.config.suppress_errors
    dynamo.config.suppress_errors = False
    yield
    dynamo.config.suppress_errors = saved
    dynamo.reset()
