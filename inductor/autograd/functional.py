"""ATen-level functionalization and fake tensors, shared by the "analyze" and "trace" stages.

Input: fake or real tensors. Output: functional wrappers of them, inside a context where every
mutation and view becomes a functional op and mutations of wrapped inputs are recorded.

The Python dispatcher is switched on alongside, because some operators are functionalized by
Python kernels (batch norm's running-statistics update is one): without it, an update of
`running_mean` would be invisible. These entry points (`torch._enable_functionalization`,
`torch._to_functional_tensor`, ...) are private but have kept their meaning from torch 2.1 to
2.14; they live here only.

Views whose functional inverse is not exact are traced as the views they are
(`ExactViewInverses`): functionalization inverts a write through `expand` with arithmetic,
`base + (new - base)`, which gives NaN where `base` held inf, rounds, and fails for bools (graph
fuzzer class 25), even where the expand broadcasts nothing (same shape, new leading size-1 dims,
a size-1 dim expanded to 0). Such an expand is traced as `alias`, `unsqueeze` and an empty
`narrow`, whose inverses copy; it is the same memory, elements and gradients (only the strides
of new size-1 dims differ: 0 in eager). The inference path makes the same rewrite at the ATen
level (`inductor.view_rewrites`), before it functionalizes. A write through an expand that
broadcasts (its elements overlap in memory) raises `UnsupportedGraph`: eager writes each
location once (`fill_`) and raises only in the backward, where the trace failed on the spot.
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
    """ATen-level functionalization (views re-applied as views) with the Python dispatcher,
    expands that broadcast nothing traced as exact views (`ExactViewInverses`)."""
    from inductor.python_dispatcher import aten_python_dispatcher
    with aten_python_dispatcher(), ExactViewInverses():
        torch._enable_functionalization(reapply_views=True)
        try:
            yield
        finally:
            torch._disable_functionalization()


# by identity (a function handed to `__torch_function__` need not be hashable)
_EXPANDS = frozenset(map(id, (torch.Tensor.expand, torch.Tensor.expand_as,
                              torch.Tensor.broadcast_to, torch.broadcast_to)))


class ExactViewInverses(torch.overrides.TorchFunctionMode):
    """`expand` (`expand_as`, `broadcast_to`, `broadcast_tensors`) that broadcasts nothing
    returns the same view made of ops functionalization inverts exactly (module docstring).
    Above the autograd key, so the gradient is that of the views made."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        if args and isinstance(args[0], torch.Tensor) and _writes_into_first(func) \
                and torch._debug_has_internal_overlap(args[0]) == 1:
            from inductor.autograd.signature import UnsupportedGraph
            raise UnsupportedGraph("the graph writes through a view whose elements overlap "
                                   "in memory (an expanded tensor): eager writes each "
                                   "location once and refuses the backward")
        result = func(*args, **(kwargs or {}))
        if id(func) in _EXPANDS and args and isinstance(args[0], torch.Tensor):
            return _unbroadcast(args[0], result)
        if func is torch.broadcast_tensors and isinstance(result, (tuple, list)):
            sources = args[0] if len(args) == 1 and isinstance(args[0], (tuple, list)) else args
            return type(result)(_unbroadcast(source, value)
                                for source, value in zip(sources, result))
        return result


# in-place methods that change metadata or flags, not elements
_NOT_DATA_WRITES = frozenset((
    "requires_grad_", "share_memory_", "detach_", "set_", "resize_", "resize_as_",
    "as_strided_", "t_", "transpose_", "swapdims_", "swapaxes_", "squeeze_", "unsqueeze_"))


def _writes_into_first(func) -> bool:
    """Whether `func` is a tensor method writing into its first argument's elements (`fill_`,
    `+=`, `x[i] = v`)."""
    name = getattr(func, "__name__", "")
    if name in _NOT_DATA_WRITES:
        return False
    return (name.endswith("_") and not name.startswith("_")) or \
        (name.startswith("__i") and name.endswith("__")) or name == "__setitem__"


def _unbroadcast(source: Any, expanded: Any) -> Any:
    """`expanded` (an expand of `source`), or where it broadcasts nothing, the same view of
    `source` as `alias`, `unsqueeze` and `narrow` (an empty expand too: its inverse added
    zeros, turning -0.0 into 0.0)."""
    if not isinstance(source, torch.Tensor) or not isinstance(expanded, torch.Tensor) \
            or expanded is source:   # `broadcast_tensors` of equal shapes: no view made
        return expanded
    new, old = tuple(expanded.shape), tuple(source.shape)
    lead = len(new) - len(old)
    padded = (1,) * lead + old
    if lead < 0 or any(want != have and not (have == 1 and want == 0)
                       for want, have in zip(new, padded)):
        return expanded
    view = torch.ops.aten.alias.default(source)
    for _ in range(lead):
        view = view.unsqueeze(0)
    for dim, (want, have) in enumerate(zip(new, padded)):
        if want != have:
            view = view.narrow(dim, 0, 0)
    return view


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
