"""The per-frame driver: the only module that knows the order of the capture stages.

Input: a `FrameView` handed over by the hook on a cache miss. Output: the hook's answer —
`None` (run as is), `SKIP` (never intercept this code again) or a replacement code object
that was also stored as a cache entry with its check.

Stages per frame: decode -> trace (symbolic interpreter) -> guards -> backend -> rewrite ->
install. Until capture lands, `JIT_NOP_REWRITE=1` (or `dynamo.config.nop_rewrite`) sends each
frame through decode -> rewrite -> install with NOPs inserted; otherwise frames run eagerly.
"""
from __future__ import annotations

import warnings
import weakref
from types import CodeType

from dynamo import hook, rewrite, skips
from dynamo.settings import config

_NOP = rewrite.NopRewriteDriver()


class FrameDriver:
    """The frame callback of one `jit(...)` call: capture policy plus compiled-entry bookkeeping."""

    def __init__(self, settings):
        self.settings = settings
        self._allowed: "weakref.WeakSet[CodeType]" = weakref.WeakSet()

    def allow(self, code: CodeType) -> None:
        """Capture frames of `code` even if it lives in a library file."""
        self._allowed.add(code)

    def option(self, name: str):
        """A `dynamo.config` value, overridden by this jit call's `options`."""
        return self.settings.options.get(name, getattr(config, name))

    def __call__(self, view):
        code = view.f_code
        hook.note_seen(code)
        if self.option("nop_rewrite"):
            return _NOP(view)
        if skips.is_own(code) or (skips.is_library(code) and code not in self._allowed):
            return hook.SKIP
        try:
            return self._compile(view)
        except Exception as error:  # an internal compiler error never breaks the program
            if not self.option("suppress_errors"):
                raise
            _warn_fallback(code, error)
            return hook.SKIP

    def _compile(self, view):
        return hook.SKIP  # frame capture is a later stage (issue 4)


def _warn_fallback(code: CodeType, error: Exception) -> None:
    where = f"{code.co_filename}:{code.co_firstlineno}"
    detail = "" if config.verbose else " (set dynamo.config.verbose=True for the traceback)"
    warnings.warn(f"framejit: internal error while compiling {code.co_qualname} at {where}; "
                  f"running it eagerly: {type(error).__name__}: {error}{detail}",
                  RuntimeWarning, stacklevel=2)


def reset_driver_state() -> None:
    """Forget per-code compile state (recompile counts and the like)."""
