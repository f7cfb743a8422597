"""Repros from PyTorch's inductor test templates (tests/peer/FINDINGS.md I1, I3, I4).

I1: `_unsafe_masked_index` with a negative index under a true mask read element 0 (torch's
decomposition clamps indices; eager counts from the end). I3: `arange` with a float start and
an integer dtype failed in the C++ printer (eager truncates start and step, and takes the
length from the float range). I4: `round(x, decimals=n)` reached the lowering of
`round.default` (TypeError on `decimals`).
"""
import pytest
import torch

import inductor
from tests.inductor.conftest import check_same


@pytest.fixture(params=["cpp", "triton"])
def cpu_backend(request, monkeypatch):
    monkeypatch.setattr(inductor.config, "cpu_backend", request.param)
    return request.param


def test_unsafe_masked_index_with_negative_indices(cpu_backend):
    def function(a, mask, index):
        return torch.ops.aten._unsafe_masked_index(a, mask, [index], 1)
    check_same(function, torch.arange(8.0), torch.tensor([True, False, True, True]),
               torch.tensor([-2, 3, -8, 7]))


@pytest.mark.parametrize("start, end, step, dtype", [
    (0.1, 8.0001, 1, torch.int64), (-1.5, 3, 1.5, torch.int64), (2.7, 9.1, 2.2, torch.int32),
    (-2.7, 5, 1, torch.int64), (0.1, 1.0, 0.3, torch.float32), (0, 7, 3, torch.int64)])
def test_arange_with_float_bounds(cpu_backend, start, end, step, dtype):
    check_same(lambda x: torch.arange(start, end, step, dtype=dtype) + x,
               torch.ones(1, dtype=dtype))


@pytest.mark.parametrize("decimals", [2, 1, 0, -1, -2])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16,
                                   torch.bfloat16], ids=str)
def test_round_with_decimals(cpu_backend, decimals, dtype):
    values = torch.randn(64, generator=torch.Generator().manual_seed(0)) * 100
    values = torch.cat([values, torch.tensor([2.5, -2.5, 0.125, -0.135, 1e30])])
    check_same(lambda a: torch.round(a, decimals=decimals), values.to(dtype), atol=0, rtol=0)
