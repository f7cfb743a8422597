"""Native tensor matching (stage: guard; input: the `TensorProperties` of a guard set's tensor
guards; output: one callable that checks all their tensors in a single call, or None).

Torch's Python getters (`x.dtype`, `x.shape`, `x.stride()`, `x.is_neg()`...) cost 40-90 ns each,
about 0.5 us per tensor; read from the tensor's C++ implementation the same facts cost ~10 ns.
`tensor_match.cpp` does that. It needs torch's C++ headers, which only the installed torch has,
so `guards/native/build.py` compiles it on first use with the system C++ compiler and caches it
on disk at `<JIT_NATIVE_CACHE_DIR or JIT_CACHE_DIR or ~/.cache/framejit>/guards/<key>/`; later
processes load it at once.

When it cannot be built (no compiler, no headers) or `JIT_NATIVE_GUARDS=0`, checks keep the
generated Python conditions: the same answers, only slower. The reason is logged once on the
`framejit.guards` channel.

`python -m dynamo build` builds it (with inductor's helper) ahead of time; `python -m
guards.native` builds the helpers registered without inductor and prints where they live.
"""
from __future__ import annotations

import logging
import os
import sys
from types import ModuleType
from typing import Callable, Optional, Sequence

from guards import environment
from guards.native import build

log = logging.getLogger("framejit.guards")

_enabled = environment.read("JIT_NATIVE_GUARDS", "bool", True)

HELPER = build.register(build.NativeHelper(
    module="guards.native._tensor_match",
    source=os.path.join(os.path.dirname(os.path.abspath(__file__)), "tensor_match.cpp"),
    headers=tuple(os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
                  for name in ("size_relations.h", "global_state.h")),
    folder="guards", unavailable="native guard checks unavailable, using Python checks",
    channel="framejit.guards", wanted=lambda: _enabled and _checks_guards()))


def _checks_guards() -> bool:
    """Whether this process builds guard sets (then it will check tensors with the matcher),
    unlike one using only inductor, which imports `guards.native.build` and nothing more."""
    return "guards.guard_set" in sys.modules


def enabled() -> bool:
    """Whether guard sets compile their tensor checks to the native matcher when it loads."""
    return _enabled


def set_enabled(flag: bool) -> None:
    """Switch the native matcher on or off for guard sets compiled from now on."""
    global _enabled
    _enabled = bool(flag)


def load() -> Optional[ModuleType]:
    """The native module, building it on first use; None when it cannot be had (logged once)."""
    return build.load(HELPER)


def unavailable_reason() -> Optional[str]:
    """Why the native matcher could not be loaded (after `load()` failed), else None."""
    return build.unavailable_reason(HELPER)


def tensor_matcher(properties: Sequence) -> Optional[Callable[..., bool]]:
    """A callable `matcher(t0, t1, ...) -> bool` checking each tensor against the matching
    `TensorProperties`, or None when native checks are off or unavailable."""
    if not _enabled or not properties:
        return None
    module = load()
    if module is None:
        return None
    try:
        return module.TensorMatcher([tensor_spec(item) for item in properties])
    except (TypeError, ValueError, OverflowError) as error:  # e.g. a symbolic (nested) size
        log.debug("tensor guards kept in Python: %s", error)
        return None


def tensor_spec(properties) -> tuple:
    """The native form of a `TensorProperties` (what `TensorMatcher` and `GuardProgram` read)."""
    return (properties.tensor_type, properties.dtype, properties.device,
            properties.requires_grad, properties.layout, properties.sizes, properties.strides,
            properties.inference, properties.neg, properties.conj)
