"""Repro tests run on both backends: `backend` is the compiler `check(..., backend=)` takes."""
import pytest


@pytest.fixture(params=["eager", "inductor"])
def backend(request):
    import dynamo
    return dynamo.backends.lookup_backend(request.param)
