"""Torch global state (stage: guard; input: the state seen at capture; output: one grouped check
per call and readable reasons).

`TorchState` is a snapshot of the process-wide settings that change what a graph computes: grad
mode, inference mode, autocast (enabled and dtype, for cpu and cuda), the default dtype,
deterministic algorithms (and warn-only), the float32 matmul precision, and the two TF32 switches.
The snapshot is normalised so that equal snapshots mean "the guard holds": an autocast dtype only
counts while autocast is enabled on that device, warn-only only while deterministic mode is on.
When nothing had autocast enabled at capture, the check also requires that no other device
(xpu, mps, ...) has it enabled now.

With the native guard helper (`guards.native`), the whole comparison is one step of the guard
program (`guards/native/global_state.h`: ~10 ns, no Python-level call); without it, or with
`JIT_NATIVE_GUARDS=0`, the check calls torch's C getters from Python (`state_conditions`; eight
to ten calls, ~0.6-1.2 us a check), reading them directly (`torch._C._get_cublas_allow_tf32`
rather than the `torch.backends.cuda.matmul.allow_tf32` property, which costs ten times more).
Both take the same snapshot and give the same verdict (tests/guards/test_guard_state_native.py);
the failure reasons always come from `TorchState.differences`.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Hashable

import torch

from guards import messages
from guards.kinds.base import RANK_GLOBAL_STATE, Guard
from guards.sources import GlobalStateSource

AUTOCAST_DEVICES = ("cpu", "cuda")

_Field = tuple[str, str, Callable[[], Any], Callable[[Any], str]]
_SIMPLE_FIELDS: tuple[_Field, ...] = (
    ("grad_enabled", "grad mode", torch._C.is_grad_enabled, messages.show_flag),
    ("inference_mode", "inference mode", torch.is_inference_mode_enabled, messages.show_flag),
    ("default_dtype", "default dtype", torch.get_default_dtype, messages.show),
    ("deterministic", "deterministic algorithms", torch._C._get_deterministic_algorithms,
     messages.show_flag),
    ("deterministic_warn_only", "deterministic algorithms warn_only",
     torch._C._get_deterministic_algorithms_warn_only, str),
    ("matmul_precision", "float32 matmul precision", torch._C._get_float32_matmul_precision,
     repr),
    ("cuda_matmul_tf32", "torch.backends.cuda.matmul.allow_tf32",
     torch._C._get_cublas_allow_tf32, str),
    ("cudnn_tf32", "torch.backends.cudnn.allow_tf32", torch._C._get_cudnn_allow_tf32, str),
)


@dataclasses.dataclass(frozen=True)
class TorchState:
    """A normalised snapshot of torch's global state (see the module docstring)."""

    grad_enabled: bool
    inference_mode: bool
    autocast: tuple[tuple[str, bool, torch.dtype | None], ...]
    any_autocast: bool
    default_dtype: torch.dtype
    deterministic: bool
    deterministic_warn_only: bool
    matmul_precision: str
    cuda_matmul_tf32: bool
    cudnn_tf32: bool

    @classmethod
    def current(cls) -> TorchState:
        """The state now."""
        values = {field: reader() for field, _, reader, _ in _SIMPLE_FIELDS}
        values["deterministic_warn_only"] = (values["deterministic"]
                                             and values["deterministic_warn_only"])
        autocast = []
        for device in AUTOCAST_DEVICES:
            enabled = torch.is_autocast_enabled(device)
            autocast.append((device, enabled,
                             torch.get_autocast_dtype(device) if enabled else None))
        return cls(autocast=tuple(autocast), any_autocast=torch._C._is_any_autocast_enabled(),
                   **values)

    def differences(self, now: TorchState) -> list[tuple[str, str, str]]:
        """(setting, expected, got) for every setting that differs in `now`, in check order."""
        found = []
        for field, subject, _, show in _SIMPLE_FIELDS[:2]:
            if getattr(self, field) != getattr(now, field):
                found.append((subject, show(getattr(self, field)), show(getattr(now, field))))
        found += self._autocast_differences(now)
        for field, subject, _, show in _SIMPLE_FIELDS[2:]:
            if getattr(self, field) != getattr(now, field):
                found.append((subject, show(getattr(self, field)), show(getattr(now, field))))
        return found

    def _autocast_differences(self, now: TorchState) -> list[tuple[str, str, str]]:
        found = []
        for (device, enabled, dtype), (_, now_enabled, now_dtype) in zip(self.autocast,
                                                                          now.autocast):
            if enabled != now_enabled:
                found.append((f"autocast ({device})", messages.show_flag(enabled),
                              messages.show_flag(now_enabled)))
            elif dtype != now_dtype:
                found.append((f"autocast dtype ({device})", messages.show(dtype),
                              messages.show(now_dtype)))
        if not self.any_autocast and now.any_autocast and not found:
            found.append(("autocast (other devices)", "disabled", "enabled"))
        return found

    def describe(self) -> str:
        """One line listing the state, e.g. `grad mode enabled, autocast disabled, ...`."""
        parts = [f"grad mode {messages.show_flag(self.grad_enabled)}",
                 f"inference mode {messages.show_flag(self.inference_mode)}"]
        enabled = [f"{device} {dtype}" for device, on, dtype in self.autocast if on]
        parts.append("autocast " + (", ".join(enabled) if enabled else "disabled"))
        parts.append(f"default dtype {self.default_dtype}")
        parts.append(f"deterministic algorithms {messages.show_flag(self.deterministic)}"
                     + (" (warn only)" if self.deterministic_warn_only else ""))
        parts.append(f"float32 matmul precision {self.matmul_precision!r}")
        parts.append(f"cuda matmul tf32 {self.cuda_matmul_tf32}, cudnn tf32 {self.cudnn_tf32}")
        return ", ".join(parts)


