"""Channels-last activations in graphs with 2-D convolutions (lower/graph.py
`prefers_channels_last`, the `convolution` lowering in lower/extern.py): results and output
strides match eager whatever layout the graph keeps inside."""
import pytest
import torch

import inductor
from tests.inductor.conftest import compile_function

functional = torch.nn.functional


class SmallNet(torch.nn.Module):
    """Convolution, BatchNorm, ReLU, pooling, a residual add, a depthwise convolution and a
    linear head: the ops a CNN runs between its convolutions."""

    def __init__(self):
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 8, 3, stride=2, padding=1, bias=False)
        self.norm = torch.nn.BatchNorm2d(8)
        self.depthwise = torch.nn.Conv2d(8, 8, 3, padding=2, dilation=2, groups=8)
        self.pointwise = torch.nn.Conv2d(8, 8, 1)
        self.head = torch.nn.Linear(8, 5)

    def forward(self, x):
        x = functional.relu(self.norm(self.stem(x)))
        x = functional.max_pool2d(x, 3, 2, 1)
        y = self.pointwise(functional.hardswish(self.depthwise(x)))
        x = functional.relu(x + y)
        x = functional.adaptive_avg_pool2d(x, 1).flatten(1)
        return self.head(x)


def _small_net():
    torch.manual_seed(0)
    model = SmallNet().eval()
    with torch.no_grad():
        model.norm.running_mean.uniform_(-0.5, 0.5)
        model.norm.running_var.uniform_(0.5, 2.0)
    return model


def _check_layouts(function, *inputs, channels_last=True):
    """Compile `function`, compare values and strides of every output with eager."""
    compiled = compile_function(function, *inputs)
    assert compiled.report.channels_last == channels_last
    expected = function(*inputs)
    actual = compiled(*inputs)
    expected = expected if isinstance(expected, tuple) else (expected,)
    actual = actual if isinstance(actual, tuple) else (actual,)
    for mine, theirs in zip(actual, expected):
        torch.testing.assert_close(mine, theirs, atol=1e-4, rtol=1e-4)
        assert mine.stride() == theirs.stride()
    return compiled


def test_small_cnn_matches_eager_in_channels_last():
    model = _small_net()
    x = torch.randn(4, 3, 32, 32)
    with torch.no_grad():
        compiled = _check_layouts(model, x)
    assert "channels-last" in compiled.report.summary()
    assert compiled.report.library_calls.get("aten.convolution") == 3


def test_switching_channels_last_off_gives_the_same_values(monkeypatch):
    model = _small_net()
    x = torch.randn(4, 3, 32, 32)
    monkeypatch.setattr(inductor.config, "channels_last", False)
    with torch.no_grad():
        _check_layouts(model, x, channels_last=False)


@pytest.mark.parametrize("returned", ["convolution", "relu", "both", "pooled"])
def test_four_dimensional_outputs_keep_eager_strides(returned):
    weight = torch.randn(6, 4, 3, 3)
    bias = torch.randn(6)

    def function(x):
        y = functional.conv2d(x, weight, bias, padding=1)
        z = torch.relu(y) * 2
        if returned == "convolution":
            return y
        if returned == "relu":
            return z
        if returned == "pooled":
            return functional.max_pool2d(z, 2)
        return y, z

    _check_layouts(function, torch.randn(2, 4, 10, 10))


def test_channels_last_input_and_output_as_in_eager():
    weight = torch.randn(6, 4, 3, 3)

    def function(x):
        return torch.relu(functional.conv2d(x, weight)) + 1

    x = torch.randn(2, 4, 10, 10).to(memory_format=torch.channels_last)
    _check_layouts(function, x)


def test_strided_and_sliced_inputs():
    weight = torch.randn(6, 4, 3, 3)

    def function(x):
        return functional.conv2d(x[:, :, 1:, ::2].sigmoid(), weight, stride=2)

    _check_layouts(function, torch.randn(2, 4, 13, 20).transpose(2, 3))


def test_transposed_convolution():
    weight = torch.randn(4, 3, 3, 3)

    def function(x):
        y = functional.conv_transpose2d(torch.relu(x), weight, stride=2, padding=1,
                                        output_padding=1)
        return y.tanh()

    _check_layouts(function, torch.randn(2, 4, 9, 9))


def test_weight_heavy_graph_stays_contiguous():
    """Large weights, small activations: copying the weight to channels-last per call would
    cost more than the convolution gains, and no other convolution wants channels-last."""
    weight = torch.randn(64, 64, 3, 3)

    def function(x):
        return torch.relu(functional.conv2d(x, weight, padding=1))

    _check_layouts(function, torch.randn(1, 64, 4, 4), channels_last=False)


