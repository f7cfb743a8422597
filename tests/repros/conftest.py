"""Repro tests run on both backends: `backend` is the compiler `check(..., backend=)` takes."""
import pytest


@pytest.fixture(params=["eager", "inductor"])
def backend(request):
    from dynamo.backends import lookup_backend
    return lookup_backend(request.param)
