"""Graph-fuzzer repro: `pow` with a scalar exponent takes the exponent's type promotion.

`aten.pow.Tensor_Scalar(bool_tensor, 2)` came back as bool (eager: int64) and an integer
tensor to a float power as the integer type: the special cases (squares, cubes, square
roots, reciprocals) built their bodies with the base's dtype only (fuzzer seeds 10384, 10742;
tests/fuzz/graphs/FINDINGS.md class 17).
"""
import pytest
import torch

import inductor
from tests.inductor.conftest import check_same


@pytest.fixture(params=["cpp", "triton"])
def cpu_backend(request, monkeypatch):
    monkeypatch.setattr(inductor.config, "cpu_backend", request.param)
    return request.param


@pytest.mark.parametrize("exponent", [2, 3, -1, 0.5, 2.0, 3.0, -2.0, 1.5])
@pytest.mark.parametrize("dtype", [torch.bool, torch.uint8, torch.int32, torch.int64,
                                   torch.bfloat16, torch.float32], ids=str)
def test_scalar_power_dtype(cpu_backend, dtype, exponent):
    base = (torch.arange(12).reshape(3, 4) % 5 + 1).to(dtype)
    try:
        torch.ops.aten.pow.Tensor_Scalar(base, exponent)
    except RuntimeError:
        pytest.skip("eager rejects it (integer to a negative integer power)")
    compiled = check_same(lambda x: torch.ops.aten.pow.Tensor_Scalar(x, exponent), base)
    assert compiled(base).dtype == torch.ops.aten.pow.Tensor_Scalar(base, exponent).dtype
