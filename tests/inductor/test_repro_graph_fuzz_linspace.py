"""Repro of the 20,000-graph CPU campaign (seed 17057, torch 2.11 and 2.14): `linspace` as
torch's reference computes it (split at `i < steps / 2`, product and sum rounded apart) is not
eager's CPU kernel (split at `steps // 2`, one fused multiply-add each): the middle element of
`linspace(-1, 1, 7)` was exactly 0 where eager's is -2**-25, so its `bool()` was False,
eager True. Compared bit for bit, on both CPU code generators (Triton under its
interpreter; float64 there is skipped: NumPy, which runs it, has no fused multiply-add)."""
import pytest
import torch

import inductor
from tests.fuzz.graphs.program import namespace_for, trace

recorded = namespace_for("cpu", traced=True)["torch"]   # factories become graph nodes
DEVICE = torch.device("cpu")
CASES = [(-1, 1, 7), (-1, 1, 11), (-3, 2.5, 9), (0, 1, 2), (-2.7, 3.1, 100), (5, -5, 33),
         (0.1, 0.7, 13), (-1e3, 1e3, 1001), (1, 1, 5), (-1, 1, 8), (-1, 1, 65)]


@pytest.fixture(params=["cpp", "triton"])
def cpu_backend(request, monkeypatch):
    monkeypatch.setattr(inductor.config, "cpu_backend", request.param)
    return request.param


def test_seed_17057():
    def f():
        v7 = recorded.linspace(-1, 1, 7, device=DEVICE)
        return (v7.type(torch.bool),)
    assert torch.equal(inductor.compile_fx(trace(f), [])()[0], f()[0])


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("case", CASES, ids=str)
def test_linspace_bits(cpu_backend, case, dtype):
    if cpu_backend == "triton" and dtype == torch.float64:
        pytest.skip("Triton's interpreter computes a float64 fma as a product and a sum "
                    "(NumPy has no fused multiply-add): the middle element is 0")
    start, end, steps = case

    def f():
        v = recorded.linspace(start, end, steps, dtype=dtype, device=DEVICE)
        return (v, v.type(torch.bool), v * 2)
    for want, got in zip(f(), inductor.compile_fx(trace(f), [])()):
        assert torch.equal(got, want), (got - want).nonzero()
