"""Training soundness: optimizer steps, EMA updates and BatchNorm statistics through
`dynamo.jit` (backends "eager" and "inductor") against eager, bit for bit in float32 over 20
steps.

What is compared: parameters, their `.grad`, optimizer state (momentum buffers, Adam moments,
step counts), EMA weights, BatchNorm outputs and running statistics; each step starts from the
same random seed on both sides. What is not bit for bit, and why (docs/training.md, "Soundness
suite"): sums and means computed by generated kernels (a loss' mean, a BatchNorm backward)
add in another order than ATen's kernels; BatchNorm over (N, C) inputs sums in float32 partial
sums, one per thread; channels-last convolutions run oneDNN on NHWC layouts. Those cases are
strict xfails below, so that each turns into a failure the day it becomes exact.
"""

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import dynamo
import inductor

STEPS = 20
BACKENDS = ["eager", "inductor"]
OPTIMIZERS = {
    "sgd_momentum": lambda params: torch.optim.SGD(params, lr=0.1, momentum=0.9, foreach=False),
    "adam": lambda params: torch.optim.Adam(params, lr=0.01, foreach=False),
    "adamw": lambda params: torch.optim.AdamW(params, lr=0.01, weight_decay=0.1, foreach=False),
}


@pytest.fixture(autouse=True)
def _no_silent_fallback(monkeypatch, tmp_path):
    """A graph the code generator gives up on must fail here, not run as eager kernels."""
    monkeypatch.setattr(inductor.config, "fallback_on_error", False)
    monkeypatch.setattr(inductor.config, "channels_last", False)


def assert_bitwise(actual, expected, what: str) -> None:
    assert isinstance(actual, torch.Tensor) and isinstance(expected, torch.Tensor), what
    assert actual.dtype == expected.dtype and actual.shape == expected.shape, what
    differ = int((actual != expected).sum()) if not torch.equal(actual, expected) else 0
    assert differ == 0, f"{what}: {differ} of {expected.numel()} elements differ"


def assert_models_bitwise(model, twin, step: int, grads: bool = True) -> None:
    for (name, a), b in zip(model.named_parameters(), twin.parameters()):
        assert_bitwise(a.detach(), b.detach(), f"step {step}: parameter {name}")
        if grads and b.grad is not None:
            assert_bitwise(a.grad, b.grad, f"step {step}: gradient of {name}")
    for (name, a), b in zip(model.named_buffers(), twin.buffers()):
        assert_bitwise(a, b, f"step {step}: buffer {name}")


def assert_optimizers_bitwise(optimizer, twin, step: int) -> None:
    for (key, state), other in zip(optimizer.state.items(), twin.state.values()):
        for name, value in state.items():
            if isinstance(value, torch.Tensor):
                assert_bitwise(value, other[name], f"step {step}: optimizer state {name}")


def mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))


def batch(step: int):
    generator = torch.Generator().manual_seed(100 + step)
    return torch.randn(4, 8, generator=generator), torch.randn(4, 4, generator=generator)


# -- torch.optim inside a jitted training step ----------------------------------------------

def train_step(model, optimizer, x, target):
    optimizer.zero_grad()
    loss = F.mse_loss(model(x), target)
    loss.backward()
    optimizer.step()
    return loss


LOSS_MEAN_ORDER = pytest.mark.xfail(
    strict=True, reason="F.mse_loss's mean computed by a generated kernel adds in another "
    "order than ATen's: the returned loss differs in its last bit from step 1 on (parameters, "
    "gradients and optimizer state stay bitwise equal)")


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("backend", [
    "eager", pytest.param("inductor", marks=LOSS_MEAN_ORDER)])
def test_torch_optim_step_inside_a_jitted_training_step(backend, name):
    model, twin = mlp(), mlp()
    optimizer, twin_optimizer = OPTIMIZERS[name](model.parameters()), \
        OPTIMIZERS[name](twin.parameters())
    step = dynamo.jit(train_step, backend=backend)
    for index in range(STEPS):
        x, target = batch(index)
        expected = train_step(twin, twin_optimizer, x, target)
        actual = step(model, optimizer, x, target)
        assert_bitwise(actual.detach(), expected.detach(), f"step {index}: loss")
        assert_models_bitwise(model, twin, index)
        assert_optimizers_bitwise(optimizer, twin_optimizer, index)


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("backend", BACKENDS)
def test_torch_optim_steps_a_jitted_model(backend, name):
    """Forward and backward compiled (the module jitted), torch.optim stepping eagerly."""
    model, twin = mlp(), mlp()
    jitted = dynamo.jit(model, backend=backend)
    optimizer, twin_optimizer = OPTIMIZERS[name](model.parameters()), \
        OPTIMIZERS[name](twin.parameters())
    for index in range(STEPS):
        x, target = batch(index)
        for module, opt in ((jitted, optimizer), (twin, twin_optimizer)):
            opt.zero_grad()
            (module(x) - target).square().sum(1).mean().backward()
            opt.step()
        assert_models_bitwise(model, twin, index)
        assert_optimizers_bitwise(optimizer, twin_optimizer, index)


