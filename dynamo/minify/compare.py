"""Stage "check" of the minifier: does a backend fail on one FX graph where eager does not?

Input: an FX `GraphModule`, the values of one call (one per placeholder), a backend and the
kinds of failure wanted (`CHECKS`). Output: a `Failure` (kind, a signature that stays the same
while a failing graph shrinks, and a readable detail) or None. Eager and the backend each run
on their own copies of the inputs, from the same random-number state; results are compared by
structure, type, shape, dtype, `requires_grad` and value (`torch.testing.assert_close`
defaults, NaN equal to NaN), and so are the inputs each run may have written into. A graph
inductor gave up on with a compiler error (`inductor.fallbacks()`, kind `error`) counts as an
error although its results are right.
"""
from __future__ import annotations

import dataclasses
import sys
from typing import Callable, Optional, Sequence

import torch
from torch.utils import _pytree as pytree

CHECKS = ("error", "mismatch", "any")


@dataclasses.dataclass(frozen=True)
class Failure:
    """How a compiled run differs from eager."""

    kind: str  # "error" (the backend raised or gave up with a compiler error) or "mismatch"
    signature: str  # what must stay the same while shrinking: kind and exception type
    detail: str  # for people: the exception, or the first differences

    def wanted(self, check: str) -> bool:
        """Whether `--check check` looks for failures of this kind."""
        return check == "any" or check == self.kind


def clone_value(value):
    """A copy of a call's value: tensors keep shape, strides, storage offset, dtype, device
    and `requires_grad` (as leaves); containers are copied; other values are shared."""
    return pytree.tree_map(_clone_tensor, value)


def _clone_tensor(value):
    if not isinstance(value, torch.Tensor) or _is_fake(value):
        return value
    source = value.detach()
    if source.layout != torch.strided or source.is_quantized:
        copy = source.clone()
    else:  # the storage up to the view's extent, so strides and self-overlap stay
        extent = storage_extent(source)
        base = torch.as_strided(source, (extent,), (1,), 0).clone()
        copy = base.as_strided(source.shape, source.stride(), source.storage_offset())
    if value.requires_grad:
        copy = copy.detach().requires_grad_(True)
    return copy


def clone_inputs(values: Sequence) -> list:
    """Copies of a call's values (`clone_value`), where tensors that share a storage share one
    copy of it, so a backend meets the same aliasing as in the program."""
    extents: dict = {}
    for value in values:
        key = storage_key(value)
        if key is not None:
            extents[key] = max(extents.get(key, (0, value))[0], storage_extent(value)), value
    bases = {key: torch.as_strided(value.detach(), (extent,), (1,), 0).clone()
             for key, (extent, value) in extents.items()}
    copies = []
    for value in values:
        key = storage_key(value)
        if key is None:
            copies.append(clone_value(value))
            continue
        copy = bases[key].as_strided(value.shape, value.stride(), value.storage_offset())
        copies.append(copy.detach().requires_grad_(True) if value.requires_grad else copy)
    return copies


def storage_key(value):
    """What tensors sharing one storage have in common (None: not a plain tensor with a
    storage of its own)."""
    if not isinstance(value, torch.Tensor) or _is_fake(value) \
            or value.layout != torch.strided or value.is_quantized:
        return None
    storage = value.untyped_storage()
    if storage.nbytes() == 0:
        return None
    return storage.data_ptr(), value.dtype, value.device


def _is_fake(value) -> bool:
    return type(value).__name__ in ("FakeTensor", "FunctionalTensor") or value.is_meta


def storage_extent(value: torch.Tensor) -> int:
    """Elements of storage the tensor's view reaches, from storage offset 0."""
    if value.numel() == 0:
        return value.storage_offset()
    return value.storage_offset() + 1 + sum(
        (size - 1) * stride for size, stride in zip(value.shape, value.stride()))


def differences(expected, actual, what: str = "output") -> list:
    """Readable differences between eager's and the backend's values (empty: the same)."""
    expected_leaves, expected_spec = pytree.tree_flatten(expected)
    actual_leaves, actual_spec = pytree.tree_flatten(actual)
    if len(expected_leaves) != len(actual_leaves):
        return [f"{what}: eager gave {len(expected_leaves)} value(s), "
                f"compiled {len(actual_leaves)}"]
    found = []
    for position, (want, got) in enumerate(zip(expected_leaves, actual_leaves)):
        found += _difference(want, got, f"{what} {position}")
    return found


