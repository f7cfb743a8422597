"""A `torch.Size` with symbolic entries stays a `torch.Size` through slicing, `+` and `*`, as
eager's does (found by the suite under `JIT_DYNAMIC_BY_DEFAULT=1`:
tests/capture/test_values.py::test_torch_size_dtype_device_values returned `size[1:]` as a
tuple). Runs with `dynamic=True`; every result is compared with eager, types included.
"""
import pytest
import torch

import dynamo


def sliced(x):
    size = x.shape
    return size[1:], size[:1], size[::2], size[-1:]


def joined(x):
    size = x.shape
    return size + (4,), (7,) + size, size[:1] + size[1:], size + size, size * 2


def built_from(x):
    return torch.zeros(x.shape[1:]) + x[0], x.new_ones(x.shape[:1] + (2,))


@pytest.mark.parametrize("function", [sliced, joined, built_from])
@pytest.mark.parametrize("sizes", [(3, 5, 2), (6, 4, 3)])
def test_a_symbolic_size_keeps_its_class(function, sizes):
    counting = dynamo.CountingBackend(dynamo.backends.lookup_backend("eager"))
    jitted = dynamo.jit(function, backend=counting, dynamic=True)
    x = torch.randn(*sizes)
    expected, actual = function(x), jitted(x)
    assert [type(value) for value in actual] == [type(value) for value in expected]
    for got, wanted in zip(actual, expected):
        if isinstance(wanted, torch.Tensor):
            torch.testing.assert_close(got, wanted)
        else:
            assert got == wanted
    assert counting.frame_count == 1
