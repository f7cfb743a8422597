"""`optimizer.zero_grad()` (set_to_none) at the start of a jitted training step clears the
gradients before the graph runs, where eager clears them, instead of after it: an error of the
forward then leaves what eager leaves without re-running the frame, so the glue no longer
copies the inputs the graph writes (BatchNorm's running statistics) on every call. Where
anything recorded before `zero_grad` may raise, or a Python value changed earlier, the call
stays after the graph (program order)."""
import copy

import pytest
import torch
from torch import nn

import dynamo

BACKENDS = ["eager", "inductor"]


def _model():
    torch.manual_seed(0)
    # no bias before BatchNorm: its gradient is rounding noise, which Adam scales to +-lr
    return nn.Sequential(nn.Conv2d(3, 4, 3, bias=False), nn.BatchNorm2d(4), nn.ReLU(),
                         nn.Flatten(), nn.Linear(4 * 6 * 6, 10))


def _twins(model, optimizer_class, **options) -> tuple:
    """(model, its optimizer, a copy of the model, the copy's optimizer): eager's and jit's."""
    twin = copy.deepcopy(model)
    return (model, optimizer_class(model.parameters(), **options), twin,
            optimizer_class(twin.parameters(), **options))


def _glue_of(jitted, marker: str) -> str:
    glues = [record.glue_source for record in jitted._framejit_driver.records
             if record.graph is not None and marker in (record.glue_source or "")]
    assert glues, [record.glue_source for record in jitted._framejit_driver.records]
    return glues[0]


def _line_of(glue: str, text: str) -> int:
    """The line of the glue's body (not its `def make(...)` header) first holding `text`."""
    lines = glue.splitlines()
    return next(number for number, line in enumerate(lines) if number > 0 and text in line)


def _train_step(model, optimizer, x, y):
    optimizer.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    optimizer.step()
    return loss


@pytest.mark.parametrize("backend", BACKENDS)
def test_whole_step_with_batch_norm_copies_no_input(backend):
    eager_model, eager_opt, jit_model, jit_opt = _twins(_model(), torch.optim.Adam, lr=1e-2)
    step = dynamo.jit(_train_step, backend=backend)
    for seed in range(4):
        generator = torch.Generator().manual_seed(seed)
        x, y = torch.randn(4, 3, 8, 8, generator=generator), torch.tensor([1, 2, 3, 4])
        torch.testing.assert_close(step(jit_model, jit_opt, x, y),
                                   _train_step(eager_model, eager_opt, x, y))
    for mine, theirs in zip(jit_model.state_dict().values(), eager_model.state_dict().values()):
        torch.testing.assert_close(mine, theirs)
    glue = _glue_of(step, "clear_grads")
    assert _line_of(glue, "clear_grads") < _line_of(glue, "compiled("), glue  # as in eager
    assert "save_inputs" not in glue, glue           # no copy of the running statistics


def _embedding_step(model, optimizer, tokens):
    optimizer.zero_grad()
    loss = model(tokens).sum()
    loss.backward()
    return loss


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_error_in_the_forward_leaves_the_gradients_cleared(backend):
    torch.manual_seed(0)
    eager_model, eager_opt, jit_model, jit_opt = _twins(
        nn.Sequential(nn.Embedding(8, 4), nn.Linear(4, 2)), torch.optim.SGD, lr=0.1)
    step = dynamo.jit(_embedding_step, backend=backend)
    good, bad = torch.tensor([1, 2, 3]), torch.tensor([1, 9, 3])   # 9: out of range
    torch.testing.assert_close(step(jit_model, jit_opt, good),
                               _embedding_step(eager_model, eager_opt, good))
    assert all(p.grad is not None for p in jit_model.parameters())
    with pytest.raises(IndexError) as eager_error:
        _embedding_step(eager_model, eager_opt, bad)
    with pytest.raises(IndexError) as jit_error:
        step(jit_model, jit_opt, bad)
    if backend == "eager":
        assert str(jit_error.value) == str(eager_error.value)
    assert all(p.grad is None for p in eager_model.parameters())
    assert all(p.grad is None for p in jit_model.parameters())
    torch.testing.assert_close(step(jit_model, jit_opt, good),
                               _embedding_step(eager_model, eager_opt, good))


def _read_then_clear(model, optimizer):
    old = model.weight.grad
    doubled = model.weight.grad * 2
    optimizer.zero_grad()
    return old, doubled


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_gradient_read_before_zero_grad_is_the_old_one(backend):
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    step = dynamo.jit(_read_then_clear, backend=backend)
    for _ in range(3):
        model(torch.randn(4, 3)).sum().backward()
        expected = model.weight.grad
        old, doubled = step(model, optimizer)
        assert old is expected
        torch.testing.assert_close(doubled, expected * 2)
        assert model.weight.grad is None and model.bias.grad is None


class _Counter:
    calls = 0


def _count_then_step(counter, model, optimizer, x):
    counter.calls += 1                  # a change replayed after the graph
    optimizer.zero_grad()
    loss = model(x).sum()
    loss.backward()
    return loss


@pytest.mark.parametrize("backend", BACKENDS)
def test_zero_grad_after_an_earlier_change_stays_after_the_graph(backend):
    torch.manual_seed(0)
    model = nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    counter = _Counter()
    step = dynamo.jit(_count_then_step, backend=backend)
    for call in range(1, 4):
        x = torch.randn(4, 3)
        model.weight.grad = torch.ones_like(model.weight)
        loss = step(counter, model, optimizer, x)
        torch.testing.assert_close(loss, model(x).sum())
        assert counter.calls == call
        torch.testing.assert_close(model.weight.grad, x.sum(0).expand(2, 3))
    glue = _glue_of(step, "clear_grads")
    assert _line_of(glue, "clear_grads") > _line_of(glue, "compiled("), glue
