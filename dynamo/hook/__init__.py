"""Stage "intercept": the Python face of the C frame hook (`dynamo._C`).

Input: a per-thread frame callback. Output: frames of jitted regions reach the callback as
`FrameView`s; cache entries `(check, code)` stored on code objects run without it.

The C side is mechanism only. This module adds the bookkeeping that policy needs: which code
objects carry entries or skip marks (so `reset()` can drop them), and a scope object that
installs a callback for the duration of a call and always restores the previous one.
"""
from __future__ import annotations

import functools
import sys
import threading
import weakref
from types import CodeType
from typing import Callable, Optional

from dynamo import _C

SUPPORTED: bool = bool(_C.SUPPORTED)
SKIP = _C.SKIP
"""A callback returns this to mark the frame's code object as never intercepted."""
DISABLE = _C.DISABLE
"""A callback returns this to run the frame, and everything it calls, with capture off (the
choice is remembered for the code object); as a `ScopedCall` callback it calls the function
so (`dynamo.disable`)."""

FrameView = getattr(_C, "FrameView", None)
Check = Callable[[dict, dict], object]

# Code objects that carry entries or skip marks: id -> weak reference. Only C-level operations
# run while the lock is held: a Python frame there (a WeakSet's `add`) is itself intercepted
# by this thread's callback, which touches again (a NOP-rewriting driver deadlocked on a plain
# lock) or compiles under its own locks while another thread waits here.
_touched: "dict[int, weakref.ref]" = {}
_touched_lock = threading.RLock()  # reentrant: a reference's callback may run while held


def _forget(key: int, reference: weakref.ref) -> None:
    with _touched_lock:
        if _touched.get(key) is reference:
            del _touched[key]


def _touch(code: CodeType) -> None:
    key = id(code)
    with _touched_lock:
        known = _touched.get(key)
        if known is None or known() is not code:
            _touched[key] = weakref.ref(code, functools.partial(_forget, key))


def unsupported_reason() -> Optional[str]:
    """Why the hook cannot run on this interpreter, or None when it can."""
    if SUPPORTED:
        return None
    version = ".".join(map(str, sys.version_info[:3]))
    return f"framejit's frame hook supports CPython 3.11 and 3.12; this is CPython {version}"


def set_callback(callback: Optional[Callable]) -> Optional[Callable]:
    """Install `callback` for this thread (None removes it); returns the previous one."""
    return _C.set_callback(callback)


def adjust_thread_disabled(delta: int) -> int:
    """Add `delta` to this thread's capture-off depth (while above zero no frame of the thread
    is intercepted, no cache entry runs, and jitted callables run their function as is);
    returns the new depth."""
    return _C.adjust_thread_disabled(delta)


def set_process_disabled(flag: bool) -> bool:
    """Turn capture off (True) or back on in every thread; returns the previous flag."""
    return _C.set_process_disabled(flag)


def get_callback() -> Optional[Callable]:
    """This thread's callback, or None."""
    return _C.get_callback()


def entries(code: CodeType) -> list:
    """The live list of `(check, replacement_code)` entries of `code`, most recent hit first."""
    _touch(code)
    return _C.cache_entries(code)


def add_entry(code: CodeType, check: Optional[Check], replacement: CodeType) -> tuple:
    """Put a new entry at the front of `code`'s cache; `check=None` always matches."""
    entry = (check, replacement)
    entries(code).insert(0, entry)
    return entry


def remove_entry(code: CodeType, entry: tuple) -> None:
    """Drop one entry (e.g. when an object it identity-guards dies)."""
    live = _C.cache_entries(code)
    for index, candidate in enumerate(live):
        if candidate is entry:
            del live[index]
            return


def mark_skip(code: CodeType, skip: bool = True) -> None:
    """Never (or again) intercept frames of `code`."""
    _touch(code)
    _C.set_skip(code, skip)


def is_skipped(code: CodeType) -> bool:
    return _C.get_skip(code)


def note_seen(code: CodeType) -> None:
    """Remember a code object the callback answered for, so `clear_all` can find it."""
    _touch(code)


def clear_all() -> None:
    """Drop every cache entry and skip mark this process has made."""
    with _touched_lock:
        references = list(_touched.values())
        _touched.clear()
    for reference in references:
        code = reference()
        if code is None:
            continue
        del _C.cache_entries(code)[:]
        _C.set_skip(code, False)


def set_disable_filter(filter: Optional[Callable[[CodeType], bool]]) -> Optional[Callable]:
    """Install the process-wide filter naming code whose frames, and everything they call, run
    with capture off (None removes it); returns the previous one. The C hook asks it once per
    code object, the first time one of its frames (fresh or resumed) meets a thread with a
    callback, before any cache entry or callback, and marks the code DISABLE where it answers
    true: such code is never handed to a callback, nor is anything it calls.
    `dynamo.skips` installs `is_compiler`."""
    return _C.set_disable_filter(filter)


def counters() -> dict:
    """Cache hits and misses seen by the C walk, frames run with capture off because their
    code is marked DISABLE (`disabled_runs`), how many threads have a callback, and whether
    the eval-frame function is installed (`installed`)."""
    return _C.counters()
