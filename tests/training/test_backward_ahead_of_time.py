"""Backwards compiled ahead of time (issue 24): a training graph's backward is compiled when
its forward is (`inductor.config.backward_ahead_of_time`), from examples made of the joint
graph's metadata, so `loss.backward()` inside a jitted step runs compiled code at once. Every
case is compared with eager: values, gradients, and the backward compile counts
(`inductor.autograd.runtime.backward_compiles`)."""
from __future__ import annotations

import copy

import pytest
import torch

import dynamo
import inductor
from inductor.autograd import compile_training
from inductor.autograd import runtime
from inductor.autograd.runtime import TrainingVariant

TOLERANCE = {"rtol": 1e-5, "atol": 1e-6}


@pytest.fixture(autouse=True)
def strict(monkeypatch):
    monkeypatch.setattr(inductor.config, "fallback_on_error", False)
    monkeypatch.setattr(inductor.config, "backward_ahead_of_time", True)


def counts_since(before: dict) -> dict:
    after = runtime.backward_compiles()
    return {key: after.get(key, 0) - before.get(key, 0) for key in set(after) | set(before)
            if after.get(key, 0) != before.get(key, 0)}


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.Tanh(), torch.nn.Linear(16, 3))


def test_the_backward_is_compiled_with_the_forward_and_grads_match_eager():
    model = _model()
    reference = copy.deepcopy(model)
    x = torch.randn(5, 6)

    def step(model, x):
        return model(x).pow(2).sum()

    jitted = dynamo.jit(step, backend="inductor")
    before = runtime.backward_compiles()
    loss = jitted(model, x)
    assert counts_since(before) == {"ahead_of_time": 1}, "not compiled before backward()"
    compiled_before_backward = runtime.backward_compiles()
    loss.backward()
    assert counts_since(compiled_before_backward) == {}, "backward() compiled something"
    expected = step(reference, x)
    expected.backward()
    torch.testing.assert_close(loss, expected, **TOLERANCE)
    for mine, theirs in zip(model.parameters(), reference.parameters()):
        torch.testing.assert_close(mine.grad, theirs.grad, **TOLERANCE)


def test_switched_off_the_backward_compiles_at_its_first_call(monkeypatch):
    monkeypatch.setattr(inductor.config, "backward_ahead_of_time", False)
    model, x = _model(), torch.randn(5, 6)
    jitted = dynamo.jit(lambda model, x: model(x).sum(), backend="inductor")
    before = runtime.backward_compiles()
    loss = jitted(model, x)
    assert counts_since(before) == {}
    loss.backward()
    assert counts_since(before) == {"at_first_call": 1}


@pytest.mark.parametrize("layout", ["transposed", "expanded", "sliced"])
def test_a_grad_output_of_another_layout_matches_eager(layout):
    weight = torch.randn(6, 4, requires_grad=True)
    reference = weight.detach().clone().requires_grad_(True)
    x = torch.randn(5, 6)

    def function(x, weight):
        return torch.tanh(x @ weight) * 2

    jitted = dynamo.jit(function, backend="inductor")
    grads = {"transposed": torch.randn(4, 5).t(), "expanded": torch.randn(1, 4).expand(5, 4),
             "sliced": torch.randn(5, 8)[:, ::2]}
    grad = grads[layout]
    assert not grad.is_contiguous()
    before = runtime.backward_compiles()
    output = jitted(x, weight)
    output.backward(grad)
    function(x, reference).backward(grad)
    assert counts_since(before).get("ahead_of_time") == 1
    torch.testing.assert_close(weight.grad, reference.grad, **TOLERANCE)


