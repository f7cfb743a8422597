"""Repro tests run on both backends: `backend` is the compiler `check(..., backend=)` takes."""
import pytest


@pytest.fixture(params=["eager", "inductor"])
def backend(request):
    from dynamo.backends import lookup_backend
    return lookup_backend(request.param)


@pytest.fixture(params=["eager", "cpp", "triton"])
def code_generator(request, monkeypatch):
    """A backend name for `dynamo.jit`: `eager` (the control), or inductor with its C++ or
    its Triton (interpreted on the CPU) code generator."""
    if request.param == "eager":
        return "eager"
    import inductor
    monkeypatch.setattr(inductor.config, "cpu_backend", request.param)
    return "inductor"
