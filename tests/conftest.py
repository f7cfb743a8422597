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


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "torch_compile: the test runs torch.compile (the anchor we measure against); "
        "skipped under `python -m dynamo nop-rewrite`, where every frame of torch.compile's own "
        "compiler would be rewritten too (a single such test ran for over an hour)")


def pytest_runtest_setup(item):
    if item.get_closest_marker("torch_compile") is None:
        return
    try:
        from dynamo import hook
        from dynamo.rewrite import NopRewriteDriver
    except ImportError:
        return
    if hook.SUPPORTED and isinstance(hook.get_callback(), NopRewriteDriver):
        pytest.skip("runs torch.compile, whose own compiler nop-rewrite would rewrite too")
