"""Channels-last activations across the forward/backward boundary of CPU training graphs
(issue 24, the whole-step CNN): the forward returns the activations it saves in the
channels-last layout it computed them in (`inductor/autograd/saved_layout.py`), and the
backward graph is compiled channels-last for them (`lower.graph.prefers_channels_last` sees
`convolution_backward`, whose lowering in `lower/convolution.py` reads NHWC). Before, the
forward copied every saved activation to NCHW and the backward ran oneDNN's NCHW backward.

Every case is differential against eager: loss, outputs, parameter gradients, BatchNorm
statistics (tests/training/harness.py), and for the whole step parameters and optimizer
state after three steps, within training's tolerance (channels-last convolutions add in
another order than NCHW ones: docs/training.md, "Soundness suite"). The structural checks
(layouts, library calls, compile counts) fail on the code before this change.
"""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import dynamo
import inductor
from inductor.autograd import runtime
from tests.training.harness import check_training
from tests.training.test_whole_step import OPTIMIZERS, compare

CHANNELS_LAST = (16 * 8 * 8, 1, 8 * 16, 16)   # strides of an (n, 16, 8, 8) NHWC tensor


@pytest.fixture(autouse=True)
def _channels_last_code_generator(monkeypatch):
    monkeypatch.setattr(inductor.config, "fallback_on_error", False)
    monkeypatch.setattr(inductor.config, "channels_last", True)
    monkeypatch.setattr(inductor.config, "backward_ahead_of_time", True)


