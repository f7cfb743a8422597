"""Reductions over a strided dimension vectorised across the contiguous one ("outer lanes",
inductor/codegen/cpp/kernel.py) when the kernel has several reduction stages, the later ones
reading what the earlier ones computed: a two-pass variance, a training BatchNorm's
statistics over channels-last activations.

Was: only a kernel with one reduction stage ran in outer lanes; with two (the BatchNorm's
mean, then the squared deviations from it) each channel walked the whole activation with a
stride of the channel count, twice (0.3-0.5 ms per BatchNorm of the whole-step benchmark's
CNN, against 0.05-0.1 ms now). The results are the same sums folded in another order
(compared with eager; BatchNorm's statistics are summed in float64)."""
import copy

import pytest
import torch

import dynamo
from tests.inductor.conftest import check_same


def two_pass_variance(x):
    mean = x.mean(0)
    return ((x - mean) ** 2).mean(0), mean


def three_passes(x):
    centred = x - x.mean(0)
    scale = centred.abs().amax(0)
    return (centred / scale).square().sum(0), scale


@pytest.mark.parametrize("columns", [16, 20, 64, 70, 200])
@pytest.mark.parametrize("function", [two_pass_variance, three_passes])
def test_stages_in_outer_lanes_match_eager(function, columns, fixed_machine_settings):
    torch.manual_seed(columns)
    x = torch.randn(301, columns) * 3 + 1
    compiled = check_same(function, x, atol=1e-5, rtol=1e-5)
    source = compiled.report.source
    assert compiled.kernel_count == 1
    # the earlier stage's per-column values carried to the later pass in lane arrays
    assert "_lane[" in source, source
    # no per-column walk down the rows: every fold over the rows is across columns
    assert "y0_block" not in source, source


def _conv_bn(channels: int) -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, channels, 3, padding=1), torch.nn.BatchNorm2d(channels),
        torch.nn.ReLU(), torch.nn.Conv2d(channels, channels, 3, padding=1),
        torch.nn.BatchNorm2d(channels), torch.nn.ReLU())


def _step(model, x):
    out = model(x)
    loss = out.square().mean()
    loss.backward()
    return out, loss


@pytest.mark.parametrize("channels", [16, 20])
def test_training_batch_norm_statistics_match_eager(channels):
    torch.manual_seed(channels)
    model = _conv_bn(channels)
    jitted_model = copy.deepcopy(model)
    jitted = dynamo.jit(_step, backend="inductor")
    for call in range(3):
        x = torch.randn(4, 3, 12, 12) * (call + 1)
        expected = _step(model, x)
        actual = jitted(jitted_model, x)
        torch.testing.assert_close(actual, expected, atol=2e-5, rtol=1e-5)
        for name, value in model.state_dict().items():
            torch.testing.assert_close(jitted_model.state_dict()[name], value, atol=1e-6,
                                       rtol=1e-5, msg=name)
        for (name, parameter), other in zip(model.named_parameters(),
                                            jitted_model.parameters()):
            torch.testing.assert_close(other.grad, parameter.grad, atol=1e-5, rtol=1e-4,
                                       msg=name)
