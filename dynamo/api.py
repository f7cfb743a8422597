"""The user-facing entry points: `jit`, `disable`, `reset`.

Input: a function or `nn.Module` and options. Output: a callable that runs the original with
the frame hook's callback (a `FrameDriver`) installed for the current thread, so that its frames
are captured and compiled. The wrapper is a C object (`dynamo._C.ScopedCall`): it adds no
Python frame, so tracebacks read exactly as in eager.
"""
from __future__ import annotations

import dataclasses
import functools
import operator
import threading
import warnings
from typing import Any, Callable, Optional

import torch

from dynamo import _C, hook
from dynamo.backends import with_mode
from dynamo.settings import Config
from dynamo.driver import FrameDriver, reset_driver_state

MODES = (None, "default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


@dataclasses.dataclass(frozen=True)
class JitSettings:
    """What one `jit(...)` call asked for, validated."""

    backend: Callable
    backend_name: str
    mode: Optional[str]
    fullgraph: bool
    dynamic: Optional[bool]
    options: dict


def _validate(backend, mode, fullgraph, dynamic, options) -> JitSettings:
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; expected one of {MODES}")
    if dynamic not in (None, True, False):
        raise ValueError(f"dynamic must be None, True or False, not {dynamic!r}")
    options = dict(options or {})
    known = {field.name for field in dataclasses.fields(Config)}
    unknown = sorted(name for name in options if name not in known)
    if unknown:
        raise ValueError(f"unknown options {unknown}; known options: {sorted(known)}")
    name = backend if isinstance(backend, str) else getattr(backend, "__name__", repr(backend))
    return JitSettings(with_mode(backend, mode), name, mode, bool(fullgraph), dynamic, options)


_warned_unsupported = False


def _warn_unsupported() -> None:
    global _warned_unsupported
    if not _warned_unsupported:
        _warned_unsupported = True
        warnings.warn(f"{hook.unsupported_reason()}; dynamo.jit runs functions eagerly",
                      RuntimeWarning, stacklevel=3)


def jit(fn_or_module=None, *, backend="inductor", mode=None, fullgraph=False, dynamic=None,
        options=None):
    """Compile a function or `nn.Module` just in time; usable as `@jit`, `@jit(...)`, `jit(m)`.

    backend: a name from `dynamo.list_backends()` or a callable `backend(gm, example_inputs)`.
    mode: None/"default", "reduce-overhead" (CUDA graphs) or "max-autotune".
    fullgraph: raise `GraphBreakError` instead of splitting the program at a graph break.
    dynamic: None (default): sizes are specialised until a recompile sees a size change,
        then the changed dimensions are traced symbolically; True: every dimension of every
        input tensor is symbolic from the first compile; False: sizes are always specialised
        (dimensions marked with `dynamo.mark_dynamic` excepted). Sizes 0 and 1 always
        specialise. See docs/dynamic-shapes.md.
    options: overrides of `dynamo.config` fields for this function only.
    """
    settings = _validate(backend, mode, fullgraph, dynamic, options)
    if fn_or_module is None:
        return functools.partial(_jit, settings=settings)
    return _jit(fn_or_module, settings=settings)


def _jit(fn_or_module, *, settings: JitSettings):
    if not hook.SUPPORTED:
        _warn_unsupported()
        return fn_or_module
    driver = FrameDriver(settings)
    if isinstance(fn_or_module, torch.nn.Module):
        return _jit_module(fn_or_module, driver)
    if not callable(fn_or_module):
        raise TypeError(f"dynamo.jit expects a function or nn.Module, got "
                        f"{type(fn_or_module).__name__}")
    code = getattr(fn_or_module, "__code__", None)
    if code is not None:
        driver.allow(code)
    jitted = _C.ScopedCall(fn_or_module, driver)
    functools.update_wrapper(jitted, fn_or_module)
    jitted._framejit_driver = driver
    return jitted


def _jit_module(module: torch.nn.Module, driver: FrameDriver) -> torch.nn.Module:
    """A module of a one-off subclass that shares `module.__dict__` (parameters, buffers,
    submodules, `training`, hooks) and whose calls run under the frame hook."""
    cls = type(module)
    forward = getattr(cls.forward, "__code__", None)
    if forward is not None:
        driver.allow(forward)

    def reduce_as_original(self, protocol):
        return operator.getitem, ([module], 0)  # unpickles as the original module

    namespace = {
        "__call__": _C.ScopedCall(cls.__call__, driver),
        "__reduce_ex__": reduce_as_original,
        "__module__": cls.__module__,
        "__qualname__": cls.__qualname__,
        "_framejit_original": module,
        "_framejit_driver": driver,
    }
    jitted_cls = type(cls.__name__, (cls,), namespace)
    jitted = object.__new__(jitted_cls)
    object.__setattr__(jitted, "__dict__", module.__dict__)
    return jitted


class _DisableScope:
    """`with dynamo.disable():` and `@dynamo.disable()`: no capture inside."""

    def __init__(self):
        self._saved = threading.local()

    def __enter__(self):
        stack = self._saved.__dict__.setdefault("stack", [])
        stack.append(hook.set_callback(None))
        return self

    def __exit__(self, *exc_info):
        hook.set_callback(self._saved.stack.pop())
        return False

    def __call__(self, fn):
        return disable(fn)


def disable(fn=None):
    """Run `fn` (decorator) or a `with` block eagerly, with no frame capture inside."""
    if fn is None:
        return _DisableScope()
    wrapper = _C.ScopedCall(fn, None)
    functools.update_wrapper(wrapper, fn)
    wrapper._framejit_disabled = True
    return wrapper


def reset() -> None:
    """Drop every compiled entry, skip mark, recompile count and cached artifact."""
    hook.clear_all()
    reset_driver_state()


def is_jitted(obj: Any) -> bool:
    """Whether `obj` came from `dynamo.jit`."""
    return hasattr(obj, "_framejit_driver")
