"""BatchNorm over symbolic sizes rounds as eager's CPU kernel, as it does over static ones.

A symbolic trace runs under torch's Python dispatcher, which routes an evaluation-mode
`F.batch_norm` to `aten._native_batch_norm_legit_no_training`, not to `native_batch_norm`
(where the static trace meets it): torch's general decomposition took it and BatchNorm2d's
evaluation output under `dynamic=True` on inductor differed from eager's in its last bits
(found under JIT_DYNAMIC_BY_DEFAULT=1 by tests/training/test_optimizer_soundness.py::
test_batch_norm_running_statistics_without_grad; inductor/batch_norm.evaluating)."""
import pytest
import torch
from torch import nn

import dynamo


def _batch_norm(module: nn.Module) -> nn.Module:
    generator = torch.Generator().manual_seed(0)
    channels = module.num_features
    with torch.no_grad():
        module.running_mean.copy_(torch.randn(channels, generator=generator))
        module.running_var.copy_(torch.rand(channels, generator=generator) + 0.5)
        module.weight.copy_(torch.randn(channels, generator=generator))
        module.bias.copy_(torch.randn(channels, generator=generator))
    return module


def _assert_bitwise(actual: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, what
    assert actual.requires_grad == expected.requires_grad, what
    differ = (actual.view(torch.int32) != expected.view(torch.int32)).sum().item()
    assert differ == 0, f"{what}: {differ} of {actual.numel()} elements differ"


SHAPES = {2: [(8, 4, 7, 7), (5, 4, 6, 9), (3, 4, 5, 5)], 1: [(8, 4, 7), (5, 4, 9), (3, 4, 6)]}


@pytest.mark.parametrize("dims", [2, 1])
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_evaluation_output_bitwise_over_symbolic_sizes(backend, dims):
    kind = nn.BatchNorm2d if dims == 2 else nn.BatchNorm1d
    module, twin = _batch_norm(kind(4)).eval(), _batch_norm(kind(4)).eval()
    jitted = dynamo.jit(module, backend=backend, dynamic=True)
    for index, shape in enumerate(SHAPES[dims]):
        x = torch.randn(shape, generator=torch.Generator().manual_seed(index)) * 3 + 1
        with torch.no_grad():
            _assert_bitwise(jitted(x), twin(x), f"{shape}: no_grad output")
        _assert_bitwise(jitted(x), twin(x), f"{shape}: output")


@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_training_statistics_then_evaluation_bitwise_over_symbolic_sizes(backend):
    module, twin = _batch_norm(nn.BatchNorm2d(4)), _batch_norm(nn.BatchNorm2d(4))
    jitted = dynamo.jit(module, backend=backend, dynamic=True)
    with torch.no_grad():
        for index, shape in enumerate(SHAPES[2]):
            x = torch.randn(shape, generator=torch.Generator().manual_seed(10 + index))
            _assert_bitwise(jitted(x), twin(x), f"{shape}: training output")
            _assert_bitwise(module.running_mean, twin.running_mean, f"{shape}: running mean")
            _assert_bitwise(module.running_var, twin.running_var, f"{shape}: running var")
        module.eval()
        twin.eval()
        for index, shape in enumerate(SHAPES[2]):
            x = torch.randn(shape, generator=torch.Generator().manual_seed(20 + index))
            _assert_bitwise(jitted(x), twin(x), f"{shape}: evaluation output")