# -- torch.optim's update rules compiled ----------------------------------------------------
# The single-tensor code of torch.optim (foreach=False, the CPU default) written as a jitted
# function, checked against torch.optim itself fed the same gradients. Step-dependent scalars
# are 0-d tensors (a Python float would be a new constant each step); `addcdiv_(t1, t2,
# value=v)` is `add_(t1 * v / t2)`, which rounds the same three times.

def sgd_rule(params, grads, buffers, first: bool):
    for param, grad, buffer in zip(params, grads, buffers):
        if first:
            buffer.copy_(grad)
        else:
            buffer.mul_(0.9).add_(grad)
        param.add_(buffer, alpha=-0.1)


def adam_rule(params, grads, exp_avgs, exp_avg_sqs, negative_step_size, correction_sqrt,
              weight_decay: float):
    for param, grad, exp_avg, exp_avg_sq in zip(params, grads, exp_avgs, exp_avg_sqs):
        if weight_decay:
            param.mul_(1 - 0.01 * weight_decay)
        exp_avg.lerp_(grad, 1 - 0.9)
        exp_avg_sq.mul_(0.999).addcmul_(grad, grad, value=1 - 0.999)
        denominator = (exp_avg_sq.sqrt() / correction_sqrt).add_(1e-8)
        param.add_(exp_avg * negative_step_size / denominator)


def random_gradients(params, step: int) -> list:
    generator = torch.Generator().manual_seed(1000 + step)
    return [torch.randn(param.shape, generator=generator) for param in params]


@pytest.mark.parametrize("backend", BACKENDS)
def test_sgd_momentum_rule_compiled(backend):
    model, twin = mlp(), mlp()
    reference = torch.optim.SGD(twin.parameters(), lr=0.1, momentum=0.9, foreach=False)
    params = [param.detach() for param in model.parameters()]
    buffers = [torch.zeros_like(param) for param in params]
    rule = dynamo.jit(sgd_rule, backend=backend)
    for index in range(STEPS):
        grads = random_gradients(params, index)
        for param, grad in zip(twin.parameters(), grads):
            param.grad = grad.clone()
        reference.step()
        rule(params, grads, buffers, index == 0)
        assert_models_bitwise(model, twin, index, grads=False)
        for buffer, param in zip(buffers, twin.parameters()):
            assert_bitwise(buffer, reference.state[param]["momentum_buffer"],
                           f"step {index}: momentum")


@pytest.mark.parametrize("weight_decay", [0.0, 0.1], ids=["adam", "adamw"])
@pytest.mark.parametrize("backend", ["eager", "inductor"])
def test_adam_rule_compiled(backend, weight_decay):
    model, twin = mlp(), mlp()
    if weight_decay:
        reference = torch.optim.AdamW(twin.parameters(), lr=0.01, weight_decay=weight_decay,
                                      foreach=False)
    else:
        reference = torch.optim.Adam(twin.parameters(), lr=0.01, foreach=False)
    params = [param.detach() for param in model.parameters()]
    exp_avgs = [torch.zeros_like(param) for param in params]
    exp_avg_sqs = [torch.zeros_like(param) for param in params]
    rule = dynamo.jit(adam_rule, backend=backend)
    for index in range(STEPS):
        grads = random_gradients(params, index)
        for param, grad in zip(twin.parameters(), grads):
            param.grad = grad.clone()
        reference.step()
        step = index + 1   # torch.optim's own float arithmetic for the corrections
        step_size = 0.01 / (1 - 0.9 ** step)
        correction_sqrt = (1 - 0.999 ** step) ** 0.5
        rule(params, grads, exp_avgs, exp_avg_sqs, torch.tensor(-step_size),
             torch.tensor(correction_sqrt), weight_decay)
        assert_models_bitwise(model, twin, index, grads=False)
        for mine, param in zip(exp_avgs, twin.parameters()):
            assert_bitwise(mine, reference.state[param]["exp_avg"], f"step {index}: exp_avg")
        for mine, param in zip(exp_avg_sqs, twin.parameters()):
            assert_bitwise(mine, reference.state[param]["exp_avg_sq"],
                           f"step {index}: exp_avg_sq")


