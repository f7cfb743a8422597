"""Writes into inference tensors were lost (program fuzzer, seeds 1 and 32 once calls ran under
`torch.inference_mode`, stop 45).

The tracer told a write from a read by the version counters of its fake arguments; a tensor
made under inference mode has none, so `x[x > 0] = 0.5` on an inference input and
`t[:2] = ...` on a tensor made in the call both read as no write and were dropped as dead code:
the jitted call left `x` unchanged, and `.item()` after the write read the old values.
dynamo/trace/write_counts.py counts such writes per storage. Each case runs eagerly and jitted
on both backends, with inference-tensor arguments, under inference mode, and both.
"""
from __future__ import annotations

import pytest
import torch

import dynamo


def setitem_mask(x, y):          # seed 32, minimized
    x[x > 0] = 0.5


def write_then_item(x, y):       # seed 1, minimized: a tensor made in the call, written, read
    t = torch.full((4,), 0.5)
    t[:2] = torch.ones(2)
    return t.abs().sum().item(), t


def write_through_view(x, y):
    x[1:].add_(y[1:])
    return x.sum()


def write_out(x, y):
    torch.mul(y, 2, out=x)
    return x + 1


def write_aliased(x, y):          # called with x and y one tensor, then two
    x.mul_(2)
    return y + 1


def index_copy(x, y):
    x.index_copy_(0, torch.tensor([0, 2]), y[:2])
    return x


CASES = [setitem_mask, write_then_item, write_through_view, write_out, write_aliased,
         index_copy]
MODES = {"inference arguments": (True, True), "inference mode, ordinary arguments": (False, True),
         "inference arguments outside inference mode": (True, False)}


def _arguments(inference: bool, aliased: bool):
    with torch.inference_mode(inference):
        x = torch.tensor([[1.0, -1.0], [2.0, -3.0], [0.5, 4.0]])
        y = x if aliased else torch.tensor([[0.25, 2.0], [-1.0, 1.0], [3.0, -0.5]])
    return x, y


def _call(fn, inference_arguments: bool, inference_call: bool, aliased: bool):
    x, y = _arguments(inference_arguments, aliased)
    with torch.inference_mode(inference_call):
        try:
            return fn(x, y), x, y, None
        except RuntimeError as error:   # writes into inference tensors outside the mode
            return None, x, y, str(error)


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("fn", CASES, ids=lambda fn: fn.__name__)
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_writes_into_inference_tensors_as_eager(backend, fn, mode):
    inference_arguments, inference_call = MODES[mode]
    jitted = dynamo.jit(fn, backend=backend)
    for aliased in (True, False, True):
        expected = _call(fn, inference_arguments, inference_call, aliased)
        actual = _call(jitted, inference_arguments, inference_call, aliased)
        assert actual[3] == expected[3], (aliased, actual[3], expected[3])
        for got, want in zip(actual[:3], expected[:3]):
            if isinstance(want, tuple):
                assert got[0] == want[0]
                got, want = got[1], want[1]
            if isinstance(want, torch.Tensor):
                assert torch.equal(got, want), (aliased, got, want)
                assert got.is_inference() == want.is_inference()
            else:
                assert got == want
