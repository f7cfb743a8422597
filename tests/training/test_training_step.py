"""`dynamo.jit` on a whole training step: forward, `loss.backward()`, `optimizer.step()`.

Capture breaks the graph at `backward()` (graph breaks, issue 5); the forward graph goes
through training compilation and the backward runs the compiled backward. The optimizer
update after the break is captured too: a graph of in-place parameter updates (its strict
xfail turned XPASS when compiled optimizer steps landed, and was removed)."""
import copy

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import dynamo
from tests.training.harness import RecordingBackend, assert_close

TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}


def model_and_data():
    torch.manual_seed(0)
    # No bias before the BatchNorm: its gradient is rounding noise around zero, which Adam
    # would normalise into full-size steps of random sign.
    model = nn.Sequential(nn.Linear(8, 16, bias=False), nn.BatchNorm1d(16), nn.ReLU(),
                          nn.Dropout(0.2), nn.Linear(16, 4))
    return model, torch.randn(6, 8), torch.randn(6, 4)


def train_step(model, optimizer, x, target):
    optimizer.zero_grad(set_to_none=True)
    loss = F.mse_loss(model(x), target)
    loss.backward()
    optimizer.step()
    return loss


def run_steps(step, model, optimizer, x, target, steps=3):
    losses = []
    for index in range(steps):
        torch.manual_seed(index)
        losses.append(step(model, optimizer, x, target).detach())
    return losses


def compare(jit_model, eager_model, jit_losses, eager_losses):
    for index, (a, b) in enumerate(zip(jit_losses, eager_losses)):
        assert_close(a, b, f"loss {index}", TOLERANCE)
    for (name, a), b in zip(jit_model.state_dict().items(), eager_model.state_dict().values()):
        assert_close(a, b, f"state {name}", TOLERANCE)


@pytest.mark.parametrize("optimizer_class", [torch.optim.SGD, torch.optim.Adam])
def test_jitted_module_inside_an_eager_training_step(optimizer_class):
    """The supported way today: compile the model, keep backward and step eager."""
    model, x, target = model_and_data()
    jit_model = copy.deepcopy(model)
    backend = RecordingBackend()
    compiled = dynamo.jit(jit_model, backend=backend)
    eager_losses = run_steps(train_step, model, optimizer_class(model.parameters(), lr=0.1),
                             x, target)
    jit_losses = run_steps(lambda m, o, *a: train_step(compiled, o, *a), jit_model,
                           optimizer_class(jit_model.parameters(), lr=0.1), x, target)
    compare(jit_model, model, jit_losses, eager_losses)
    assert backend.training_variants


def test_jitted_training_step_compiles_forward_and_backward():
    model, x, target = model_and_data()
    jit_model = copy.deepcopy(model)
    backend = RecordingBackend()
    jitted = dynamo.jit(train_step, backend=backend)
    eager_losses = run_steps(train_step, model, torch.optim.SGD(model.parameters(), lr=0.1),
                             x, target)
    jit_losses = run_steps(jitted, jit_model, torch.optim.SGD(jit_model.parameters(), lr=0.1),
                           x, target)
    compare(jit_model, model, jit_losses, eager_losses)
    assert backend.training_variants, "the forward was not compiled for training"
    assert all(variant.compiled_backward is not None for variant in backend.training_variants)


def test_jitted_training_step_matches_eager_whatever_is_compiled():
    """Whatever capture does with the step (compile, break, or run it eagerly), the result
    must be eager's."""
    model, x, target = model_and_data()
    jit_model = copy.deepcopy(model)
    jitted = dynamo.jit(train_step, backend=RecordingBackend())
    eager_losses = run_steps(train_step, model, torch.optim.Adam(model.parameters(), lr=0.1),
                             x, target)
    jit_losses = run_steps(jitted, jit_model, torch.optim.Adam(jit_model.parameters(), lr=0.1),
                           x, target)
    compare(jit_model, model, jit_losses, eager_losses)


def test_optimizer_update_is_compiled_after_the_backward():
    """After the break at backward(), the resumed code (optimizer.step) is captured too; the
    update runs under no_grad on leaves that require grad (mutations hidden from autograd)."""
    model, x, target = model_and_data()
    jit_model = copy.deepcopy(model)
    backend = RecordingBackend()
    jitted = dynamo.jit(train_step, backend=backend)
    eager_losses = run_steps(train_step, model, torch.optim.SGD(model.parameters(), lr=0.1,
                                                                 momentum=0.9), x, target)
    jit_losses = run_steps(jitted, jit_model, torch.optim.SGD(jit_model.parameters(), lr=0.1,
                                                              momentum=0.9), x, target)
    compare(jit_model, model, jit_losses, eager_losses)
    assert len(backend.compiled) >= 2, "the optimizer update was not captured"
    written = [node for compiled in backend.compiled for node in compiled.owner.graph.nodes
               if node.op in ("call_function", "call_method") and
               str(getattr(node.target, "__name__", node.target)).endswith("_") and
               not str(getattr(node.target, "__name__", node.target)).startswith("_")]
    assert written, "no compiled graph updates the parameters in place (optimizer.step())"


def test_compiled_optimizer_style_update_on_parameters():
    """What a captured optimizer step looks like to this layer: in-place updates of leaves
    that require grad, under no_grad, in the same graph as other work."""
    def update(weight, grad, momentum):
        with torch.no_grad():
            momentum.mul_(0.9).add_(grad)
            weight.sub_(0.1 * momentum)
        return (weight * 2).sum()
    backend = RecordingBackend()
    jitted = dynamo.jit(update, backend=backend)
    results = []
    for runner in (update, jitted):
        torch.manual_seed(0)
        weight = torch.randn(5, requires_grad=True)
        grad, momentum = torch.randn(5), torch.zeros(5)
        out = runner(weight, grad, momentum)
        out.backward()
        results.append((out.detach(), weight.detach(), momentum, weight.grad))
    for a, b in zip(results[1], results[0]):
        assert_close(a, b, "optimizer-style update", TOLERANCE)
    assert backend.compiled, "the update was not captured"
