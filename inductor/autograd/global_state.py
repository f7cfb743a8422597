"""The global torch state a compiled training graph is specialised on.

Input: the current thread's torch state. Output: a hashable `GlobalState` (grad mode and, per
device type, whether autocast is on and to which dtype), and context managers that re-enter
that autocast state while tracing or switch autocast off while compiled graphs run (the casts
autocast would insert are already explicit nodes in the traced graphs).
"""
from __future__ import annotations

import contextlib
import dataclasses

import torch

AUTOCAST_DEVICES = ("cpu", "cuda")


@dataclasses.dataclass(frozen=True)
class GlobalState:
    """Grad mode plus `(device_type, dtype)` for every device type with autocast on."""

    grad_enabled: bool
    autocast: tuple[tuple[str, torch.dtype], ...]

    @staticmethod
    def current() -> "GlobalState":
        """The state of the calling thread."""
        return GlobalState(torch.is_grad_enabled(), current_autocast())

    def autocast_context(self) -> contextlib.AbstractContextManager:
        """Enter this state's autocast regions (used while tracing the forward)."""
        return enter_autocast(self.autocast)


def current_autocast() -> tuple[tuple[str, torch.dtype], ...]:
    """`(device_type, dtype)` for each device type whose autocast is on in this thread."""
    return tuple((device, torch.get_autocast_dtype(device)) for device in AUTOCAST_DEVICES
                 if torch.is_autocast_enabled(device))


def enter_autocast(state: tuple[tuple[str, torch.dtype], ...]) -> contextlib.AbstractContextManager:
    """A context entering autocast for each `(device_type, dtype)` in `state`."""
    if not state:
        return contextlib.nullcontext()
    stack = contextlib.ExitStack()
    for device, dtype in state:
        stack.enter_context(torch.autocast(device, dtype=dtype))
    return stack


def autocast_off(state: tuple[tuple[str, torch.dtype], ...]) -> contextlib.AbstractContextManager:
    """A context switching off autocast for the device types in `state` (none: no-op)."""
    if not state:
        return contextlib.nullcontext()
    stack = contextlib.ExitStack()
    for device, _ in state:
        stack.enter_context(torch.autocast(device, enabled=False))
    return stack
