"""Repro tests run on both backends: `backend` is the compiler `check(..., backend=)` takes;
`code_generator` a backend name for `dynamo.jit`, per code generator. `values` makes the
deterministic inputs of the training-path repros (import it: `from tests.repros.conftest
import values`)."""
import pytest
import torch


def values(shape, seed):
    """A deterministic tensor of `shape`: multiples of 0.25 in [-2, 2] (sums and products
    of a few of them are exact in float32)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(-8, 9, shape, generator=generator) / 4


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
