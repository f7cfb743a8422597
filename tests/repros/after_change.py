"""Guard probes: compile, change something the trace may have relied on, call again; every call
must match eager. Shared by the repro tests of guard bugs (Soundness I, classes 5 and 6)."""
from __future__ import annotations

import types
from typing import Callable, Iterable, Optional

import torch

import dynamo


def same(expected, actual, where: str) -> None:
    if isinstance(expected, torch.Tensor):
        assert isinstance(actual, torch.Tensor), f"{where}: expected a tensor, got {actual!r}"
        assert actual.dtype == expected.dtype and actual.shape == expected.shape, where
        assert actual.requires_grad == expected.requires_grad, f"{where}: requires_grad"
        torch.testing.assert_close(actual, expected, msg=lambda text: f"{where}: {text}")
    elif isinstance(expected, (list, tuple)):
        assert type(actual) is type(expected) and len(actual) == len(expected), where
        for index, (first, second) in enumerate(zip(expected, actual)):
            same(first, second, f"{where}[{index}]")
    elif isinstance(expected, dict):
        assert type(actual) is type(expected) and list(actual) == list(expected), where
        for key in expected:
            same(expected[key], actual[key], f"{where}[{key!r}]")
    elif callable(expected) or isinstance(expected, (torch.nn.Module, types.ModuleType)):
        return  # the same program objects on both sides
    elif hasattr(expected, "__dict__"):
        assert type(actual) is type(expected), where
        same(vars(expected), vars(actual), f"{where}.__dict__")
    else:
        assert type(actual) is type(expected) and actual == expected, \
            f"{where}: expected {expected!r}, got {actual!r}"


def check_after_changes(fn: Callable, backend, steps: Iterable[tuple[Optional[Callable],
                                                                       Callable]],
                        compiles: Optional[int] = None) -> dynamo.CountingBackend:
    """For each `(change, arguments)`: run `change()` (if any), then call eagerly and jitted
    with fresh `arguments()` (a tuple) and compare results and the arguments afterwards
    (mutated in place). `compiles`: how many graphs the steps should have compiled."""
    counting = dynamo.CountingBackend(backend)
    jitted = dynamo.jit(fn, backend=counting)
    for index, (change, arguments) in enumerate(steps):
        if change is not None:
            change()
        eager_args, jit_args = arguments(), arguments()
        expected = fn(*eager_args)
        actual = jitted(*jit_args)
        same(expected, actual, f"step {index} result")
        same(list(eager_args), list(jit_args), f"step {index} arguments afterwards")
    if compiles is not None:
        assert counting.frame_count == compiles, \
            f"expected {compiles} compiles, got {counting.frame_count}"
    return counting
