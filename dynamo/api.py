"""The user-facing entry points: `jit`, `disable`, `reset`.

Input: a function or `nn.Module` and options. Output: a callable that runs the original with
the frame hook's callback (a `FrameDriver`) installed for the current thread, so that its frames
are captured and compiled. The wrapper is a C object (`dynamo._C.ScopedCall`): it adds no
Python frame, so tracebacks read exactly as in eager.

`disable` turns capture off for the current thread while a function or `with` block runs:
jitted functions and modules called inside run their original code and compile nothing.
The process-wide switches (`set_stance`, `config.disable`) live in `dynamo.stance`.
"""
from __future__ import annotations

import dataclasses
import functools
import operator
import threading
from typing import Any, Callable, Optional

import torch

from dynamo import _C, hook, stance  # noqa: F401  (stance: JIT_DISABLE applied at import)
from dynamo.backends import with_mode
from dynamo.settings import Config
from dynamo.driver import FrameDriver, reset_driver_state, warn_at_user

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
    options = torch_options(options or {})
    mode = _mode_from_options(mode, options)
    if dynamic not in (None, True, False):
        raise ValueError(f"dynamic must be None, True or False, not {dynamic!r}")
    name = backend if isinstance(backend, str) else getattr(backend, "__name__", repr(backend))
    return JitSettings(with_mode(backend, mode), name, mode, bool(fullgraph), dynamic, options)


_warned_unsupported = False


def _warn_unsupported() -> None:
    global _warned_unsupported
    if not _warned_unsupported:
        _warned_unsupported = True
        warn_at_user(f"{hook.unsupported_reason()}; dynamo.jit runs functions eagerly",
                     RuntimeWarning)


# torch.compile's `options=` keys (torch._inductor.config names) that choose a mode here
TORCH_MODE_OPTIONS = ("max_autotune", "max_autotune_gemm", "max_autotune_pointwise",
                      "triton.cudagraphs")
# torch.compile options with no counterpart here, and why (named in the error)
_TORCH_OPTIONS_WITHOUT_COUNTERPART = {
    "epilogue_fusion": "framejit keeps matmuls as library calls (no templates to fuse into)",
    "shape_padding": "framejit does not pad shapes",
    "freezing": "framejit does not fold parameters into constants",
    "trace.enabled": "use JIT_LOGS=graph,output_code",
    "coordinate_descent_tuning": "max_autotune (or mode='max-autotune') tunes kernel configs",
}


def torch_options(options: dict) -> dict:
    """`options=` checked: `dynamo.config` field names, and torch.compile's option keys that
    choose a mode here (`max_autotune`, `triton.cudagraphs`, ...; kept under `_torch_modes`
    for `_mode_from_options`). Any other key is a ValueError naming every accepted key."""
    known = {field.name for field in dataclasses.fields(Config)}
    result: dict = {}
    unknown = []
    for name, value in options.items():
        if name in known:
            result[name] = value
        elif name in TORCH_MODE_OPTIONS:
            result.setdefault("_torch_modes", {})[name] = bool(value)
        else:
            why = _TORCH_OPTIONS_WITHOUT_COUNTERPART.get(name)
            unknown.append(f"{name!r} ({why})" if why else repr(name))
    if unknown:
        raise ValueError(f"unknown options [{', '.join(unknown)}]; accepted: the torch.compile "
                         f"options {list(TORCH_MODE_OPTIONS)} (they choose `mode`) and the "
                         f"dynamo.config fields {sorted(known)}")
    return result


def _mode_from_options(mode: Optional[str], options: dict) -> Optional[str]:
    """The mode torch.compile's `max_autotune*` / `triton.cudagraphs` options ask for. As in
    torch.compile, they and `mode=` cannot both be given."""
    asked = options.pop("_torch_modes", None)
    if not asked:
        return mode
    if mode is not None:
        raise ValueError(f"mode={mode!r} and options {sorted(asked)}: give one or the other "
                         f"(as torch.compile requires)")
    autotune = any(asked.get(name, False) for name in TORCH_MODE_OPTIONS[:3])
    cudagraphs = asked.get("triton.cudagraphs", False)
    return {(False, False): None, (False, True): "reduce-overhead",
            (True, False): "max-autotune-no-cudagraphs", (True, True): "max-autotune"}[
        (autotune, cudagraphs)]


def jit(fn_or_module=None, *, backend="inductor", mode=None, fullgraph=False, dynamic=None,
        options=None, disable=False):
    """Compile a function or `nn.Module` just in time; usable as `@jit`, `@jit(...)`, `jit(m)`.

    backend: a name from `dynamo.list_backends()` or a callable `backend(gm, example_inputs)`.
    mode: None/"default", "reduce-overhead" (CUDA graphs) or "max-autotune".
    fullgraph: raise `GraphBreakError` instead of splitting the program at a graph break.
    dynamic: None (default): sizes are specialised until a recompile sees a size change,
        then the changed dimensions are traced symbolically; True: every dimension of every
        input tensor is symbolic from the first compile; False: sizes are always specialised
        (dimensions marked with `dynamo.mark_dynamic` excepted). Sizes 0 and 1 always
        specialise. See docs/dynamic-shapes.md.
    options: overrides of `dynamo.config` fields for this function only, and torch.compile's
        option keys that mean something here (`max_autotune`, `triton.cudagraphs`, ...).
    disable: True returns the function or module unchanged (as torch.compile's `disable=True`).
    """
    settings = _validate(backend, mode, fullgraph, dynamic, options)
    if disable or settings.options.get("disable"):
        return (lambda target: target) if fn_or_module is None else fn_or_module
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
    """`with dynamo.disable():` and `@dynamo.disable()`: capture off in this thread inside,
    jitted callees included. Reusable and re-entrant (each entry saves its own callback)."""

    def __init__(self):
        self._saved = threading.local()

    def __enter__(self):
        stack = self._saved.__dict__.setdefault("stack", [])
        stack.append(hook.set_callback(None))
        hook.adjust_thread_disabled(1)
        return self

    def __exit__(self, *exc_info):
        hook.adjust_thread_disabled(-1)
        hook.set_callback(self._saved.stack.pop())
        return False

    def __call__(self, fn):
        return disable(fn)


def disable(fn=None):
    """Run `fn` (decorator) or a `with` block eagerly: nothing inside is captured in this
    thread, including jitted functions and modules it calls, which run their original code.
    Called inside a jitted function, the function is a graph break (it runs eagerly) and a
    `with dynamo.disable():` block one break after which the call runs eagerly."""
    if fn is None:
        return _DisableScope()
    wrapper = _C.ScopedCall(fn, hook.DISABLE)
    functools.update_wrapper(wrapper, fn)
    wrapper._framejit_disabled = True
    return wrapper


disable._framejit_disable_scope = True  # traced: `dynamo.variables.disabled`


def reset() -> None:
    """Drop every compiled entry, skip mark, recompile count and cached artifact."""
    hook.clear_all()
    reset_driver_state()


def is_jitted(obj: Any) -> bool:
    """Whether `obj` came from `dynamo.jit`."""
    return hasattr(obj, "_framejit_driver")
