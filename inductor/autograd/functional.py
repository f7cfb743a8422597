"""ATen-level functionalization and fake tensors, shared by the "analyze" and "trace" stages.

Input: fake or real tensors. Output: functional wrappers of them, inside a context where every
mutation and view becomes a functional op and mutations of wrapped inputs are recorded.

The Python dispatcher is switched on alongside, because some operators are functionalized by
Python kernels (batch norm's running-statistics update is one): without it, an update of
`running_mean` would be invisible. These entry points (`torch._enable_functionalization`,
`torch._to_functional_tensor`, ...) are private but have kept their meaning from torch 2.1 to
2.14; they live here only.
"""
from __future__ import annotations

import contextlib
from typing import Any

import torch


def fake_mode():
    """A fresh fake-tensor mode that lets real constants captured in the graph through."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    return FakeTensorMode(allow_non_fake_inputs=True)


@contextlib.contextmanager
def functionalization():
    """ATen-level functionalization (views re-applied as views) with the Python dispatcher."""
    from torch._dispatch.python import enable_python_dispatcher
    with enable_python_dispatcher():
        torch._enable_functionalization(reapply_views=True)
        try:
            yield
        finally:
            torch._disable_functionalization()


def to_functional(value: Any) -> Any:
    """Wrap a tensor for functionalization (non-tensors pass through)."""
    if not isinstance(value, torch.Tensor):
        return value
    return torch._to_functional_tensor(value)


def from_functional(value: Any) -> Any:
    """The current value behind a functional wrapper (non-tensors pass through)."""
    if not isinstance(value, torch.Tensor):
        return value
    torch._sync(value)
    return torch._from_functional_tensor(value)


def has_data_mutation(value: torch.Tensor) -> bool:
    """Whether the data behind a functional wrapper was changed in place."""
    torch._sync(value)
    return bool(torch._functionalize_has_data_mutation(value))


def has_metadata_mutation(value: torch.Tensor) -> bool:
    """Whether a functional wrapper's sizes, strides or storage were changed in place."""
    return bool(torch._functionalize_has_metadata_mutation(value))


def mutations_hidden_from_autograd(value: torch.Tensor) -> bool:
    """Whether every in-place update of a functional wrapper ran under `no_grad` or
    `inference_mode` (an optimizer-style update: not part of the autograd graph)."""
    return bool(torch._functionalize_are_all_mutations_under_no_grad_or_inference_mode(value))


def data_dependent_errors() -> tuple[type, ...]:
    """Exceptions fake tensors raise when an output's shape or a Python value depends on tensor
    data (`nonzero`, `.item()`, ...): such graphs cannot be traced ahead of time."""
    from torch._subclasses import fake_tensor
    names = ("DataDependentOutputException", "DynamicOutputShapeException",
             "UnsupportedOperatorException")
    found = tuple(getattr(fake_tensor, name) for name in names if hasattr(fake_tensor, name))
    try:
        from torch.fx.experimental.symbolic_shapes import GuardOnDataDependentSymNode
    except ImportError:
        return found
    return found + (GuardOnDataDependentSymNode,)
