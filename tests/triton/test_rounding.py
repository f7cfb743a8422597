"""`config.eager_rounding`: bf16 and fp16 intermediates rounded after every op inside a kernel
(on, eager's numerics) or kept in float32 until stored or cast explicitly (off, torch.compile's).
Checked through Triton's interpreter (whose own float-to-bf16 conversion truncates, so stores
of float32 values must round first) and the C++ backend, and on the GPU when present."""
import math

import pytest
import torch

from tests.triton.conftest import DEVICES, compile_function, kernel_source


def exact_on_cpu(device: str) -> dict:
    """Tolerances against eager: none through the interpreter (same float32 operations); one
    bf16 ulp on GPUs (libdevice's tanh and contracted multiply-adds against eager's kernels)."""
    return {"atol": 0, "rtol": 0} if device == "cpu" else {"atol": 1e-6, "rtol": 2 ** -7}


def gelu_new(x, bias):
    x = x + bias
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) *
                                       (x + 0.044715 * torch.pow(x, 3.0))))


def cast_inside(x):
    """An explicit cast in the middle of a chain: it rounds in both settings."""
    return (x.float() * 3.0 + 0.1).to(torch.bfloat16).float() * 7.0


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_float32_intermediates_round_once_at_the_store(settings, device, dtype):
    x = torch.randn(64, 96, device=device, dtype=dtype) * 3
    bias = torch.randn(96, device=device, dtype=dtype)
    reference = gelu_new(x.double(), bias.double())
    eager = gelu_new(x, bias)
    settings.update(eager_rounding=False)
    compiled = compile_function(gelu_new, x, bias)
    result = compiled(x, bias)
    result = result[0] if isinstance(result, (list, tuple)) else result
    # one rounding: within an ulp of the float64 reference (float32 cancellation aside), and
    # closer to it in total than eager, which rounds after each op
    torch.testing.assert_close(result.double(), reference, rtol=torch.finfo(dtype).eps,
                               atol=1e-4)
    assert (result.double() - reference).abs().sum() < (eager.double() - reference).abs().sum()
    source = kernel_source(compiled)
    assert source.count("jit_round") <= 2, source    # the store's only (interpreted), no chain


@pytest.mark.parametrize("device", DEVICES)
def test_eager_rounding_rounds_after_each_op(device):
    x = torch.randn(64, 96, device=device, dtype=torch.bfloat16)
    bias = torch.randn(96, device=device, dtype=torch.bfloat16)
    compiled = compile_function(gelu_new, x, bias)
    assert kernel_source(compiled).count("jit_round") >= 8
    result = compiled(x, bias)
    result = result[0] if isinstance(result, (list, tuple)) else result
    torch.testing.assert_close(result, gelu_new(x, bias), **exact_on_cpu(device))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("rounding", [True, False])
def test_explicit_casts_round_in_both_settings(settings, device, rounding):
    settings.update(eager_rounding=rounding)
    x = torch.randn(1000, device=device, dtype=torch.bfloat16)
    compiled = compile_function(cast_inside, x)
    result = compiled(x)
    result = result[0] if isinstance(result, (list, tuple)) else result
    torch.testing.assert_close(result, cast_inside(x), **exact_on_cpu(device))


@pytest.mark.parametrize("rounding", [True, False])
def test_cpp_backend_follows_the_setting(settings, rounding):
    settings.update(eager_rounding=rounding, cpu_backend="cpp")
    x = torch.randn(64, 96, dtype=torch.bfloat16) * 3
    bias = torch.randn(96, dtype=torch.bfloat16)
    compiled = compile_function(gelu_new, x, bias)
    result = compiled(x, bias)
    result = result[0] if isinstance(result, (list, tuple)) else result
    roundings = compiled.report.source.count("bf16_round(")
    if rounding:
        torch.testing.assert_close(result, gelu_new(x, bias), atol=0, rtol=0)
        assert roundings >= 8
    else:
        reference = gelu_new(x.double(), bias.double())
        torch.testing.assert_close(result.double(), reference, rtol=2 ** -8, atol=1e-4)
        assert roundings <= 1   # (the prelude's definition)
