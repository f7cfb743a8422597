"""Inference tensors (made under `torch.inference_mode`) passed, outside inference mode, to a
graph that computes gradients (a parameter that requires grad).

Found by the program fuzzer (inductor seed 71053, call mode `inference_tensors_outside`): the
training path traced its joint graph reading `argument._version`, which inference tensors lack,
and raised "Inference tensors do not track version counter" where eager returns. Every program
here runs eagerly and jitted and compares values, gradients and exceptions (eager refuses to save
an inference tensor for backward: the jitted program must raise the same error).
"""
import contextlib

import pytest
import torch

import dynamo

BACKENDS = ["eager", "inductor"]


@contextlib.contextmanager
def _region():
    yield 1


class _Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.arange(3.0) / 4)

    def forward(self, t):
        return self.w.sub(t)


def _after_break(net, y):
    with _region():       # a graph break: the module call below is a frame of its own
        pass
    return net(y) * 2


def _sub(net, y):
    return net.w.sub(y).sum()


def _saves_input(net, y):
    return (net.w * y).sum()          # mul saves `y` for backward: eager refuses


def _matmul(net, y):
    return torch.mm(y.view(1, 3), net.w.view(3, 1)).sin()


def _no_grad_use(net, y):
    return (net.w.detach() + y).cos() + net.w


PROGRAMS = [_after_break, _sub, _saves_input, _matmul, _no_grad_use]


def _outcome(program, net, y):
    net.w.grad = None
    try:
        result = program(net, y)
        result.sum().backward()
    except RuntimeError as error:
        return ("raised", str(error))
    return ("returned", result.detach().tolist(), result.requires_grad, net.w.grad.tolist())


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda program: program.__name__)
def test_inference_inputs_outside_inference_mode(program, backend):
    net = _Net()
    jitted = dynamo.jit(program, backend=backend)
    for call in range(3):
        with torch.inference_mode(call != 1):   # call 1: an ordinary tensor in between
            y = torch.arange(3.0) - call
        assert _outcome(jitted, net, y) == _outcome(program, net, y), f"call {call}"
