"""The differential training check: eager and compiled training steps must agree.

`check_training(module, *inputs)` runs `steps` training steps on two copies of `module` (eager,
and compiled through `dynamo.jit` or `torch.fx.symbolic_trace` + `compile_training`), each
step from the same random seed, and compares outputs, the loss, every parameter's `.grad`,
every buffer (BatchNorm statistics), and the `.grad` of inputs that require grad. It also
asserts that the compiled path really ran a compiled forward/backward (not an eager fallback).
"""
from __future__ import annotations

import copy
from typing import Any, Callable, Optional, Sequence

import torch
from torch.utils import _pytree as pytree

import dynamo
from inductor.autograd import CompiledTraining, compile_training, run_graph
from inductor.autograd.runtime import TrainingVariant

TOLERANCE = {"rtol": 1e-4, "atol": 1e-5}


class RecordingBackend:
    """`aot_eager` (or `compile_training` with another inner compiler) that keeps what it
    returned, so tests can look at the variants compiled."""

    def __init__(self, compile_inner: Callable = run_graph):
        self.compile_inner = compile_inner
        self.compiled: list[CompiledTraining] = []

    def __call__(self, gm: torch.fx.GraphModule, example_inputs: Sequence) -> Callable:
        compiled = compile_training(gm, example_inputs, self.compile_inner)
        self.compiled.append(compiled)
        return compiled

    @property
    def training_variants(self) -> list[TrainingVariant]:
        """Every training variant compiled so far."""
        return [variant for compiled in self.compiled for variant in compiled.variants.values()
                if isinstance(variant, TrainingVariant)]


def tensors_of(value: Any) -> list[torch.Tensor]:
    """Every tensor in a (possibly nested, possibly ModelOutput) result."""
    if hasattr(value, "to_tuple"):
        value = value.to_tuple()
    return [leaf for leaf in pytree.tree_leaves(value) if isinstance(leaf, torch.Tensor)]


def default_loss(output: Any) -> torch.Tensor:
    """A loss touching every differentiable output with fixed, output-specific weights (so
    each output's gradient is distinct, not all ones)."""
    total = None
    generator = torch.Generator().manual_seed(1234)
    for tensor in tensors_of(output):
        if not (tensor.requires_grad and tensor.dtype.is_floating_point):
            continue
        weight = torch.randn(tensor.shape, generator=generator).to(tensor.dtype)
        term = (tensor * weight.to(tensor.device)).sum()
        total = term if total is None else total + term
    return total


def compile_module(module: torch.nn.Module, inputs: Sequence, capture: str,
                   backend: RecordingBackend) -> Callable:
    """The compiled version of `module` through `capture` ("dynamo" or "fx")."""
    if capture == "dynamo":
        return dynamo.jit(module, backend=backend)
    graph = torch.fx.symbolic_trace(module)
    compiled = backend(graph, list(inputs))
    return lambda *arguments: compiled(*arguments)


def _clone_inputs(inputs: Sequence) -> list:
    cloned = []
    for value in inputs:
        if isinstance(value, torch.Tensor):
            copy_ = value.detach().clone()
            cloned.append(copy_.requires_grad_(value.requires_grad))
        else:
            cloned.append(copy.deepcopy(value))
    return cloned


def assert_close(actual, expected, what: str, tolerance: dict) -> None:
    """`torch.testing.assert_close` naming what differs."""
    torch.testing.assert_close(actual, expected, msg=lambda message: f"{what}: {message}",
                               **tolerance)


def _compare_step(eager_model, jit_model, eager_result, jit_result, eager_inputs, jit_inputs,
                  step: int, tolerance: dict) -> None:
    where = f"step {step}"
    (eager_out, eager_loss), (jit_out, jit_loss) = eager_result, jit_result
    for index, (a, b) in enumerate(zip(tensors_of(jit_out), tensors_of(eager_out))):
        assert_close(a, b, f"{where} output {index}", tolerance)
        assert a.requires_grad == b.requires_grad, f"{where} output {index} requires_grad"
    assert len(tensors_of(jit_out)) == len(tensors_of(eager_out)), f"{where}: output count"
    if eager_loss is not None:
        assert_close(jit_loss, eager_loss, f"{where} loss", tolerance)
    eager_parameters = dict(eager_model.named_parameters())
    for name, parameter in jit_model.named_parameters():
        expected = eager_parameters[name].grad
        if expected is None:
            assert parameter.grad is None, f"{where} {name}.grad should be None"
        else:
            assert parameter.grad is not None, f"{where} {name}.grad missing"
            assert_close(parameter.grad, expected, f"{where} {name}.grad", tolerance)
    eager_buffers = dict(eager_model.named_buffers())
    for name, buffer in jit_model.named_buffers():
        assert_close(buffer, eager_buffers[name], f"{where} buffer {name}", tolerance)
    for index, (a, b) in enumerate(zip(jit_inputs, eager_inputs)):
        if isinstance(b, torch.Tensor) and b.requires_grad:
            assert_close(a.grad, b.grad, f"{where} input {index}.grad", tolerance)


def check_training(module: torch.nn.Module, *inputs, capture: str = "dynamo", steps: int = 2,
                   loss: Callable[[Any], Optional[torch.Tensor]] = default_loss,
                   tolerance: Optional[dict] = None, keywords: Optional[dict] = None,
                   zero_grad: bool = True, expect_training: bool = True,
                   graphs: Optional[int] = None,
                   compile_inner: Optional[Callable] = None) -> RecordingBackend:
    """Compare `steps` eager and compiled training steps of `module` (see module doc)."""
    tolerance = tolerance or TOLERANCE
    keywords = keywords or {}
    eager_model = module
    jit_model = copy.deepcopy(module)
    backend = RecordingBackend(compile_inner or run_graph)
    compiled = compile_module(jit_model, inputs, capture, backend)
    for step in range(steps):
        eager_inputs, jit_inputs = _clone_inputs(inputs), _clone_inputs(inputs)
        results = []
        for model, runner, arguments in ((eager_model, eager_model, eager_inputs),
                                         (jit_model, compiled, jit_inputs)):
            if zero_grad:
                model.zero_grad(set_to_none=True)
            torch.manual_seed(100 + step)
            output = runner(*arguments, **keywords)
            value = loss(output)
            if value is not None:
                value.backward()
            results.append((output, value))
        _compare_step(eager_model, jit_model, results[0], results[1], eager_inputs,
                      jit_inputs, step, tolerance)
    if expect_training:
        assert backend.compiled, "capture produced no graph (the frame ran eagerly)"
        assert backend.training_variants, "no compiled training graph ran (eager fallback?)"
    if graphs is not None:
        assert len(backend.compiled) == graphs, \
            f"expected {graphs} captured graphs, got {len(backend.compiled)}"
    return backend
