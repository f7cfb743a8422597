"""Graph-fuzzer repro: accumulating scatters (`index_add`, `scatter_add`, `index_put` with
`accumulate=True`) of every dtype, on both CPU backends.

Before the fix the Triton backend emitted `tl.atomic_add` on bool, int8 and (under the CPU
interpreter) bfloat16 buffers, which Triton rejects ("atomic_add does not support int1");
such scatters now run through eager's kernel there (tests/fuzz/graphs/FINDINGS.md, class
12).
"""
import pytest
import torch

import inductor
from tests.inductor.conftest import check_same

DTYPES = [torch.float32, torch.float64, torch.float16, torch.bfloat16, torch.int64,
          torch.int32, torch.int16, torch.int8, torch.uint8, torch.bool]


@pytest.fixture(params=["cpp", "triton"])
def cpu_backend(request, monkeypatch):
    monkeypatch.setattr(inductor.config, "cpu_backend", request.param)
    return request.param


def _ones(shape, dtype):
    return torch.ones(shape, dtype=dtype)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_index_add(cpu_backend, dtype):
    check_same(lambda x, i, s: x.index_add(0, i, s), _ones(5, dtype), torch.tensor([0, 3, 0]),
               _ones(3, dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_scatter_add(cpu_backend, dtype):
    index = torch.tensor([[0, 1, 0], [2, 2, 1]])
    check_same(lambda x, i, s: torch.scatter_add(x, 1, i, s), _ones((2, 4), dtype), index,
               _ones((2, 3), dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_index_put_accumulate(cpu_backend, dtype):
    def function(x, i, s):
        return torch.index_put(x, (i,), s, True)
    check_same(function, _ones((4, 2), dtype), torch.tensor([1, 1, 3]), _ones((3, 2), dtype))
