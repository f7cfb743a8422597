"""Programs called under `torch.inference_mode()`, and inference tensors passed in outside it,
against eager, on both backends (values, dtypes, `is_inference`, `requires_grad`, mutated
arguments, exception type and message), calls alternating between the modes.

Found by the lead (stop 45): a torchvision ResNet-18 jitted with inductor and called under
`inference_mode` warned at every frame (the trace read `_version` of the eager run's outputs,
inference tensors have none) and then raised at run time inside a compiled submodule (the
wrapper put a library product's version counter back to 0: `_unsafe_set_version_counter` on an
inference tensor). No test called inductor under inference mode with a module or a library
call (conv, matmul) before.
"""
from __future__ import annotations

import warnings

import pytest
import torch
import torchvision

import dynamo
import inductor

BACKENDS = ("eager", "inductor")


class ConvBlock(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(4)
        self.fc = torch.nn.Linear(4, 5)

    def forward(self, x):
        y = torch.relu(self.bn(self.conv(x))) + x.mean(1, keepdim=True)
        return self.fc(y.mean((2, 3))), y[:, 1:]


def residual() -> torch.nn.Module:
    """Two of ResNet's basic blocks (32 channels): a convolution's product returned from the
    memory of a dead buffer (the wrapper's `out=`), whose version counter it puts back."""
    block = torchvision.models.resnet.BasicBlock
    return torch.nn.Sequential(block(32, 32), block(32, 32))


def pointwise(x, y):
    return (x.sin() + y).relu() * 2


def library_calls(x, y):
    z = x @ y.t()           # a library product (the wrapper's `out=` buffer)
    return torch.cat([z, z.exp()], 1), z.sum()


def views(x, y):
    return x[1:], x.t(), (x + y)[:, :2]


def writes_input(x, y):
    x.add_(y)
    return x * 3


def reductions(x, y):
    return x.softmax(-1), (x * y).amax(0), x.var(1)


def make_inputs(kind: str):
    gen = torch.Generator().manual_seed(0)
    if kind == "conv":
        return (torch.randn(2, 3, 6, 6, generator=gen),)
    if kind == "residual":
        return (torch.randn(1, 32, 8, 8, generator=gen),)
    return torch.randn(4, 4, generator=gen), torch.randn(4, 4, generator=gen)


PROGRAMS = {"pointwise": pointwise, "library_calls": library_calls, "views": views,
            "writes_input": writes_input, "reductions": reductions, "conv": None,
            "residual": None}

# (inputs made in inference mode, call in inference mode), call after call
SCHEDULES = {
    "inside": [(True, True)] * 3,
    "alternating": [(False, False), (True, True), (False, False), (True, True)],
    "inference_inputs_outside": [(True, False), (True, False), (False, False), (True, True)],
    "normal_inputs_inside": [(False, True), (False, True), (True, True), (False, False)],
}


def _run(fn, inputs_inside: bool, call_inside: bool, kind: str):
    with torch.inference_mode(inputs_inside):
        inputs = make_inputs(kind)
    with torch.inference_mode(call_inside):
        try:
            return inputs, fn(*inputs), None
        except Exception as error:  # noqa: BLE001  (compared with eager's)
            return inputs, None, error


def _flat(value):
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in _flat(item)]
    return [value]


def _same(expected, actual, where: str):
    for want, got in zip(_flat(expected), _flat(actual), strict=True):
        if not isinstance(want, torch.Tensor):
            assert want == got, where
            continue
        assert got.dtype == want.dtype and got.shape == want.shape, where
        assert got.is_inference() == want.is_inference(), f"{where}: is_inference"
        assert got.requires_grad == want.requires_grad, f"{where}: requires_grad"
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5, msg=where)


@pytest.mark.parametrize("schedule", sorted(SCHEDULES))
@pytest.mark.parametrize("name", sorted(PROGRAMS))
@pytest.mark.parametrize("backend", BACKENDS)
def test_inference_mode_as_eager(backend, name, schedule, monkeypatch):
    monkeypatch.setattr(inductor.config, "fallback_on_error", False)
    if name in ("conv", "residual"):
        torch.manual_seed(1)
        fn = (ConvBlock if name == "conv" else residual)().eval()
    else:
        fn = PROGRAMS[name]
    jitted = dynamo.jit(fn, backend=backend)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)   # no "internal error ... eagerly"
        for call, (inputs_inside, call_inside) in enumerate(SCHEDULES[schedule]):
            where = f"{name}, call {call} (inputs in inference mode {inputs_inside}, " \
                    f"called in inference mode {call_inside})"
            kind = name if name in ("conv", "residual") else "matrix"
            eager_inputs, expected, expected_error = _run(fn, inputs_inside, call_inside, kind)
            jit_inputs, actual, actual_error = _run(jitted, inputs_inside, call_inside, kind)
            if expected_error is not None or actual_error is not None:
                assert type(actual_error) is type(expected_error), (where, actual_error)
                assert str(actual_error) == str(expected_error), where
                continue
            _same(expected, actual, where)
            _same(eager_inputs, jit_inputs, where + ", arguments after the call")


@pytest.mark.parametrize("name", ["pointwise", "writes_input", "views", "library_calls"])
def test_symbolic_sizes_under_inference_mode(name, monkeypatch):
    """The symbolic trace read `_version` of inference inputs (program fuzzer seed 62017,
    inductor, a call under inference mode after calls in other modes)."""
    monkeypatch.setattr(inductor.config, "fallback_on_error", False)
    fn = PROGRAMS[name]
    jitted = dynamo.jit(fn, backend="inductor", dynamic=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for rows, inputs_inside in ((4, True), (6, True), (5, False), (7, False)):
            gen = torch.Generator().manual_seed(rows)
            with torch.inference_mode(inputs_inside):
                made = [torch.randn(rows, rows, generator=gen) for _ in range(2)]
                copies = [value.clone() for value in made]
            with torch.inference_mode():
                expected, actual = fn(*copies), jitted(*made)
            _same(expected, actual, f"{name}, {rows} rows")
            _same(copies, made, f"{name}, {rows} rows, arguments after the call")
