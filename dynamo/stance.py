"""The process-wide capture policy: `dynamo.set_stance(...)` and `dynamo.config.disable`.

Input: a stance named by the user (torch.compiler's names: "default", "force_eager",
"eager_on_recompile", "fail_on_recompile") and the `disable` field of `dynamo.config`
(`JIT_DISABLE=1`). Output: the policy the per-frame driver reads on a cache miss
(`current()`), and the hook's process-wide capture-off flag, on while the stance is
"force_eager" or `config.disable` is true (then no frame is intercepted and no compiled entry
runs: jitted functions call their function as is).

Like `torch.compiler.set_stance`, whose stance is one module global, the stance is
process-wide: one thread's `set_stance` changes every thread's calls. `dynamo.disable`
(`dynamo.api`) is the per-thread switch.
"""
from __future__ import annotations

import functools
import threading
from types import CodeType
from typing import Callable, Optional

from dynamo import hook
from dynamo.settings import DISABLE_LISTENERS, config

STANCES = ("default", "force_eager", "eager_on_recompile", "fail_on_recompile")

_current = "default"
_lock = threading.Lock()


class RecompileError(RuntimeError):
    """A call matched no compiled entry while the stance is "fail_on_recompile".

    Cause: the named function would have been compiled (again) for this call; the message
    names the guard of the closest compiled entry that failed. Fix: make the call match the
    inputs it was compiled for, mark the changing sizes dynamic (`dynamo.mark_dynamic`), or
    allow compiling again with `dynamo.set_stance("default")`.
    """


def current() -> str:
    """The stance in force now."""
    return _current


def _apply() -> None:
    hook.set_process_disabled(bool(config.disable) or _current == "force_eager")


def _set(stance: str) -> str:
    """Make `stance` current; returns the previous one."""
    global _current
    with _lock:
        previous, _current = _current, stance
        _apply()
    return previous


def set_stance(stance: str = "default", *, skip_guard_eval_unsafe: bool = False,
               force_backend: Optional[object] = None) -> "StanceSetting":
    """Set the stance of every jitted function: as a call, a context manager or a decorator.

        dynamo.set_stance("force_eager")         # from now on, until set again
        with dynamo.set_stance("fail_on_recompile"):
            step(x)                              # a recompile raises RecompileError
        @dynamo.set_stance("eager_on_recompile") # while the decorated function runs
        def serve(x): ...

    Stances: "default" (compile on a cache miss); "force_eager" (run everything eagerly:
    nothing is compiled and compiled entries are not used); "eager_on_recompile" (a call that
    matches a compiled entry uses it, any other call runs eagerly without compiling);
    "fail_on_recompile" (a call that would compile raises `RecompileError`, naming the
    function and the guard that failed). The stance is process-wide, as torch's is.
    """
    if stance not in STANCES:
        raise ValueError(f"unknown stance {stance!r}; expected one of {STANCES} "
                         "(torch's 'eager_then_compile' and 'aot_eager_then_compile' "
                         "are not supported)")
    if skip_guard_eval_unsafe:
        raise ValueError("skip_guard_eval_unsafe=True is not supported: framejit always "
                         "checks every guard")
    if force_backend is not None:
        raise ValueError("force_backend is not supported: pass backend= to dynamo.jit")
    return StanceSetting(stance, _set(stance))  # the call form takes effect at once, as torch's


set_stance._framejit_stance = True  # a call inside a jitted function: `dynamo.variables.disabled`


class StanceSetting:
    """What `set_stance(...)` returns: already in force; a `with` block or a decorated
    function puts the previous stance back when it ends."""

    def __init__(self, stance: str, previous: str):
        self.stance = stance
        self.previous = previous

    def __enter__(self) -> None:
        _set(self.stance)

    def __exit__(self, *exc_info) -> bool:
        _set(self.previous)
        return False

    def __call__(self, fn: Callable) -> Callable:
        _set(self.previous)  # as a decorator it applies only while `fn` runs
        stance = self.stance

        @functools.wraps(fn)
        def with_stance(*args, **kwargs):
            previous = _set(stance)
            try:
                return fn(*args, **kwargs)
            finally:
                _set(previous)
        return with_stance


def recompile_error(code: CodeType, reason: Optional[str]) -> RecompileError:
    """The error a cache miss raises under "fail_on_recompile"."""
    where = f"{code.co_qualname} ({code.co_filename}:{code.co_firstlineno})"
    if reason is None:
        why = "it has no compiled entry yet"
    else:
        why = f"no compiled entry matches: {reason}"
    return RecompileError(
        f"framejit: {where} would be compiled, but the stance is 'fail_on_recompile' "
        f"({why}). Make the call match the inputs it was compiled for, or call "
        f"dynamo.set_stance('default') to allow compiling.")


DISABLE_LISTENERS.append(_apply)
_apply()  # JIT_DISABLE=1 in the environment