def test_one_and_three_dimensional_convolutions_are_untouched():
    weight1 = torch.randn(4, 3, 3)
    weight3 = torch.randn(4, 3, 1, 3, 3)

    def function(x, v):
        return torch.relu(functional.conv1d(x, weight1)), functional.conv3d(v, weight3)

    _check_layouts(function, torch.randn(2, 3, 20), torch.randn(2, 3, 4, 8, 8),
                   channels_last=False)


def test_double_precision_and_bfloat16():
    for dtype, tolerance in ((torch.float64, 1e-9), (torch.bfloat16, 2e-2)):
        weight = torch.randn(6, 4, 3, 3, dtype=dtype)

        def function(x):
            return functional.gelu(functional.conv2d(x, weight, padding=1)).sum(1)

        x = torch.randn(2, 4, 10, 10, dtype=dtype)
        compiled = compile_function(function, x)
        assert compiled.report.channels_last
        torch.testing.assert_close(compiled(x), function(x), atol=tolerance, rtol=tolerance)


def test_triton_backend_on_cpu_keeps_eager_layouts(monkeypatch):
    """Graphs through the Triton generator (the GPU path) do not switch layouts."""
    pytest.importorskip("triton")
    monkeypatch.setattr(inductor.config, "cpu_backend", "triton")
    weight = torch.randn(6, 4, 3, 3)

    def function(x):
        return torch.relu(functional.conv2d(x, weight, padding=1)) + 1

    x = torch.randn(2, 4, 8, 8)
    compiled = compile_function(function, x)
    assert not compiled.report.channels_last
    torch.testing.assert_close(compiled(x), function(x), atol=1e-4, rtol=1e-4)


def test_weight_heavy_convolution_in_a_channels_last_graph_runs_contiguous():
    """Per convolution: an activation-heavy first convolution runs channels-last, a
    weight-heavy second one (resnet18's last stage) gets a contiguous input and the weight as
    it is, and the values and output strides stay eager's."""
    first = torch.randn(32, 3, 3, 3)
    second = torch.randn(128, 32, 3, 3)

    def function(x):
        y = torch.relu(functional.conv2d(x, first, padding=1))
        y = functional.max_pool2d(y, 4)
        return torch.relu(functional.conv2d(y, second, padding=1)) + 1

    compiled = _check_layouts(function, torch.randn(2, 3, 32, 32))
    source = compiled.report.source
    assert "(27, 1, 9, 3)" in source            # the first weight copied channels-last
    assert "(288, 1, 96, 32)" not in source     # the second read in place, contiguous


def test_concatenation_and_pooling_of_channels_last_inputs_stay_channels_last():
    """SqueezeNet's fire module: two expanding convolutions concatenated along the channels,
    then max pooling. The concatenation's inputs have another size than its result; it
    still comes out channels-last, so the pooling reads along contiguous channels (stored
    NCHW, the pooling read with a stride of H * W: 1.68 of SqueezeNet's 13 ms per call)."""
    squeeze, expand1, expand3 = (torch.randn(8, 3, 3, 3), torch.randn(8, 8, 1, 1),
                                 torch.randn(8, 8, 3, 3))
    after = torch.randn(4, 16, 1, 1)

    def function(x):
        x = torch.relu(functional.conv2d(x, squeeze, stride=2, padding=1))
        x = torch.cat([torch.relu(functional.conv2d(x, expand1)),
                       torch.relu(functional.conv2d(x, expand3, padding=1))], 1)
        x = functional.max_pool2d(x, 3, 2, ceil_mode=True)
        return functional.conv2d(x, after)

    compiled = _check_layouts(function, torch.randn(2, 3, 32, 32))
    source = compiled.report.source
    assert "(2, 16, 16, 16), (4096, 1, 256, 16)" in source    # the concatenation, NHWC
    assert "(4096, 256, 16, 1)" not in source


def test_weight_heavy_one_by_one_convolution_in_a_channels_last_graph_stays_channels_last():
    """MobileNetV2's last stage: a 1x1 convolution with more weight than activation elements
    after a channels-last one. A 1x1 weight is channels-last as it is (nothing to copy), so
    its input stays channels-last: no transposing store to NCHW before it (there was one
    before: the elements rule made it contiguous). Values and output strides stay eager's."""
    first = torch.randn(32, 3, 3, 3)
    depthwise = torch.randn(32, 1, 3, 3)
    second = torch.randn(256, 32, 1, 1)

    def function(x):
        y = torch.relu(functional.conv2d(x, first, padding=1))
        y = functional.max_pool2d(y, 16)
        y = functional.hardtanh(functional.conv2d(y, depthwise, padding=1, groups=32), 0, 6)
        return torch.relu(functional.conv2d(y, second)) + 1

    compiled = _check_layouts(function, torch.randn(1, 3, 32, 32))
    source = compiled.report.source
    # the 1x1 convolution (256 x 32 weight, 1x32x2x2 input) comes out channels-last;
    # run contiguous it gave (1024, 4, 2, 1)
    assert "(1, 256, 2, 2), (1024, 1, 512, 256)" in source