def _difference(want, got, where: str) -> list:
    if isinstance(want, torch.Tensor) != isinstance(got, torch.Tensor):
        return [f"{where}: eager {type(want).__name__}, compiled {type(got).__name__}"]
    if not isinstance(want, torch.Tensor):
        return [] if _same_plain(want, got) else [f"{where}: eager {want!r}, compiled {got!r}"]
    for name in ("shape", "dtype", "requires_grad"):
        if getattr(want, name) != getattr(got, name):
            return [f"{where}: {name} eager {getattr(want, name)}, "
                    f"compiled {getattr(got, name)}"]
    try:
        torch.testing.assert_close(got.detach(), want.detach(), equal_nan=True)
    except AssertionError as error:
        lines = [line.strip() for line in str(error).splitlines() if line.strip()]
        return [f"{where}: values differ ({'; '.join(lines[:3])})"]
    return []


def _same_plain(want, got) -> bool:
    try:
        return bool(want == got) or (want != want and got != got)
    except Exception:  # noqa: BLE001  (values without a usable ==)
        return type(want) is type(got)


def error_fallback_reasons(before: dict) -> list:
    """inductor's compiler-error fallback reasons recorded since `before`
    (a `fallback_counts()`)."""
    module = sys.modules.get("inductor.runtime.fallbacks")
    if module is None:
        return []
    return [reason for reason in module.since(before) if reason.startswith("error:")]


def fallback_counts() -> dict:
    """inductor's compiler-error fallbacks so far, by reason ({} if inductor is not loaded)."""
    module = sys.modules.get("inductor.runtime.fallbacks")
    return module.fallbacks(["error"]) if module is not None else {}


def fallback_failure(reasons: list) -> Failure:
    return Failure("error", "fallback:error",
                   f"inductor gave the graph up with a compiler error: {reasons[0]}")


def run_eager(gm: torch.fx.GraphModule, inputs: Sequence):
    """(result, exception) of the graph run as Python on `inputs`."""
    try:
        return gm(*inputs), None
    except Exception as error:  # noqa: BLE001  (compared with the backend's)
        return None, error


def error_failure(error: BaseException, stage: str) -> Failure:
    name = type(error).__name__
    first = (str(error).splitlines() or [""])[0][:300]
    return Failure("error", f"error:{name}", f"the backend raised while {stage}: {name}: {first}")


def check_graph(gm: torch.fx.GraphModule, inputs: Sequence, backend: Callable,
                eager_must_run: bool = True) -> Optional[Failure]:
    """Compile `gm` with `backend`, run it and eager on copies of `inputs`, and say how they
    differ (None: no difference). With `eager_must_run`, a graph eager cannot run is None
    (a shrinking step that broke the program, not the failure looked for)."""
    state = torch.get_rng_state()
    eager_inputs = clone_inputs(inputs)
    expected, eager_error = run_eager(gm, eager_inputs)
    if eager_error is not None and eager_must_run:
        return None
    before = fallback_counts()
    compiled_inputs = clone_inputs(inputs)
    try:
        compiled = backend(gm, clone_inputs(inputs))
    except Exception as error:  # noqa: BLE001  (the failure looked for)
        return error_failure(error, "compiling the graph")
    torch.set_rng_state(state)
    try:
        actual, compiled_error = compiled(*compiled_inputs), None
    except Exception as error:  # noqa: BLE001
        actual, compiled_error = None, error
    reasons = error_fallback_reasons(before)
    if reasons:
        return fallback_failure(reasons)
    return compare_runs(expected, eager_error, actual, compiled_error,
                        eager_inputs, compiled_inputs)


def compare_runs(expected, eager_error, actual, compiled_error, eager_inputs,
                 compiled_inputs) -> Optional[Failure]:
    """The failure between one eager and one compiled run (results, exceptions, inputs)."""
    if compiled_error is not None:
        if eager_error is not None and type(eager_error) is type(compiled_error):
            return None
        return error_failure(compiled_error, "running the compiled graph")
    if eager_error is not None:
        name = type(eager_error).__name__
        return Failure("mismatch", "mismatch",
                       f"eager raised {name}: {eager_error}; the compiled graph did not")
    found = differences(expected, actual)
    found += differences(list(eager_inputs), list(compiled_inputs), "input (after the call)")
    if found:
        return Failure("mismatch", "mismatch", "; ".join(found[:3]))
    return None