def test_saved_values_of_another_layout_recompile_the_backward_for_it():
    """The front end guards input strides and the forward returns saved values with their
    traced strides, so a backward compiled ahead of time meets its example's layout; where it
    does not (here: its arguments handed over transposed-in-memory, same values), it is
    compiled again for that layout (counted, once per layout), never run with the example's
    strides. Compared with the backward graph run by torch."""
    def function(x, weight):
        return (torch.sin(x) @ weight).sum()

    graph = torch.fx.symbolic_trace(function)
    x, weight = torch.randn(5, 6), torch.randn(6, 4, requires_grad=True)
    compiled = compile_training(graph, [x, weight], inductor.compile_aten)
    compiled(x, weight).backward()
    variant, = [v for v in compiled.variants.values() if isinstance(v, TrainingVariant)]
    group = variant.nodes.groups[0]
    backward = variant.backward_for(group.absent, group.absent)
    assert backward.layout is not None, "not compiled ahead of time"
    example = runtime.backward_example(backward)
    torch.manual_seed(1)
    values = [torch.randn(value.shape) if isinstance(value, torch.Tensor) else value
              for value in example]
    relaid = [value.t().contiguous().t() if isinstance(value, torch.Tensor)
              and value.dim() == 2 else value for value in values]
    assert runtime.layout_of(relaid) != backward.layout, "the case needs another layout"
    expected = backward.graph(*values)
    before = runtime.backward_compiles()
    for _ in range(2):
        actual = variant.run_backward(backward, list(relaid))
        for mine, theirs in zip(actual, expected):
            torch.testing.assert_close(mine, theirs, **TOLERANCE)
    assert counts_since(before) == {"relayout": 1}
    actual = variant.run_backward(backward, list(values))   # the example's layout again
    for mine, theirs in zip(actual, expected):
        torch.testing.assert_close(mine, theirs, **TOLERANCE)
    assert counts_since(before) == {"relayout": 1}


def test_dynamic_sizes_compile_the_backward_once_ahead_of_time():
    model = _model()
    reference = copy.deepcopy(model)
    jitted = dynamo.jit(lambda model, x: model(x).pow(2).mean(), backend="inductor",
                        dynamic=True)
    before = runtime.backward_compiles()
    for rows in (3, 5, 17):
        x = torch.randn(rows, 6)
        model.zero_grad()
        reference.zero_grad()
        loss = jitted(model, x)
        loss.backward()
        expected = reference(x).pow(2).mean()
        expected.backward()
        torch.testing.assert_close(loss, expected, **TOLERANCE)
        for mine, theirs in zip(model.parameters(), reference.parameters()):
            torch.testing.assert_close(mine.grad, theirs.grad, **TOLERANCE)
    counted = counts_since(before)
    assert counted.get("at_first_call", 0) == 0, counted
    assert counted.get("ahead_of_time", 0) >= 1, counted


def test_retain_graph_and_a_second_backward_match_eager():
    weight = torch.randn(6, 4, requires_grad=True)
    reference = weight.detach().clone().requires_grad_(True)
    x = torch.randn(5, 6)

    def function(x, weight):
        return torch.sigmoid(x @ weight).sum()

    loss = dynamo.jit(function, backend="inductor")(x, weight)
    expected = function(x, reference)
    for _ in range(2):
        loss.backward(retain_graph=True)
        expected.backward(retain_graph=True)
    torch.testing.assert_close(weight.grad, reference.grad, **TOLERANCE)
    loss.backward()
    expected.backward()
    torch.testing.assert_close(weight.grad, reference.grad, **TOLERANCE)
    with pytest.raises(RuntimeError, match="second time") as error:
        loss.backward()
    with pytest.raises(RuntimeError, match="second time") as eager_error:
        expected.backward()
    assert type(error.value) is type(eager_error.value)


def test_double_backward_is_refused_as_before():
    """create_graph through a compiled backward: refused with DoubleBackwardError, ahead of
    time or not (the compiled backward is not differentiable)."""
    from inductor.autograd import DoubleBackwardError

    weight = torch.randn(6, 4, requires_grad=True)
    loss = dynamo.jit(lambda x, w: torch.tanh(x @ w).sum(), backend="inductor")(
        torch.randn(5, 6), weight)
    with pytest.raises(DoubleBackwardError):
        torch.autograd.grad(loss, weight, create_graph=True)


def test_inference_under_no_grad_compiles_no_backward():
    model, x = _model(), torch.randn(5, 6)
    jitted = dynamo.jit(lambda model, x: model(x), backend="inductor")
    before = runtime.backward_compiles()
    with torch.no_grad():
        torch.testing.assert_close(jitted(model, x), model(x), **TOLERANCE)
    assert counts_since(before) == {}
