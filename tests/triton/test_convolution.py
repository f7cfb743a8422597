"""Convolutions the Triton backend lowers without the convolution library
(`inductor/lower/convolution.py`): 1x1 convolutions as matrix products, depthwise ones as
generated kernels that the BatchNorm and activation after them fuse into. Each compared with
eager, and the library calls counted."""
import pytest
import torch
import torch.nn.functional as F

from tests.triton.conftest import DEVICES, check_same, kernel_source


def _tolerances(dtype):
    return {} if dtype == torch.float32 else {"atol": 2e-2, "rtol": 2e-2}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape, bias, product", [
    ((2, 8, 5, 6), False, "aten.bmm"),     # a batch of images: the weight broadcast over it
    ((2, 8, 5, 6), True, "aten.bmm"),
    ((1, 8, 5, 6), True, "aten.mm"),       # one image: weight @ channels-by-pixels
    ((3, 8, 1, 1), True, "aten.mm"),       # squeeze-and-excitation: one pixel per image
])
def test_pointwise_convolution_is_a_matrix_product(device, dtype, shape, bias, product):
    weight = torch.randn(16, 8, 1, 1, device=device, dtype=dtype)
    bias_value = torch.randn(16, device=device, dtype=dtype)

    def function(x, weight, bias_value):
        return torch.relu(F.conv2d(x, weight, bias_value if bias else None)) * 2

    x = torch.randn(shape, device=device, dtype=dtype)
    compiled = check_same(function, x, weight, bias_value, **_tolerances(dtype))
    calls = compiled.report.library_calls
    if device == "cuda" and dtype == torch.float32 and \
            torch.backends.cudnn.allow_tf32 != torch.backends.cuda.matmul.allow_tf32:
        # eager's cuDNN may round float32 to TF32 where cuBLAS does not: kept for precision
        assert calls == {"aten.convolution": 1}, calls
        return
    assert calls.get(product) == 1 and "aten.convolution" not in calls, calls
    assert compiled.report.kernel_count == 1       # bias, relu and scale in one kernel


@pytest.mark.parametrize("device", DEVICES)
def test_strided_or_padded_pointwise_convolution_stays_a_library_call(device):
    def function(x, weight):
        return F.conv2d(x, weight, stride=2) + F.conv2d(x, weight, padding=1).sum()

    x, weight = torch.randn(2, 4, 6, 6, device=device), torch.randn(8, 4, 1, 1, device=device)
    compiled = check_same(function, x, weight)
    assert compiled.report.library_calls.get("aten.convolution") == 2


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("channels, multiplier, kernel, stride, padding, dilation, bias", [
    (8, 1, 3, 1, 1, 1, False),      # MobileNet's 3x3
    (8, 1, 5, 2, 2, 1, True),       # 5x5, stride 2: masks at both borders
    (4, 2, 3, 1, 2, 2, True),       # two outputs per channel, dilated
    (4, 1, 3, 1, 0, 1, False),      # no padding: no masks at all
    (3, 1, 7, 1, 3, 1, True),       # ConvNeXt's 7x7
])
def test_depthwise_convolution_fuses_with_scale_shift_and_activation(
        device, dtype, channels, multiplier, kernel, stride, padding, dilation, bias):
    outputs = channels * multiplier
    weight = torch.randn(outputs, 1, kernel, kernel, device=device, dtype=dtype)
    bias_value = torch.randn(outputs, device=device, dtype=dtype)
    # inference BatchNorm as the folded per-channel scale and shift it lowers to
    scale, shift = (torch.randn(outputs, 1, 1, device=device, dtype=dtype),
                    torch.randn(outputs, 1, 1, device=device, dtype=dtype))

    def function(x, weight, bias_value, scale, shift):
        y = F.conv2d(x, weight, bias_value if bias else None, stride, padding, dilation,
                     groups=channels)
        return F.hardswish(y * scale + shift)

    x = torch.randn(2, channels, 9, 11, device=device, dtype=dtype)
    compiled = check_same(function, x, weight, bias_value, scale, shift, **_tolerances(dtype))
    assert "aten.convolution" not in compiled.report.library_calls
    assert compiled.report.kernel_count == 1


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kernel, kernels", [(5, 1), (7, 2)])
def test_large_depthwise_convolution_is_not_fused_into_a_channel_reduction(
        device, kernel, kernels):
    """ConvNeXt's block: a 7x7 depthwise convolution, then LayerNorm over the channels. The
    7x7 taps are computed in a kernel of their own (read along the rows), not inside the
    reduction's channel-by-channel loop (`MAX_FUSED_TAPS`); a 5x5 keeps fusing."""
    channels = 8
    weight = torch.randn(channels, 1, kernel, kernel, device=device)
    norm_weight, norm_bias = torch.randn(channels, device=device), torch.randn(channels,
                                                                                device=device)

    def function(x, weight, norm_weight, norm_bias):
        y = F.conv2d(x, weight, None, 1, kernel // 2, 1, groups=channels).permute(0, 2, 3, 1)
        return F.layer_norm(y, (channels,), norm_weight, norm_bias) * 2

    x = torch.randn(2, channels, 9, 11, device=device)
    compiled = check_same(function, x, weight, norm_weight, norm_bias, atol=1e-5, rtol=1e-5)
    assert "aten.convolution" not in compiled.report.library_calls
    assert compiled.report.kernel_count == kernels


@pytest.mark.parametrize("device", DEVICES)
def test_switched_off_convolutions_stay_library_calls(device, settings):
    settings.convolutions_without_library = False

    def function(x, pointwise, depthwise):
        return F.conv2d(F.conv2d(x, pointwise), depthwise, padding=1, groups=8)

    x = torch.randn(2, 4, 6, 6, device=device)
    compiled = check_same(function, x, torch.randn(8, 4, 1, 1, device=device),
                          torch.randn(8, 1, 3, 3, device=device))
    assert compiled.report.library_calls.get("aten.convolution") == 2


@pytest.mark.parametrize("device", DEVICES)
def test_depthwise_convolution_reads_a_computed_input_from_memory(device):
    """The previous layer's scale, shift and ReLU run once per element, not once per tap."""
    def function(x, scale, weight):
        return F.conv2d(torch.relu(x * scale), weight, padding=1, groups=4)

    x, scale = torch.randn(2, 4, 6, 6, device=device), torch.randn(4, 1, 1, device=device)
    compiled = check_same(function, x, scale, torch.randn(4, 1, 3, 3, device=device))
    assert compiled.report.kernel_count == 2
    source = kernel_source(compiled)
    assert source.count("< 0.0") == 1       # the ReLU, in the first kernel only


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_channels_last_graphs_keep_the_library_for_pointwise_convolutions(settings):
    settings.gpu_channels_last = True

    def function(x, pointwise, depthwise):
        return F.conv2d(F.conv2d(x, pointwise).relu(), depthwise, padding=1, groups=8)

    x = torch.randn(2, 4, 6, 6, device="cuda", dtype=torch.bfloat16)
    compiled = check_same(function, x,
                          torch.randn(8, 4, 1, 1, device="cuda", dtype=torch.bfloat16),
                          torch.randn(8, 1, 3, 3, device="cuda", dtype=torch.bfloat16),
                          atol=2e-2, rtol=2e-2)
    assert compiled.report.library_calls == {"aten.convolution": 1}