@pytest.mark.parametrize("weight_decay", [0.0, 0.1], ids=["adam", "adamw"])
def test_adam_rule_compiled_with_eager_sqrt(weight_decay, monkeypatch):
    """With sqrt through eager's kernel (`inductor.config.fallback_ops`), everything else the
    code generator computes in Adam's update is bit for bit eager's."""
    monkeypatch.setattr(inductor.config, "fallback_ops", "aten.sqrt")
    test_adam_rule_compiled("inductor", weight_decay)


# -- EMA ------------------------------------------------------------------------------------

def ema_update(averages, params):
    for average, param in zip(averages, params):
        average.mul_(0.99).add_(param, alpha=1 - 0.99)


def ema_lerp(averages, params):
    for average, param in zip(averages, params):
        average.lerp_(param, 1 - 0.99)


def ema_foreach(averages, params):
    torch._foreach_lerp_(averages, params, 1 - 0.99)


@pytest.mark.parametrize("update", [ema_update, ema_lerp, ema_foreach],
                         ids=["mul_add", "lerp", "foreach_lerp"])
@pytest.mark.parametrize("backend", BACKENDS)
def test_ema_update(backend, update):
    model = mlp()
    params = [param.detach() for param in model.parameters()]
    averages = [param.clone() for param in params]
    expected = [param.clone() for param in params]
    jitted = dynamo.jit(update, backend=backend)
    for index in range(STEPS):
        for param, grad in zip(params, random_gradients(params, index)):
            param.add_(grad, alpha=-0.01)
        update(expected, params)
        jitted(averages, params)
        for mine, theirs in zip(averages, expected):
            assert_bitwise(mine, theirs, f"step {index}: average")


# -- BatchNorm running statistics -----------------------------------------------------------

def batch_norm_model(dims: int) -> nn.Module:
    torch.manual_seed(0)
    if dims == 2:
        return nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
    return nn.Sequential(nn.Linear(3, 6), nn.BatchNorm1d(6), nn.ReLU())


def images(step: int, dims: int):
    generator = torch.Generator().manual_seed(200 + step)
    shape = (8, 3, 7, 7) if dims == 2 else (16, 3)
    return torch.randn(shape, generator=generator) * 3 + 1


BATCH_NORM_1D = pytest.mark.xfail(
    strict=True, reason="BatchNorm over (N, C): eager sums each channel in float32 partial sums, "
    "one per thread of torch.get_num_threads() (the kernel's channels-last path); the "
    "generated sum rounds differently")


@pytest.mark.parametrize("backend, dims", [
    ("eager", 2), ("inductor", 2), ("eager", 1), pytest.param("inductor", 1, marks=BATCH_NORM_1D)])
def test_batch_norm_running_statistics_without_grad(backend, dims):
    model, twin = batch_norm_model(dims), batch_norm_model(dims)
    jitted = dynamo.jit(model, backend=backend)
    with torch.no_grad():
        for index in range(STEPS):
            x = images(index, dims)
            assert_bitwise(jitted(x), twin(x), f"step {index}: output")
            assert_models_bitwise(model, twin, index)
        model.eval()
        twin.eval()
        x = images(STEPS, dims)
        assert_bitwise(jitted(x), twin(x), "evaluation output")


BATCH_NORM_BACKWARD = pytest.mark.xfail(
    strict=True, reason="gradients through BatchNorm: the generated backward's sums (of the "
    "gradient and of its product with the centred input) add in another order than ATen's "
    "vectorised batch_norm_backward kernel")


@pytest.mark.parametrize("backend", ["eager", pytest.param("inductor",
                                                           marks=BATCH_NORM_BACKWARD)])
def test_batch_norm_training_steps(backend):
    model, twin = batch_norm_model(2), batch_norm_model(2)
    jitted = dynamo.jit(model, backend=backend)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, foreach=False)
    twin_optimizer = torch.optim.SGD(twin.parameters(), lr=0.1, momentum=0.9, foreach=False)
    for index in range(STEPS):
        x = images(index, 2)
        for module, opt in ((jitted, optimizer), (twin, twin_optimizer)):
            opt.zero_grad()
            module(x).square().mean().backward()
            opt.step()
        assert_models_bitwise(model, twin, index)


@pytest.mark.parametrize("backend", BACKENDS)
def test_batch_norm_forward_with_grad(backend):
    """The training path (a joint graph): outputs and running statistics bit for bit."""
    model, twin = batch_norm_model(2), batch_norm_model(2)
    jitted = dynamo.jit(model, backend=backend)
    for index in range(STEPS):
        x = images(index, 2)
        assert_bitwise(jitted(x).detach(), twin(x).detach(), f"step {index}: output")
        for (name, a), b in zip(model.named_buffers(), twin.buffers()):
            assert_bitwise(a, b, f"step {index}: buffer {name}")
