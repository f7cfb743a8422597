"""`torch.enable_grad()` regions inside `torch.inference_mode`, beside parameters that
require grad.

Found by the program fuzzer (inductor seed 71095, call mode `inference_mode`): a graph holding
an `enable_grad` region and a parameter took inductor's training path, whose analysis
functionalized views of the call's inference tensors and raised "Cannot set version_counter
for inference tensor" where eager runs (autograd records nothing under inference mode, regions
included). Each program runs eagerly and jitted under several modes in turn and compares
values, `requires_grad`, `is_inference()` and the written input.
"""
import contextlib

import pytest
import torch

import dynamo

BACKENDS = ["eager", "inductor"]
MODES = ["inference_mode", "grad", "inference_mode", "no_grad", "inference_mode"]


def _mode(name):
    if name == "inference_mode":
        return torch.inference_mode()
    if name == "no_grad":
        return torch.no_grad()
    return contextlib.nullcontext()


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        with torch.no_grad():
            self.lin.weight.copy_(torch.arange(16.0).view(4, 4) / 16 - 0.5)
            self.lin.bias.fill_(0.25)


def _written_then_viewed(net, x):
    x[x < -0.5] *= 2                      # a graph break (a mask), then a write into x
    hidden = net.lin(torch.stack([x]).sum(0))
    halves = x.unflatten(-1, (2, 2))
    with torch.enable_grad():
        copy = halves.clone()
    return hidden, halves, copy


def _region_uses_the_parameter(net, x):
    y = x * 2
    with torch.enable_grad():
        z = net.lin(y).relu()
    return z + 1, y.view(2, 2, 2)


def _region_inside_no_grad(net, x):
    with torch.no_grad():
        a = net.lin(x)
        with torch.enable_grad():
            b = net.lin(a).sum(-1)
    return a, b


PROGRAMS = [_written_then_viewed, _region_uses_the_parameter, _region_inside_no_grad]


def _describe(value):
    if isinstance(value, torch.Tensor):
        return (value.detach().tolist(), value.dtype, value.requires_grad, value.is_inference())
    if isinstance(value, (tuple, list)):
        return [_describe(item) for item in value]
    return value


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda program: program.__name__)
def test_grad_regions_under_inference_mode(program, backend):
    net = _Net()
    jitted = dynamo.jit(program, backend=backend)
    for call, mode in enumerate(MODES):
        x = torch.arange(8.0).view(2, 4) / 4 - 1 + call
        outcomes = []
        for function in (program, jitted):
            argument = x.clone()
            with _mode(mode):
                result = function(net, argument)
            outcomes.append((_describe(result), _describe(argument)))
        assert outcomes[1] == outcomes[0], f"call {call} ({mode})"