class Block(nn.Module):
    """A residual block as the whole-step benchmark's CNN has them."""

    def __init__(self, channels: int = 16):
        super().__init__()
        self.stem = nn.Conv2d(3, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.head = nn.Linear(channels, 5)

    def forward(self, x):
        y = torch.relu(self.bn1(self.stem(x)))
        z = torch.relu(self.bn2(self.conv(y)) + y)
        return self.head(F.adaptive_avg_pool2d(z, 1).flatten(1))


def _block_and_input():
    torch.manual_seed(0)
    return Block(), torch.randn(4, 3, 8, 8)


def _variant(backend):
    variant, = backend.training_variants
    return variant


def test_saved_activations_cross_channels_last_and_the_backward_reads_them_so():
    model, x = _block_and_input()
    before = runtime.backward_compiles()
    backend = check_training(model, x, capture="fx", steps=3,
                             compile_inner=inductor.compile_aten)
    variant = _variant(backend)
    counts = {key: value - before.get(key, 0) for key, value in
              runtime.backward_compiles().items() if value != before.get(key, 0)}
    assert counts == {"ahead_of_time": 1}, counts   # none at backward(), no relayout
    assert variant.compiled_forward.report.channels_last
    backward = variant.compiled_backward.report
    assert backward.channels_last, "the backward graph ran NCHW"
    assert backward.library_calls.get("aten.convolution_backward") == 2, backward.library_calls
    assert not backward.fallback_ops, backward.fallback_ops
    # the saved 16-channel activations: channels-last in the example the backward was
    # compiled for, and in what the forward returns
    group = variant.nodes.groups[0]
    saved_strides = [layout for layout in variant.backward_for(group.absent, group.absent)
                     .layout if layout is not None and len(layout) == 4]
    assert CHANNELS_LAST in saved_strides, saved_strides


def test_the_forward_returns_saved_activations_channels_last():
    model, x = _block_and_input()
    backend = check_training(model, x, capture="fx", steps=1,
                             compile_inner=inductor.compile_aten)
    variant = _variant(backend)
    compiled = backend.compiled[0]
    arguments = [x] + compiled.lifted.fetch(compiled.owner)
    with torch.no_grad():
        outputs = variant.run_forward(list(arguments))
    saved = outputs[variant.partition.function_output_count:]
    four_d = [value for value in saved if isinstance(value, torch.Tensor) and value.dim() == 4
              and value.shape[1] == 16 and value.shape[2] > 1]
    assert four_d, "no 16-channel activation saved"
    assert all(value.stride() == CHANNELS_LAST for value in four_d), \
        [value.stride() for value in four_d]


def test_returned_activations_keep_eager_strides():
    """An activation the function returns (and the backward also reads) comes back with
    eager's NCHW strides; values and gradients as eager's."""
    class Returning(Block):
        def forward(self, x):
            y = torch.relu(self.bn1(self.stem(x)))
            return y, self.head(F.adaptive_avg_pool2d(self.conv(y), 1).flatten(1))

    torch.manual_seed(0)
    model, x = Returning(), torch.randn(4, 3, 8, 8)
    backend = check_training(model, x, capture="fx", steps=2,
                             compile_inner=inductor.compile_aten,
                             loss=lambda output: output[0].sum() + output[1].pow(2).sum())
    returned = backend.compiled[0](x)[0]
    assert returned.stride() == model(x)[0].stride() == (1024, 64, 8, 1)


def test_a_weight_heavy_convolution_backward_stays_contiguous_and_matches_eager():
    """8 -> 128 channels with stride 16 (2x2 outputs): more weight than activations, so the
    forward's convolution reads NCHW, and so does its backward, in a graph kept
    channels-last by its other convolution."""
    class Mixed(nn.Module):
        def __init__(self):
            super().__init__()
            self.wide = nn.Conv2d(3, 8, 3, padding=1)
            self.heavy = nn.Conv2d(8, 128, 3, stride=16, padding=1)

        def forward(self, x):
            return self.heavy(torch.relu(self.wide(x)))

    torch.manual_seed(0)
    backend = check_training(Mixed(), torch.randn(1, 3, 32, 32), capture="fx", steps=2,
                             compile_inner=inductor.compile_aten)
    report = _variant(backend).compiled_backward.report
    assert report.channels_last
    assert report.library_calls.get("aten.convolution_backward") == 2
    source = report.source   # the input of each convolution's backward, as it reads it
    assert "empty_strided((1, 8, 32, 32), (8192, 1, 256, 8)" in source, "wide one not NHWC"
    assert "empty_strided((1, 8, 32, 32), (8192, 1024, 32, 1)" in source, "heavy one not NCHW"


def test_without_channels_last_the_backward_stays_nchw(monkeypatch):
    monkeypatch.setattr(inductor.config, "channels_last", False)
    model, x = _block_and_input()
    backend = check_training(model, x, capture="fx", steps=2,
                             compile_inner=inductor.compile_aten)
    variant = _variant(backend)
    assert not variant.compiled_forward.report.channels_last
    assert not variant.compiled_backward.report.channels_last


def test_graphs_run_as_is_keep_traced_layouts():
    """`aot_eager` (no code generation) returns saved values as ATen computes them: no
    layout is asked of it, and its backward needs no relayout."""
    model, x = _block_and_input()
    before = runtime.backward_compiles().get("relayout", 0)
    check_training(model, x, capture="fx", steps=2)
    assert runtime.backward_compiles().get("relayout", 0) == before


def _train_step(model, optimizer, x, target):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(x), target)
    loss.backward()
    optimizer.step()
    return loss


@pytest.mark.parametrize("optimizer_name", ["adam", "sgd_momentum"])
def test_whole_cnn_step_channels_last_matches_eager(optimizer_name):
    """The jitted whole step (zero_grad, forward, cross entropy, backward, optimizer step)
    with channels-last on: losses each step, then parameters, gradients, BatchNorm buffers
    and optimizer state, against eager."""
    eager_model, x = _block_and_input()
    target = torch.randint(0, 5, (4,))
    jit_model = copy.deepcopy(eager_model)
    eager_optimizer = OPTIMIZERS[optimizer_name](eager_model.parameters())
    jit_optimizer = OPTIMIZERS[optimizer_name](jit_model.parameters())
    jitted = dynamo.jit(_train_step, backend="inductor")
    before = runtime.backward_compiles()
    for _ in range(3):
        expected = _train_step(eager_model, eager_optimizer, x, target)
        actual = jitted(jit_model, jit_optimizer, x, target)
        torch.testing.assert_close(actual, expected, rtol=1e-4, atol=1e-5)
        assert actual.requires_grad == expected.requires_grad
    compare(jit_model, jit_optimizer, eager_model, eager_optimizer, exact=False)
    assert runtime.backward_compiles().get("relayout", 0) == before.get("relayout", 0)
