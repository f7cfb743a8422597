"""Training with a changing batch size through `dynamo.jit` (issue 23): forward, loss and
`loss.backward()` of a jitted module, batch after batch of different sizes (1, primes, a
repeat, a large one), compared with an eager copy of the module: the loss, every parameter's
gradient, the gradient of an input that requires grad, and the parameters after an optimizer
step (so that each batch starts from the parameters the previous one produced).

"""
import copy

import pytest
import torch
import torch.nn.functional as F

import dynamo
from dynamic_programs import BACKENDS, PER_SIZE, assert_same_value, counting_backend

pytestmark = pytest.mark.filterwarnings("ignore:dynamo.jit\\(dynamic=True\\):UserWarning")

BATCHES = [8, 3, 1, 13, 8, 64, 5]


class Classifier(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Linear(6, 16)
        self.norm = torch.nn.LayerNorm(16)
        self.head = torch.nn.Linear(16, 4)

    def forward(self, x):
        hidden = self.norm(torch.relu(self.embed(x)))
        pooled = hidden - hidden.mean(0, keepdim=True)  # mixes the batch: a reduction over it
        return self.head(pooled + hidden)


class Sequence(torch.nn.Module):
    """Convolution over a changing length, then a pooled head."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv1d(3, 5, 3, padding=1)
        self.head = torch.nn.Linear(5, 2)

    def forward(self, x):
        features = torch.tanh(self.conv(x))
        return self.head(features.mean(-1))


def batch(model, n, seed):
    generator = torch.Generator().manual_seed(seed)
    if isinstance(model, Sequence):
        x = torch.randn(2, 3, n, generator=generator)
        return x, torch.randn(2, 2, generator=generator)
    x = torch.randn(n, 6, generator=generator)
    return x, torch.randint(0, 4, (n,), generator=generator)


def loss_of(model, output, target):
    if isinstance(model, Sequence):
        return F.mse_loss(output, target)
    return F.cross_entropy(output, target)


def train_step(model, forward, optimizer, n, seed, input_grad):
    x, target = batch(model, n, seed)
    x.requires_grad_(input_grad)
    optimizer.zero_grad()
    output = forward(x)
    loss = loss_of(model, output, target)
    loss.backward()
    gradients = {name: parameter.grad.clone() for name, parameter in model.named_parameters()}
    optimizer.step()
    return output, loss, gradients, x.grad


def train_both(kind, backend, dynamic, sizes, input_grad=False):
    """Train an eager model and its jitted copy on the same batches; compare every step."""
    dynamo.reset()
    torch.manual_seed(0)
    eager = kind()
    twin = copy.deepcopy(eager)
    counting = counting_backend(backend)
    jitted = dynamo.jit(twin, backend=counting, dynamic=dynamic)
    optimizers = [torch.optim.SGD(model.parameters(), lr=0.1) for model in (eager, twin)]
    for step, n in enumerate(sizes):
        expected = train_step(eager, eager, optimizers[0], n, step, input_grad)
        actual = train_step(twin, jitted, optimizers[1], n, step, input_grad)
        assert_same_value(expected[0].detach(), actual[0].detach(), f"step {step} (n={n}) output")
        assert_same_value(expected[1].detach(), actual[1].detach(), f"step {step} (n={n}) loss")
        for name, gradient in expected[2].items():
            assert_same_value(gradient, actual[2][name], f"step {step} (n={n}) grad of {name}")
        if input_grad:
            assert_same_value(expected[3], actual[3], f"step {step} (n={n}) input grad")
        for (name, first), second in zip(eager.named_parameters(), twin.parameters()):
            assert_same_value(first.detach(), second.detach(), f"step {step} {name} after step")
    return counting


@pytest.mark.parametrize("dynamic", [None, True])
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("kind", [Classifier, Sequence], ids=["batch", "length"])
def test_gradients_equal_eager_as_the_batch_changes(kind, backend, dynamic):
    train_both(kind, backend, dynamic, BATCHES)


@pytest.mark.parametrize("backend", BACKENDS)
def test_input_gradients_equal_eager_as_the_batch_changes(backend):
    train_both(Classifier, backend, True, [4, 7, 1, 4, 11], input_grad=True)


@pytest.mark.parametrize("backend", ["eager", pytest.param("aot_eager", marks=PER_SIZE)])
def test_training_compiles_once_for_batches_other_than_1(backend):
    counting = train_both(Classifier, backend, True, [8, 3, 13, 8, 64, 5])
    assert counting.frame_count == 1
