"""Max pooling in C++ kernels reads window positions clamped into the input instead of
masking padding (lower/pooling.py `_clamp_fits`), and the NaN-propagating max is one select
(prelude.h): together they let GCC vectorise the loop over NHWC channels. Results match
eager, NaN and infinities included, for padded, ceil-mode and dilated windows."""
import pytest
import torch

from tests.inductor.conftest import check_same

functional = torch.nn.functional


def _input(channels_last: bool):
    torch.manual_seed(0)
    x = torch.randn(2, 16, 15, 13)
    x[0, 3, 0, 0] = float("nan")
    x[1, 5, 14, 12] = float("nan")
    x[0, 7, 7, 0] = float("inf")
    x[1, 2, :, :] = float("-inf")
    return x.to(memory_format=torch.channels_last) if channels_last else x


@pytest.mark.parametrize("channels_last", [True, False])
@pytest.mark.parametrize("window", [(3, 2, 1, 1, False), (3, 2, 1, 1, True), (2, 2, 0, 1, True),
                                    (3, 1, 1, 1, False), (3, 2, 1, 2, False)],
                         ids=["3s2p1", "3s2p1_ceil", "2s2_ceil", "3s1p1", "3s2p1_dilated"])
def test_max_pooling_matches_eager_with_special_values(channels_last, window):
    kernel, stride, padding, dilation, ceil_mode = window

    def function(x):
        return functional.max_pool2d(torch.relu(x) - x * 0.5, kernel, stride, padding,
                                     dilation, ceil_mode)

    compiled = check_same(function, _input(channels_last))
    kernels = compiled.report.source.split("static void")[1:]
    pooled = [text for text in kernels if "jit_max" in text]
    assert pooled
    if dilation == 1:
        assert all("? p0[" not in text and "? p1[" not in text for text in pooled)
        # clamped positions are in range by construction: no bounds check per read (it cost
        # ShuffleNet's 3x3 pooling 0.71 -> 0.06 ms at batch 1)
        assert all("jit_wrap_index" not in text for text in pooled)
    else:
        assert any("? p" in text for text in pooled)   # masked reads stay for dilation


def test_maximum_and_minimum_keep_nan_and_the_first_of_ties():
    def function(x, y):
        return torch.maximum(x, y), torch.minimum(x, y), x.amax(-1), y.amin(-1)

    x = torch.tensor([[1.0, float("nan"), -0.0, 2.0, float("nan"), 3.0] * 8])
    y = torch.tensor([[2.0, 1.0, 0.0, float("nan"), float("nan"), -1.0] * 8])
    compiled = check_same(function, x, y)
    maximum, minimum, _, _ = compiled(x, y)
    assert torch.signbit(maximum[0, 2]) and torch.signbit(minimum[0, 2])   # -0.0 kept
