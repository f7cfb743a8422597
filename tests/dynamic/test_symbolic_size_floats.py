"""Python floats computed from symbolic sizes compile once (inductor/lower/size_floats.py).

BatchNorm's training backward (torch's decomposition) multiplies by `1 / n`, the unbiased
running variance by `n / (n - 1)`, with `n` a product of sizes: a SymFloat, which compiled
one static variant per size ("a size computed as a SymFloat"), so a training step over
varying batch sizes compiled once per batch size (found under JIT_DYNAMIC_BY_DEFAULT=1 by
tests/training/test_modules.py: batchnorm1d, conv_bn_relu_train, residual_block,
small_cnn). The kernel now computes that float from the size symbols with Python's float64
operations, so each call's values are bitwise those of a static compile for its sizes.
tests/dynamic/conftest.py fails a test on any fallback, `per_size` included: these compile
once. Both code generators (C++; Triton interpreted on the CPU).
"""
import pytest
import torch
from torch import nn

import dynamo
import inductor

SHAPES_1D = [(5, 6), (7, 6), (9, 6), (2, 6)]
SHAPES_2D = [(2, 3, 8, 8), (3, 3, 8, 8), (4, 3, 6, 6), (5, 3, 7, 9)]


def _model(kind: str) -> nn.Module:
    torch.manual_seed(0)
    if kind == "1d":
        return nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8))
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU())


def _step(model: nn.Module, x: torch.Tensor) -> torch.Tensor:
    out = model(x)
    (out * out).sum().backward()
    return out


def _state(model: nn.Module) -> list:
    return [value.detach().clone() for value in model.state_dict().values()] + \
        [parameter.grad.clone() for parameter in model.parameters()]


def _bitwise(actual: list, expected: list, what: str) -> None:
    for index, (got, want) in enumerate(zip(actual, expected)):
        assert got.dtype == want.dtype and got.shape == want.shape, (what, index)
        assert torch.equal(got, want), f"{what}: value {index} differs"


@pytest.mark.parametrize("code_generator", ["cpp", "triton"])
@pytest.mark.parametrize("kind", ["1d", "2d"])
def test_batch_norm_training_step_compiles_once_and_matches_static(kind, code_generator,
                                                                    monkeypatch):
    monkeypatch.setattr(inductor.config, "cpu_backend", code_generator)
    shapes = SHAPES_1D if kind == "1d" else SHAPES_2D
    symbolic, static, eager = _model(kind), _model(kind), _model(kind)
    step_symbolic = dynamo.jit(_step, backend="inductor", dynamic=True)
    step_static = dynamo.jit(_step, backend="inductor", dynamic=False)
    for index, shape in enumerate(shapes):
        x = torch.randn(shape, generator=torch.Generator().manual_seed(index))
        for model in (symbolic, static, eager):
            model.zero_grad(set_to_none=True)
        out_symbolic = step_symbolic(symbolic, x)
        out_static = step_static(static, x)
        out_eager = _step(eager, x)
        if kind == "1d":
            # the same decomposition, the floats of sizes computed per call: bitwise the
            # static compile's (with a convolution, the symbolic and static pipelines reduce
            # its gradients in other orders: both within rounding of eager's, below)
            _bitwise([out_symbolic, *_state(symbolic)], [out_static, *_state(static)],
                     str(shape))
        # eager's own kernels: up to rounding
        for got, want in zip([out_symbolic, *_state(symbolic)], [out_eager, *_state(eager)]):
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("code_generator", ["cpp", "triton"])
def test_float_of_sizes_times_a_tensor_bitwise_eager(code_generator, monkeypatch):
    monkeypatch.setattr(inductor.config, "cpu_backend", code_generator)

    def fn(x):
        n = x.shape[0] * x.shape[1]
        return x * (n / (n - 1)), x * (1 / n)

    jitted = dynamo.jit(fn, backend="inductor", dynamic=True)
    for rows, columns in [(3, 5), (7, 11), (2, 13), (97, 3)]:
        x = torch.randn(rows, columns, generator=torch.Generator().manual_seed(rows))
        for got, want in zip(jitted(x), fn(x)):
            assert got.dtype == want.dtype and torch.equal(got, want), (rows, columns)


@pytest.mark.expect_fallback("per_size", reason="a float of sizes added to a tensor: `add` is "
                             "not among size_floats.CONSUMERS (a static variant per size)")
def test_float_of_sizes_in_another_op_compiles_per_size_with_eager_values():
    def fn(x):
        n = x.shape[0]
        return x + n / 3, x * (1 / n)

    jitted = dynamo.jit(fn, backend="inductor", dynamic=True)
    for rows in (4, 7, 10):
        x = torch.randn(rows, 3, generator=torch.Generator().manual_seed(rows))
        for got, want in zip(jitted(x), fn(x)):
            assert got.dtype == want.dtype and torch.equal(got, want), rows
