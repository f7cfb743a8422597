"""Graphs with symbolic sizes (issue 23) on the Triton backend (CPU tensors through Triton's
interpreter, `cpu_backend="triton"`; CUDA tensors where a GPU is present): one compile
serves every size with eager's answers. Each distinct size gets a static variant today
(`inductor/size_variants.py`), counted as a "per_size" fallback; with
`mode="reduce-overhead"` on a GPU each variant records its own CUDA graph."""
import copy

import pytest
import torch

import inductor
from tests.inductor.test_dynamic_sizes import assert_same, symbolic_graph
from tests.triton.conftest import DEVICES

PER_SIZE = pytest.mark.expect_fallback("per_size", reason="symbolic sizes: a static variant "
                                       "per size until kernels take sizes as arguments")


def _check(function, make_inputs, dynamic, sizes, device, mode=None):
    first = make_inputs(sizes[0], device)
    compiled = inductor.compile_fx(symbolic_graph(function, first, dynamic),
                                   copy.deepcopy(first), mode=mode)
    for size in sizes + sizes[:1]:
        inputs = make_inputs(size, device)
        eager_inputs, compiled_inputs = copy.deepcopy(inputs), copy.deepcopy(inputs)
        assert_same(compiled(*compiled_inputs), function(*eager_inputs))
        torch.testing.assert_close(compiled_inputs, eager_inputs)
    assert compiled.report.size_variants == len(set(sizes))
    return compiled


@PER_SIZE
@pytest.mark.parametrize("device", DEVICES)
def test_pointwise_reduction_and_softmax(device):
    def function(x, y):
        return torch.softmax(x * y, -1), (x + 1).sum(0)
    _check(function, lambda n, device: [torch.randn(n, 7, device=device),
                                        torch.randn(7, device=device)],
           [[0], []], (3, 97), device)


@PER_SIZE
@pytest.mark.parametrize("device", DEVICES)
def test_computed_view_and_write_into_input(device):
    def function(x):
        x.mul_(2)
        return x.view(x.size(0) // 2, -1).sum(1)
    _check(function, lambda n, device: [torch.randn(2 * n, 3, device=device)], [[0]],
           (2, 33), device)


@PER_SIZE
@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU")
def test_reduce_overhead_one_recording_per_size():
    def function(x):
        return (x.cos() * 2).sum(-1)
    _check(function, lambda n, device: [torch.randn(n, 64, device=device)], [[0]],
           (4, 100, 1000), "cuda", mode="reduce-overhead")
