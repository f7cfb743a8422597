"""Graph fuzzer seed 5226 (C++ only, a silent wrong value): `torch.roll(a, 3, 1).sum()` of a
(5, 8, 2) float32 tensor gave 5.71 where eager gives 7.19. GCC 12.2 at -O3 vectorises the scalar
in-order float sum after completely unrolling the inner loop, and with the loads permuted (a
roll, a flip: `7 - i`, `i ^ 1`) it summed the wrong elements; the generated source was right.
Scalar float sums now pass through an opaque `JIT_OPAQUE` after each term (prelude.h), so the
compiler never vectorises them. Sums of permuted reads on both code generators."""
import pytest
import torch

import inductor
from tests.inductor.conftest import compile_function


@pytest.fixture(params=["cpp", "triton"])
def cpu_backend(request, monkeypatch):
    monkeypatch.setattr(inductor.config, "cpu_backend", request.param)
    monkeypatch.setattr(inductor.config, "fallback_on_error", False)
    return request.param


CASES = {
    "roll": lambda a: (torch.roll(a, 3, 1).sum(),),
    "flip": lambda a: (torch.flip(a, [1]).sum(), torch.flip(a, [1]).sum(-1)),
    "roll then rows": lambda a: (torch.roll(a, -2, 1).sum(1),),
    "flip of a product": lambda a: ((torch.flip(a, [1]) * a).sum(),),
}


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("shape", [(5, 8, 2), (3, 8, 1), (2, 16, 3)])
def test_sums_of_permuted_reads(cpu_backend, name, shape):
    function = CASES[name]
    a = torch.randn(shape, generator=torch.Generator().manual_seed(0))
    expected = function(a)
    actual = compile_function(function, a)(a)
    torch.testing.assert_close(actual, list(expected), rtol=1e-5, atol=1e-5)
