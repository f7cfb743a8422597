"""Evaluation-mode BatchNorm after a downsampling stage compiles once over symbolic sizes.

A jitted torchvision LR-ASPP (MobileNetV3) called at a second input size took 34 s: the
symbolic trace of its one graph met two size questions no front-end guard answered, both in
`inductor/batch_norm.py`'s exact evaluation path, and fell back to a static compile of that
size after half the work (and again for every later size):

- `_reproducible` asked whether a sample and channel hold more than one element
  (`ceil(H / 16) * ceil(W / 16) > 1`); evaluation mode does not need it (the kernel computes
  the same fma at (N, C, 1, 1) and (N, C): bitwise, checked below, where torch's general
  decomposition, which those shapes took, differed from eager in the last bits);
- the final `addcmul` between the contiguous input and (1, C, 1, 1) operands made torch's
  meta compare the input's strides (`W != H * W`: is H 1?).

Also: the evaluation decomposition traced torch's general one beside the exact one and kept
only its empty statistics (now made directly)."""
import pytest
import torch
from torch import nn

import dynamo
from dynamic_programs import assert_same_value, counting_backend
from inductor import batch_norm
from inductor.runtime import fallbacks

aten = torch.ops.aten


def _randomised(module: nn.Module) -> nn.Module:
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for norm in module.modules():
            if isinstance(norm, nn.modules.batchnorm._BatchNorm):
                channels = norm.num_features
                norm.running_mean.copy_(torch.randn(channels, generator=generator))
                norm.running_var.copy_(torch.rand(channels, generator=generator) + 0.5)
                norm.weight.copy_(torch.randn(channels, generator=generator))
                norm.bias.copy_(torch.randn(channels, generator=generator))
    return module.eval()


def _bitwise(actual: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    assert actual.shape == expected.shape and actual.dtype == expected.dtype, what
    differ = (actual.view(torch.int32) != expected.view(torch.int32)).sum().item()
    assert differ == 0, f"{what}: {differ} of {actual.numel()} elements differ"


def _convolved(in_place: bool) -> nn.Module:    # LR-ASPP's pattern: strided conv, BatchNorm
    return nn.Sequential(nn.Conv2d(3, 8, 3, stride=16, padding=1), nn.BatchNorm2d(8),
                         nn.Hardswish(inplace=in_place))


@pytest.mark.parametrize("in_place", [False, True], ids=["out_of_place", "in_place"])
def test_evaluation_batch_norm_compiles_once_for_every_size(in_place):
    module = _randomised(_convolved(in_place))
    dynamo.reset()
    counting = counting_backend("inductor")
    jitted = dynamo.jit(module, backend=counting, dynamic=True)
    before = fallbacks.fallbacks()
    # spatial after the conv: 4 x 5, 3 x 3, 2 x 3, 2 x 2 (1 would be an entry of its own: the
    # front end's own trace guards it is not)
    with torch.no_grad():
        for index, shape in enumerate([(2, 3, 64, 80), (2, 3, 48, 40), (2, 3, 20, 36),
                                       (2, 3, 17, 17)]):
            x = torch.randn(shape, generator=torch.Generator().manual_seed(index))
            assert_same_value(module(x), jitted(x), f"{shape}")
    assert fallbacks.since(before) == {}    # was {'per_size': ...}: one compile per size
    assert counting.frame_count == 1


@pytest.mark.parametrize("shape", [(8, 64, 1, 1), (1, 96, 1, 1), (3, 100, 1), (16, 64),
                                   (2, 5, 1, 1, 1), (4, 32, 2, 2)])
def test_evaluation_bitwise_with_one_element_per_sample_and_channel(shape):
    kind = {2: nn.BatchNorm1d, 3: nn.BatchNorm1d, 4: nn.BatchNorm2d, 5: nn.BatchNorm3d}
    module = _randomised(kind[len(shape)](shape[1]))
    jitted = dynamo.jit(module, backend="inductor", dynamic=False)
    with torch.no_grad():
        for seed in range(3):
            x = torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * 10
            _bitwise(jitted(x), module(x), f"{shape} seed {seed}")


@pytest.mark.parametrize("overload, reserve",
                         [(aten._native_batch_norm_legit_no_training.default, False),
                          (aten._batch_norm_no_update.default, True)])
def test_evaluation_decomposition_does_not_run_the_general_one(overload, reserve):
    general = torch._decomp.decomposition_table[overload]
    calls = []

    def counted(*arguments):
        calls.append(arguments)
        return general(*arguments)
    decompose = batch_norm.evaluating(counted, reserve)
    module = _randomised(nn.BatchNorm2d(4))
    arguments = (torch.randn(2, 4, 3, 5), module.weight.detach(), module.bias.detach(),
                 module.running_mean, module.running_var, 0.1, 1e-5)
    results, expected = decompose(*arguments), general(*arguments)
    assert calls == []
    assert len(results) == len(expected)
    for result, want in zip(results[1:], expected[1:]):
        assert (result.shape, result.dtype, result.device) == \
            (want.shape, want.dtype, want.device)
    _bitwise(results[0], module(arguments[0]), "output")
    decompose(arguments[0].to(torch.float64), *[value.double() for value in arguments[1:5]],
              0.1, 1e-5)
    assert len(calls) == 1      # not reproduced (float64): the general decomposition
