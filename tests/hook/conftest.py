"""Fixtures for the frame-hook tests (torch-free, so they also run under a debug CPython)."""
import pytest

from dynamo import _C, hook


class Recorder:
    """A frame callback that records code names and answers with a fixed policy."""

    def __init__(self, answer=None):
        self.names = []
        self.views = []
        self.answer = answer

    def __call__(self, view):
        self.names.append(view.f_code.co_name)
        self.views.append(view)
        answer = self.answer
        return answer(view) if callable(answer) else answer


@pytest.fixture
def install():
    """install(callback) sets this thread's callback for the rest of the test."""
    saved = hook.get_callback()
    yield _C.set_callback  # a C function: uninstalling adds no frame of its own
    hook.set_callback(saved)
    hook.clear_all()


@pytest.fixture(autouse=True)
def _no_callback_leaks():
    before = hook.get_callback()
    yield
    assert hook.get_callback() is before, "a test left a frame callback installed"