def _value_condition(call: str, expected: Any, writer: Any) -> str:
    if type(expected) is bool:
        return call if expected else f"not {call}"
    if isinstance(expected, torch.dtype):
        return f"{call} is {writer.bind(expected, str(expected).replace('torch.', ''))}"
    return f"{call} == {expected!r}"


def _autocast_conditions(state: TorchState, writer: Any) -> list[str]:
    if not state.any_autocast:
        return [f"not {writer.bind(torch._C._is_any_autocast_enabled, 'any_autocast')}()"]
    enabled = writer.bind(torch.is_autocast_enabled, "autocast_enabled")
    dtype_of = writer.bind(torch.get_autocast_dtype, "autocast_dtype")
    conditions = []
    for device, on, dtype in state.autocast:
        conditions.append(_value_condition(f"{enabled}({device!r})", on, writer))
        if on:
            conditions.append(_value_condition(f"{dtype_of}({device!r})", dtype, writer))
    return conditions


def state_conditions(state: TorchState, writer: Any) -> list[str]:
    """Conditions that hold exactly when the current state equals `state`."""
    conditions = []
    for index, (field, _, reader, _) in enumerate(_SIMPLE_FIELDS):
        if index == 2:
            conditions += _autocast_conditions(state, writer)
        if field == "deterministic_warn_only" and not state.deterministic:
            continue
        call = f"{writer.bind(reader, field)}()"
        conditions.append(_value_condition(call, getattr(state, field), writer))
    return conditions


def native_state_spec(state: TorchState) -> tuple:
    """The snapshot in the form of the native state step (`guards/native/global_state.h`)."""
    return (state.grad_enabled, state.inference_mode, state.any_autocast, state.autocast,
            state.default_dtype, state.deterministic, state.deterministic_warn_only,
            state.matmul_precision, state.cuda_matmul_tf32, state.cudnn_tf32,
            torch._C._is_any_autocast_enabled)


class GlobalStateGuard(Guard):
    """Torch's global state equals the snapshot taken at capture."""

    rank = RANK_GLOBAL_STATE

    def __init__(self, state: TorchState | None = None) -> None:
        self.source = GlobalStateSource()
        self.state = TorchState.current() if state is None else state

    def key(self) -> Hashable:
        return self.state

    def emit(self, writer: Any) -> None:
        writer.comment(self.describe())
        if not writer.check_state(native_state_spec(self.state), "torch_state_matches()"):
            writer.require(state_conditions(self.state, writer))

    def reason(self, value: Any) -> str | None:
        differences = self.state.differences(value)
        if not differences:
            return None
        return messages.mismatch(*differences[0])

    def describe(self) -> str:
        return f"torch global state: {self.state.describe()}"
